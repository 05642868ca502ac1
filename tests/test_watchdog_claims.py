"""A collective's watchdog timeout (#33 item 3): its facts (collective, seq, timeout, rank) in the
JSON, and a hang claim that says who waits in which collective; a report of only these is not
'no GPU fault'. The lines are ProcessGroupNCCL's own (ProcessGroupNCCL.cpp's timeout line and
its createLogPrefix `[PG ID N PG GUID G(desc) Rank N]`), with torchrun's `[rankN]:` tag."""

from __future__ import annotations

import json
import subprocess
import sys

LINES = ("[rank1]:[E1105 10:20:31.123456 4242 torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:616] [Rank 1] "
         "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=31, OpType=ALLREDUCE, NumelIn=1048576, "
         "NumelOut=1048576, Timeout(ms)=600000) ran for 600034 milliseconds before timing out.\n"
         "[rank1]:[E1105 10:20:31.123999 4242 torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1664] "
         "[PG ID 0 PG GUID 0(default_pg) Rank 1] Exception (either an error or timeout) detected by watchdog at "
         "work: 31, last enqueued NCCL work: 31, last completed NCCL work: 30.\n")


def triage(tmp_path, fmt: str) -> str:
    p = tmp_path / "rank1.log"
    p.write_text(LINES)
    r = subprocess.run([sys.executable, "-m", "faultkit.cli", "triage", str(p), "-f", fmt],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_watchdog_facts_and_hang_claim_in_json(tmp_path):
    doc = json.loads(triage(tmp_path, "json"))
    (f,) = doc["faults"]
    d = f["detail"]
    assert (f["kind"], d["collective"], d["seq"], d["timeout_ms"], d["ran_ms"], d["rank"]) == \
        ("collective-timeout", "ALLREDUCE", 31, 600000, 600034, 1)
    (c,) = [c for c in doc["verdict"]["claims"] if c["basis"]["kind"] == "watchdog-timeout"]
    assert c["kernel"] is None and doc["verdict"].get("kernel") is None
    assert "rank 1 is stuck in collective ALLREDUCE #31" in c["why"]
    assert "work 31 enqueued on its GPU stream and not completed" in c["why"]
    assert "last completed 30" in c["why"]


def test_a_report_of_only_watchdog_lines_says_a_collective_timed_out(tmp_path):
    md = triage(tmp_path, "md")
    verdict = md.split("## Fault facts")[0]
    assert "no GPU fault" not in verdict
    # one rank's line is a hang (its watchdog measured the wait), with the rank it waits for unknown
    assert "**likely**" in verdict and "hang (likely)" in verdict
    assert "rank 1 (its pid is not in the log) waits in collective allreduce #31 of process group default_pg for " \
           "600.034 s (timeout 600 s), 1,048,576 elements in" in verdict
    assert "which one is unknown from one rank's log" in verdict
