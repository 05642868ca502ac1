"""plan.json and result.json as typed records: every field of the wrong type is a clear problem
through the CLI (never exit 70), and the records read back what the runner wrote (#28, #22 item 6)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from faultkit.cli import main
from faultkit.trials.records import FAILED_TO_START, EnvCheck, Plan, PlanEntry, PlanSpec, ArmSpec, RecordError, \
    TrialResult

# One value of each JSON type; each field is replaced by every one of another type than its own.
SAMPLES = {"int": 7, "float": 2.5, "str": "x", "bool": True, "null": None, "list": [1], "dict": {"a": 1}}


def _kind(v) -> str:
    return {bool: "bool", int: "int", float: "float", str: "str", type(None): "null", list: "list",
            dict: "dict"}[type(v)]


def _paths(value, prefix=()):
    """Every field of a JSON document (lists: their first element only)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield prefix + (k,), v
            yield from _paths(v, prefix + (k,))
    elif isinstance(value, list) and value:
        yield prefix + (0,), value[0]
        yield from _paths(value[0], prefix + (0,))


def _set(doc, path, v):
    for k in path[:-1]:
        doc = doc[k]
    doc[path[-1]] = v


def mutants(doc):
    for path, original in _paths(doc):
        for kind, sample in SAMPLES.items():
            if kind != _kind(original):
                m = copy.deepcopy(doc)
                _set(m, path, sample)
                yield "/".join(map(str, path)) + f"={kind}", m


@pytest.fixture(scope="module")
def trials_folder(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("fz") / "t"
    res = CliRunner().invoke(main, ["trials", "run", "--arm", "a=sleep 0.3", "--arm", "b=exit 3", "--env-arm", "a:X=1",
                                    "--metric", "(x)", "-n", "1", "--trial-timeout", "20s", "-o", str(out)])
    assert res.exit_code == 0, res.output
    return out


def _no_internal_error(res) -> None:
    assert res.exit_code != 70 and "Traceback" not in res.output and "internal error" not in res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)


def test_result_fields_of_the_wrong_type_are_said(trials_folder, tmp_path):
    path = next(trials_folder.glob("trial-*/result.json"))
    original = path.read_text()
    doc = json.loads(original)
    seen = 0
    try:
        for name, m in mutants(doc):
            path.write_text(json.dumps(m))
            res = CliRunner().invoke(main, ["trials", "report", str(trials_folder), "-f", "json"])
            _no_internal_error(res)
            try:
                TrialResult.from_json(m)
            except RecordError as exc:
                # refused with the field named, and the other trial still reported
                assert "cut or malformed" in res.output and str(exc) in res.output, name
                assert res.exit_code == 0, name
            seen += 1
    finally:
        path.write_text(original)
    assert seen > 150            # every field, every other type


def test_plan_fields_of_the_wrong_type_are_said(trials_folder):
    path = trials_folder / "plan.json"
    original = path.read_text()
    doc = json.loads(original)
    seen = refused = 0
    try:
        for name, m in mutants(doc):
            path.write_text(json.dumps(m))
            rep = CliRunner().invoke(main, ["trials", "report", str(trials_folder), "-f", "json"])
            _no_internal_error(rep)
            assert rep.exit_code == 0, name                   # the trials are reported without their plan
            try:
                Plan.from_json(m)
            except RecordError as exc:
                refused += 1
                assert "reported without their plan" in rep.output and str(exc) in rep.output, name
                run = CliRunner().invoke(main, ["trials", "run", "--arm", "a=sleep 0.3", "--arm", "b=exit 3", "--env-arm",
                                                "a:X=1", "--metric", "(x)", "-n", "1", "--trial-timeout", "20s",
                                                "-o", str(trials_folder)])
                _no_internal_error(run)
                assert run.exit_code == 1 and "not a faultkit trials plan" in run.output, name
            seen += 1
    finally:
        path.write_text(original)
    assert seen > 100 and refused > 80


def test_a_plan_naming_an_arm_it_does_not_have_is_refused(trials_folder):
    path = trials_folder / "plan.json"
    original = path.read_text()
    try:
        doc = json.loads(original)
        doc["order"][0]["arm"] = "../../elsewhere"
        path.write_text(json.dumps(doc))
        run = CliRunner().invoke(main, ["trials", "run", "--arm", "a=sleep 0.3", "--arm", "b=exit 3", "--env-arm", "a:X=1",
                                        "--metric", "(x)", "-n", "1", "--trial-timeout", "20s", "-o", str(trials_folder)])
        _no_internal_error(run)
        assert run.exit_code == 1 and "names arm '../../elsewhere', which is not one of the plan's arms" in run.output
    finally:
        path.write_text(original)


def test_deep_nesting_is_a_problem_not_a_crash(trials_folder):
    path = next(trials_folder.glob("trial-*/result.json"))
    original = path.read_text()
    try:
        path.write_text("[" * 100_000 + "]" * 100_000)
        res = CliRunner().invoke(main, ["trials", "report", str(trials_folder), "-f", "json"])
        _no_internal_error(res)
        assert res.exit_code == 0 and "cut or malformed" in res.output
    finally:
        path.write_text(original)


def test_records_round_trip_what_the_runner_wrote(trials_folder):
    plan = Plan.from_json(json.loads((trials_folder / "plan.json").read_text()))
    assert plan.arm_names == ["a", "b"] and plan.spec.n == 1 and len(plan.order) == 2
    assert Plan.from_json(plan.to_json()) == plan
    by_arm = {r.arm: r for r in (TrialResult.from_json(json.loads(p.read_text()))
                                 for p in trials_folder.glob("trial-*/result.json"))}
    # `exit 3` is the shell's own status 3: a crash by the trials' rule (nonzero exit), not a failed start
    assert by_arm["b"].exit_code == 3 and by_arm["b"].crashed and by_arm["b"].outcome == "crash"
    assert by_arm["a"].outcome == "no-crash" and by_arm["a"].env.ok and by_arm["a"].env.wanted == {"X": "1"}
    for r in by_arm.values():
        assert TrialResult.from_json(r.to_json()) == r


def test_results_written_before_outcomes_still_read():
    old = {"schema": "faultkit.trials.result/1", "index": 0, "pair": 0, "arm": "a", "crashed": True,
           "ended_by": "server-exit", "duration_s": 1.0, "env": {"ok": True, "checked": [1], "mismatches": []}}
    r = TrialResult.from_json(old)
    assert r.outcome == "crash" and r.counted and r.env.exited == []
    with pytest.raises(RecordError, match="'crashed' and 'outcome' disagree"):
        TrialResult.from_json(old | {"outcome": FAILED_TO_START})
    with pytest.raises(RecordError, match="field 'index' is True, not integer"):
        TrialResult.from_json(old | {"index": True})
    with pytest.raises(RecordError, match="field 'duration_s' is nan, not a finite number"):
        TrialResult.from_json(old | {"duration_s": float("nan")})


def test_plan_equality_is_what_resume_compares():
    spec = PlanSpec([ArmSpec("a", "true", "sha256:1")], 1, 0, None, None, 10.0)
    assert spec == PlanSpec.from_json(json.loads(json.dumps(spec.to_json())))
    assert Plan(spec, [PlanEntry(0, 0, 0, "a")]).order[0].arm == "a"
    assert EnvCheck.from_json({"ok": False}).mismatches == []
