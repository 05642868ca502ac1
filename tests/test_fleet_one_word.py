"""The fleet's one decision, one word: a hardware-only incident (RAS errors, VRAM lost at a mode-1
reset, no fault) reaches the registry, and the word the node agent says for an incident (its
summary, the Prometheus `suspect` label) is the registry's word for the same evidence. Through the
real CLI (`watch --mode npd --db`, `--textfile`, `registry top/show`) on the corpus's kernel logs."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("duckdb", reason="the registry's extra is not installed: pip install 'faultkit[fleet]'")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DMESG = ROOT.parent / "shared" / "corpus" / "dmesg"
RAS = DMESG / "gfx942_mi300x_8gpu_ras_athub_aca_cp_preemption_rocm_issue_4021.txt"
RESET = DMESG / "gfx942_mi300x_hive_mode1_reset_vram_lost_rocm_issue_4021.txt"
PAGE_FAULT = DMESG / "gfx9_gfxhub0_noretry_rocm_amdgpu_issue_172.txt"
needs_corpus = pytest.mark.skipif(not RAS.exists(), reason=f"shared corpus not found at {DMESG}")


def evidence(*paths: Path) -> str:
    return "".join(ln for p in paths for ln in p.read_text().splitlines(True) if not ln.startswith("#"))


def cli(*args):
    return subprocess.run([sys.executable, "-m", "faultkit.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def watch_once(tmp: Path, text: str):
    log, spool, db, prom = tmp / "kern.log", tmp / "spool", tmp / "reg.duckdb", tmp / "faultkit.prom"
    log.write_text(text)
    res = cli("watch", "--from-start", "--quiet-after", "0s", "--node", "n1", "--mode", "npd", "--spool", spool,
              "--kernel-log", log, "--db", db, "--textfile", prom)
    manifests = [json.loads(m.read_text()) for m in spool.glob("*/manifest.json")]
    labels = [s.labels for fam in text_string_to_metric_families(prom.read_text()) for s in fam.samples
              if s.name == "faultkit_incidents_total"]
    return res, manifests, labels, db


def registry_word(db: Path, signature: str) -> str:
    res = cli("registry", "show", signature, "--db", db, "-f", "json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    return doc["suspicion"]["kind"]


@needs_corpus
def test_a_hardware_only_incident_reaches_the_registry_and_is_hardware_in_both(tmp_path):
    text = evidence(RAS, RESET)
    # the GPUs whose own lines show the hardware signs (uncorrectable error, ACA bank events)
    ras_gpus = set(re.findall(r"amdgpu (\S+): \{1\}(?:uncorrectable hardware error|\[Hardware Error\])", text))
    assert len(ras_gpus) == 3 and "VRAM is lost due to GPU reset!" in text
    res, manifests, labels, db = watch_once(tmp_path, text)
    assert res.returncode == 1, res.stderr            # npd: a problem
    assert len(manifests) == 1 and manifests[0]["suspect"] == "hardware"
    top = json.loads(cli("registry", "top", "--db", db, "-f", "json").stdout)
    rows = top["signatures"] if isinstance(top, dict) else top
    assert sum(r["incidents"] for r in rows) == len(ras_gpus)          # one record per GPU with signs
    sig = rows[0]["signature"]
    assert registry_word(db, sig) == "hardware" == manifests[0]["suspect"]
    assert {lb["suspect"] for lb in labels} == {"hardware"}


@needs_corpus
def test_the_agents_word_is_the_registrys_for_a_one_node_fault(tmp_path):
    res, manifests, labels, db = watch_once(tmp_path, evidence(PAGE_FAULT))
    assert res.returncode == 1, res.stderr
    sig = manifests[0]["signature"]
    word = registry_word(db, sig)
    assert word == "undecided"                         # one incident on one GPU, no hardware sign
    assert manifests[0]["suspect"] == word and {lb["suspect"] for lb in labels} == {word}
