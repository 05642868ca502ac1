"""docs/schemas/*.json checked against real outputs: the bundled sample's triage JSON, a capture
bundle of a real crashing command, a real trials run (its plan, results and report)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is a test dependency: pip install -e '.[test]'")

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = ROOT / "docs" / "schemas"
SAMPLE = ROOT / "traces" / "sglang-tp2-mi300x"


def schema(name: str) -> dict:
    doc = json.loads((SCHEMAS / name).read_text())
    jsonschema.Draft202012Validator.check_schema(doc)
    return doc


def errors(name: str, doc) -> list[str]:
    v = jsonschema.Draft202012Validator(schema(name))
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in v.iter_errors(doc)]


def faultkit(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "faultkit.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=180)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("schema") / "b"
    res = faultkit("capture", "-q", "-o", str(out), "--", sys.executable, "-c",
                   "import ctypes; print('about to crash', flush=True); ctypes.string_at(0)")
    assert res.returncode == 139, res.stderr            # the target's SIGSEGV, 128+11
    return out


@pytest.fixture(scope="module")
def trials(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("schema") / "t"
    res = faultkit("trials", "run", "--arm", "base=sleep 0.2; exit 1", "--arm", "fix=sleep 0.2",
                   "--env-arm", "fix:AMD_SERIALIZE_KERNEL=3", "-n", "2", "--trial-timeout", "20s", "-o", str(out))
    assert res.returncode == 0, res.stderr
    return out


def test_the_bundled_sample_report_matches_the_triage_schema():
    res = faultkit("triage", str(SAMPLE), "-f", "json")
    doc = json.loads(res.stdout)
    assert errors("triage-report.schema.json", doc) == []
    assert doc["verdict"]["candidates"]                  # the sample names candidates: the items were checked


def test_the_triage_schema_requires_documented_keys_and_allows_new_ones():
    doc = json.loads(faultkit("triage", str(SAMPLE), "-f", "json").stdout)
    assert errors("triage-report.schema.json", doc | {"claims": [{"kernel": "k"}]}) == []   # keys may be added
    missing = {k: v for k, v in doc.items() if k != "verdict"}
    assert any("'verdict' is a required property" in e for e in errors("triage-report.schema.json", missing))
    wrong = json.loads(json.dumps(doc))
    wrong["verdict"]["level"] = "sure"
    assert any(e.startswith("verdict/level") for e in errors("triage-report.schema.json", wrong))


def test_a_real_capture_bundle_matches_the_manifest_and_triage_schemas(bundle):
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert errors("bundle-manifest.schema.json", manifest) == []
    assert manifest["state"] == "finished" and manifest["exit_code"] in (139, -11)
    report = json.loads(faultkit("triage", str(bundle), "-f", "json").stdout)
    assert errors("triage-report.schema.json", report) == []
    cut = {k: v for k, v in manifest.items() if k not in ("end", "exit_code")}     # finished, yet no end
    assert errors("bundle-manifest.schema.json", cut)


@pytest.mark.parametrize("name", ["fault", "hang", "hang_after"])
def test_the_live_h200_manifests_match(name):
    path = ROOT / "tests" / "data" / "live_h200_coredump" / name / "manifest.json"
    assert errors("bundle-manifest.schema.json", json.loads(path.read_text())) == []


def test_a_real_trials_run_matches_the_plan_result_and_report_schemas(trials):
    assert errors("trials-plan.schema.json", json.loads((trials / "plan.json").read_text())) == []
    results = [json.loads(p.read_text()) for p in sorted(trials.glob("trial-*/result.json"))]
    assert len(results) == 4
    for r in results:
        assert errors("trials-result.schema.json", r) == []
    assert {r["outcome"] for r in results} == {"crash", "no-crash"}
    report = json.loads(faultkit("trials", "report", str(trials), "-f", "json").stdout)
    assert errors("trials-report.schema.json", report) == []
    assert [a["crashes"] for a in report["arms"]] == [2, 0]
    # a result that says it crashed while its outcome says otherwise is refused by the schema too
    bad = results[0] | {"outcome": "no-crash", "crashed": True}
    assert errors("trials-result.schema.json", bad)


def test_show_and_doctor_json_match_their_schemas(bundle):
    show = json.loads(faultkit("show", str(bundle), "-f", "json").stdout)
    assert errors("show.schema.json", show) == [] and show["exit_status"] == 139
    doctor = json.loads(faultkit("doctor", "-f", "json").stdout)
    assert errors("doctor.schema.json", doctor) == []
    odd = {"checks": [{"name": "x", "status": "fine", "found": "", "fix": None}]}
    assert errors("doctor.schema.json", doctor | odd)


def test_the_manifest_schema_is_the_one_generated_from_the_typed_manifest():
    """docs/schemas/bundle-manifest.schema.json is written by scripts/gen_manifest_schema.py from
    faultkit/manifest.py: a field added to the record and not regenerated fails here."""
    from faultkit.manifest import schema_text
    committed = (ROOT / "docs" / "schemas" / "bundle-manifest.schema.json").read_text()
    assert committed == schema_text(), "run python scripts/gen_manifest_schema.py"
    props = json.loads(committed)["properties"]
    for name in ("launch", "agent", "hang_check", "hang_dumps", "stacks_asked", "tree_held_by", "started_as"):
        assert name in props, name


def test_the_typed_manifest_reads_old_bundles_and_says_a_bad_field(tmp_path):
    """Every live bundle's manifest reads into the typed record with no problem (hang_dumps, an object
    written by capture since it exists, was dropped as 'not what it should be' by the old hand spec);
    a field of the wrong type is a problem naming it, the rest of the record is kept."""
    from faultkit.ingest.schema import read_manifest
    hang = ROOT / "tests" / "data" / "live_h200_coredump" / "hang" / "manifest.json"
    m, problems = read_manifest(hang)
    assert problems == []
    raw = json.loads(hang.read_text())
    assert m.hang_dumps == raw["hang_dumps"] and m.root_pid == raw["root_pid"]
    assert m.start.boottime_ns == raw["start"]["boottime_ns"] and m.cores[0].path == raw["cores"][0]["path"]
    bad = dict(raw, root_pid="752", kernel_log={**raw["kernel_log"], "readable": "yes"}, newer_field=[1])
    (tmp_path / "manifest.json").write_text(json.dumps(bad))
    m, problems = read_manifest(tmp_path / "manifest.json")
    said = " | ".join(p.message for p in problems)
    assert "root_pid is a string" in said and "kernel_log.readable is a string" in said
    assert m.root_pid is None and m.kernel_log.readable is None and m.ended_by == raw["ended_by"]
    assert m.extra == {"newer_field": [1]} and m.to_json()["newer_field"] == [1]     # unknown: kept as it was
