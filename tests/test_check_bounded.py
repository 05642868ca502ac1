"""`timeline --check` reads under the same rules as triage (issue 28): a regular file, bounded,
compressed batches inflated within limits; bad JSON never raises. Through the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zlib

from faultkit import limits
from faultkit.export.pftrace import P_COMPRESSED, f_bytes
from faultkit.export.pftrace_check import check_json_trace, check_trace


def check(path, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "faultkit.cli", "timeline", "--check", str(path)],
                          capture_output=True, text=True, timeout=timeout)


def test_devices_and_pipes_are_refused_with_a_message(tmp_path):
    res = check("/dev/zero", timeout=30)
    assert res.returncode == 1 and "/dev/zero: a device or socket, not a trace file" in res.stderr
    fifo = tmp_path / "t.pftrace"
    os.mkfifo(fifo)
    res = check(fifo, timeout=30)                  # it blocked forever before
    assert res.returncode == 1 and "a pipe, not a trace file" in res.stderr


def test_a_batch_that_inflates_past_the_bound_is_an_error_not_gigabytes(tmp_path):
    """#28: a 3 MB trace inflating to 3 GiB took 6.3 GB RSS. Here a batch of 3x the per-batch bound."""
    blob = zlib.compress(bytes(3 * limits.INFLATE), 9)
    trace = tmp_path / "bomb.pftrace"
    trace.write_bytes(f_bytes(1, f_bytes(P_COMPRESSED, blob)))
    prog = ("import sys\nfrom faultkit.export.pftrace_check import check_trace\n"
            "r = check_trace(open(sys.argv[1], 'rb').read())\n"
            "print(r.errors[0]); print(int(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1]) // 1024)")
    res = subprocess.run([sys.executable, "-c", prog, str(trace)], capture_output=True, text=True, timeout=300)
    first, rss = res.stdout.strip().splitlines()[-2:]
    assert "compressed packets inflate past" in first
    assert int(rss) < 2 * limits.INFLATE // (1 << 20) + 300, rss
    assert check(trace).returncode == 1


def test_chrome_json_of_the_wrong_types_is_checked_not_raised():
    deep = b"[" * 100_000 + b"]" * 100_000
    assert check_json_trace(deep).errors == ["not a trace: JSON nested too deeply to read"]
    doc = {"traceEvents": [{"ph": "s", "id": {}, "ts": 1}, {"ph": 5}, {"ph": "f", "id": [1], "ts": 2},
                           {"ph": "X", "ts": 1, "dur": 2}], "metadata": 7}
    res = check_json_trace(json.dumps(doc).encode())
    assert res.slices == 1
    assert sum("flow id is" in e for e in res.errors) == 2 and any("'ph' is int" in e for e in res.errors)


def test_a_good_batch_is_still_inflated_and_checked():
    assert check_trace(f_bytes(1, f_bytes(P_COMPRESSED, zlib.compress(b"")))).compressed == 1
