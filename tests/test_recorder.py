"""The recorder (capture.recorder.LineTee) fed by real writer processes through a real pipe: every
byte lands in the log, the times table numbers lines as the parsers do, and fault / core-dump lines
are found even when a read cuts them in two (issue #35: blocks, not lines)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
import tty

import pytest

from faultkit.capture.recorder import MAX_PENDING, LineTee

# Writes each chunk (a pickled list of bytes) with a pause between, so each arrives in its own read.
WRITER = r"""
import os, pickle, sys, time
for data in pickle.load(open(sys.argv[1], "rb")):
    view = memoryview(data)
    while view:
        view = view[os.write(1, view):]
    time.sleep(0.3)
"""


@pytest.fixture(params=["pipe", "pty"])
def stream(request):
    """The two streams a recorder reads: a pipe (launched targets, --pid: spliced into the log) and
    a pty (the debugger's backend: read and written)."""
    return request.param


def record(tmp_path, *chunks: bytes, redact: bool = False, watch: str | None = None, stream: str = "pipe"):
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "chunks.pickle").write_bytes(pickle.dumps(list(chunks)))
    argv = [sys.executable, "-c", WRITER, str(tmp_path / "chunks.pickle")]
    if stream == "pty":
        master, slave = os.openpty()
        tty.setraw(slave)                                  # bytes as written: no \r added
        p = subprocess.Popen(argv, stdout=slave)
        os.close(slave)
        out = os.fdopen(master, "rb", buffering=0)
    else:
        p = subprocess.Popen(argv, stdout=subprocess.PIPE)
        out = p.stdout
    tee = LineTee(tmp_path, "server")
    tee.redact = redact
    ev = tee.watch_for(watch) if watch else None
    t = threading.Thread(target=tee.run, args=(out,))
    t.start()
    t.join(60)
    p.wait(10)
    out.close()
    assert tee.via == ("read" if redact or stream == "pty" else "splice")
    rows = [r.split("\t") for r in (tmp_path / "server.times.tsv").read_text().splitlines()]
    return tee, (tmp_path / "server.log").read_bytes(), rows, ev


def test_a_fault_line_cut_by_a_read_is_found_whole(tmp_path, stream):
    line = b"[rank1]: Memory access fault by GPU node-3 (Agent handle: 0x55d1) on address 0x7f2c00000000. Reason: Page not present.\n"
    cut = line.index(b"fault") + 2                     # "fa" | "ult": no prefilter word in either half
    tee, log, rows, _ = record(tmp_path, b"step 1 ok\n" + line[:cut], line[cut:] + b"step 2\n", stream=stream)
    assert log == b"step 1 ok\n" + line + b"step 2\n"
    assert tee.fault_line == line.decode().strip()
    # the second read completes line 2 (the fault line) and line 3
    assert [r[0] for r in rows] == ["1", "2"] and float(rows[1][1]) - float(rows[0][1]) >= 0.25
    assert tee.lines == 3


def test_a_line_in_progress_is_on_disk_at_once_and_counted_once(tmp_path, stream):
    """A partial line is written as it comes (not held for its newline); a line longer than
    MAX_PENDING is one line in the numbering, as the parsers split it; the last line may lack its newline."""
    long = b"y" * (MAX_PENDING * 3 + 17)
    chunks = [b"a\nb", b"c\n" + long[: MAX_PENDING * 2], long[MAX_PENDING * 2:] + b"\nok\ntail without newline"]
    tee, log, rows, _ = record(tmp_path, *chunks, stream=stream)
    data = b"".join(chunks)
    assert log == data
    assert tee.lines == len(data.split(b"\n")) == 5    # a, bc, the long line, ok, the tail
    firsts = [int(r[0]) for r in rows]
    # write 1 completes line 1 (a), write 2 line 2 (bc), write 3 lines 3 (the long one) and 4, the end line 5
    assert firsts == [1, 2, 3, 5] and all(len(r) == 4 for r in rows)
    assert tee.fault_line is None and tee.dumping == 0


def test_a_core_dump_start_cut_by_a_read_holds_the_stop(tmp_path, stream):
    """ROCr's start line split over two reads: the dump counts as being written (no end line yet),
    and it is the fault line too."""
    tee, _, _, _ = record(tmp_path, b"step 9\nGenerating GPU core d", b"ump to: /tmp/gpucore.4242\nstill writing\n", stream=stream)
    assert tee.dumping == 1
    assert tee.fault_line == "Generating GPU core dump to: /tmp/gpucore.4242"
    tee2, _, _, _ = record(tmp_path / "2", b"Generating GPU core dump to: /tmp/gpucore.1\nGPU core dump cre",
                           b"ated: /tmp/gpucore.1\n", stream=stream)
    assert tee2.dumping == 0


def test_a_ready_pattern_across_reads_and_redaction_of_whole_lines(tmp_path):
    tee, log, rows, ev = record(tmp_path, b"--api-key sk-abcdefgh1234 serving on po", b"rt 30000\n", redact=True,
                                watch=r"serving on port \d+")
    assert ev.is_set()
    assert b"sk-abcdefgh1234" not in log and b"serving on port 30000\n" in log
    assert tee.lines == 1 and [r[0] for r in rows] == ["1"]


def test_a_log_that_cannot_be_mapped_is_read_back(tmp_path, monkeypatch):
    """A file system without mmap: the spliced block is read back from the file instead."""
    import mmap
    import types

    from faultkit.capture import recorder

    def no_mmap(*a, **k):
        raise OSError(19, "No such device")
    monkeypatch.setattr(recorder, "mmap", types.SimpleNamespace(mmap=no_mmap, PROT_READ=mmap.PROT_READ,
                                                                ALLOCATIONGRANULARITY=mmap.ALLOCATIONGRANULARITY))
    line = b"Segmentation fault (core dumped)\n"
    tee, log, rows, _ = record(tmp_path, b"ok\nSegmentation fa", line[len(b"Segmentation fa"):])
    assert log == b"ok\n" + line and tee.fault_line == "Segmentation fault (core dumped)"
    assert [r[0] for r in rows] == ["1", "2"] and tee.lines == 2
