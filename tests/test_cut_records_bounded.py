"""A big log of queue-callback records cut before `code:` is read in bounded work (issue 36: 3 MB of
them took 31-41 s in triage). Two steps were quadratic: the callback patterns' lazy description ran
from every record of a joined line to its end, and the paste front end asked every ROCclr line
whether it was the cut rest of the one before (each time joined to its neighbours and tried against
every record pattern). The bound is the CPU time of the triage process, generous (a few seconds
here after the fix, minutes before), and a wall clock far above it as a hang guard."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys

# ROCclr's own line (corpus runtime/*: `:0:rocdevice.cpp :2893: 90021033577 us: [pid:192145
# tid:0x76fa7d3ff640] Callback: Queue 0x76f676200000 aborting with error : HSA_STATUS_ERROR_EXCEPTION:
# An HSAIL operation resulted in a hardware exception. code: 0x1016`), cut before its `code:`.
ROCCLR = (":0:rocdevice.cpp            :2893: {us} us: [pid:{pid} tid:0x76fa7d3ff640] Callback: Queue "
          "0x{queue:x} aborting with error : HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted in a "
          "hardware exception.")
BARE = ("Callback: Queue 0x{queue:x} aborting with error : HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation "
        "resulted in a hardware exception.")
CPU_BOUND_S = 60


def _triage_cpu(path) -> tuple[dict, float]:
    """The JSON report and the CPU seconds the triage process used (its own, not the machine's)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    res = subprocess.run([sys.executable, "-m", "faultkit.cli", "triage", str(path), "--format", "json"],
                         capture_output=True, text=True, timeout=300, env={**os.environ})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert "Traceback" not in res.stderr, res.stderr[-2000:]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(res.stdout), cpu


def _write(path, shape: str, size: int) -> list[str]:
    lines, total, i = [], 0, 0
    while total < size:
        # counters of varying width, as a real log's are (stamps grow, pids and queues differ)
        line = shape.format(us=90021033577 + i * 37, pid=192145 + i % 5, queue=0x76f676200000 + i * 0x1000)
        lines.append(line)
        total += len(line) + 1
        i += 1
    path.write_text("\n".join(lines) + "\n")
    return lines


def test_three_mb_of_rocclr_callbacks_cut_before_code(tmp_path):
    log = tmp_path / "server.log"
    lines = _write(log, ROCCLR, 3 << 20)
    doc, cpu = _triage_cpu(log)
    assert cpu < CPU_BOUND_S, f"triage of 3 MB took {cpu:.1f} CPU s"
    # every cut record is still read: its status, and the code that status stands for (0x1016,
    # the code the whole line prints after HSA_STATUS_ERROR_EXCEPTION)
    assert len(doc["faults"]) == len(lines)
    assert {(f["detail"]["status"], f["code"]) for f in doc["faults"]} == {("HSA_STATUS_ERROR_EXCEPTION", "0x1016")}
    assert doc["faults"][-1]["detail"]["origin"].endswith(f"server.log:{len(lines)}")


def test_callbacks_without_rocclr_prefix_cut_before_code(tmp_path):
    log = tmp_path / "pasted.log"
    lines = _write(log, BARE, 1 << 20)
    doc, cpu = _triage_cpu(log)
    assert cpu < CPU_BOUND_S / 3, f"triage of 1 MB took {cpu:.1f} CPU s"
    assert len(doc["faults"]) == len(lines)
    assert {f["detail"]["status"] for f in doc["faults"]} == {"HSA_STATUS_ERROR_EXCEPTION"}


def test_many_records_on_one_line_read_in_linear_time():
    """The description of a record never runs into the next record, so each record's scan stops at
    the next one (60 records on one line, what a reporter's join of cut lines makes, cost 60 scans
    of one record, not 60 scans to the line's end): the code is the last record's, and the match
    starts there (before, it started at the first record and ran over all 60)."""
    from faultkit.ingest.runtime_log import BARE_STATUS, CALLBACK
    one = BARE.format(queue=0x7f00) + " "
    line = one * 60 + "code: 0x1016"
    # the match, if any, starts at the last record (the code is that record's)
    m = CALLBACK.search(line)
    assert m is not None and m.start() == len(one) * 59
    m = BARE_STATUS.search(line)
    assert m is not None and m.start() == len(one) * 59 + one.index("HSA_STATUS")
