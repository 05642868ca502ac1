"""Lines the fourth adversarial pass (issue 36) found slow: a gdb frame line holding a 4 MB run of
tabs (`dump --read` never ended: the frame pattern's `at FILE:LINE` tail was tried at every
character), and a kernel trace that says `kernel` on every line (each line's fault words were
scanned by each of its neighbours). A real gdb backtrace of a live process, the real CLI."""

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from faultkit.ingest import kernel_mentions

ROOT = Path(__file__).resolve().parent.parent


def test_a_frame_line_with_a_4mb_run_of_tabs(tmp_path):
    if not shutil.which("gdb"):
        pytest.skip("GNU gdb is not installed")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.5)
        bt = subprocess.run(["gdb", "-p", str(sleeper.pid), "-batch", "-ex", "thread apply all bt"],
                            capture_output=True, text=True, timeout=60).stdout
    finally:
        sleeper.kill()
        sleeper.wait()
    lines = bt.splitlines()
    k = next((i for i, ln in enumerate(lines) if ln.startswith("#1 ")), None)
    if k is None:
        pytest.skip("gdb could not read the process (ptrace)")
    head, sep, tail = lines[k].partition(" in ")
    lines[k] = head + sep + tail[:3] + "\t" * (4 << 20) + tail[3:]
    dump = tmp_path / "bt.txt"
    dump.write_text("\n".join(lines) + "\n")
    t = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "faultkit.cli", "dump", "--read", str(dump)], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert time.monotonic() - t < 30 and r.returncode == 0, r.stderr[-2000:]
    assert "internal error" not in r.stderr


def test_each_lines_fault_words_are_scanned_once(monkeypatch):
    calls = []
    real = kernel_mentions._fault_on
    monkeypatch.setattr(kernel_mentions, "_fault_on", lambda text: calls.append(text) or real(text))
    rows = [f"[rank0] step {i}: launching kernel gemm_fp16_{i % 7} on stream 7" for i in range(2000)]
    kernel_mentions.find_mentions("\n".join(rows) + "\n", "kernel_trace.csv")
    assert len(calls) <= len(rows) + 1, len(calls)          # each line once (and the empty last one)
