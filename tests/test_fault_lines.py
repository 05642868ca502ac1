"""What a fault line is has one owner, the sources' stop anchors (faultkit/sources/); the capture's
block prefilter (faultkit/fault_lines.py) finds every one of them under both engines, every one is
a fault to the parsers, and the dump start/end lines agree with the runtime-log parser's events,
line by line from the runtimes' documented messages."""

import pytest

from faultkit import fault_lines
from faultkit.fault_lines import DUMP_END, DUMP_START, FAULT_LINE, FAULT_PHRASES, Prefilter
from faultkit.ingest.runtime_log import parse_runtime_log


@pytest.fixture(params=["hyperscan", "re2"])
def prefilter(request):
    try:
        p = Prefilter(request.param)
    except RuntimeError:
        pytest.skip("hyperscan is not installed here")
    assert p.engine == request.param
    return p


@pytest.mark.parametrize("phrase", FAULT_PHRASES)
def test_every_fault_phrase_passes_the_prefilter(phrase, prefilter):
    line = f"[rank0]: {phrase} 0x7f0000001000 (more text)".encode()
    assert prefilter.hits(b"x" * 70000 + line + b"\n" + b"y" * 70000)[0]
    assert FAULT_LINE.search(line.decode())


def test_a_block_without_fault_words_passes_nothing(prefilter):
    assert prefilter.hits(b"INFO 12-01 serving request 42 in 3.1 ms\n" * 1000) == (False, False)


# (line, what the capture makes of it) from gpu_coredumps.md: ROCr's progress lines, the CUDA driver's
STARTS = ["Generating GPU core dump to: /b/cores/gpucore.4242", "Generating GPU core dump via pipe handler",
          "coredump: Starting GPU coredump generation"]
ENDS = ["GPU core dump created: /b/cores/gpucore.4242", "GPU core dump sent to pipe handler",
        "GPU coredump: handler exited with error (status: 1)", "Failed to create GPU coredump: File exists",
        "coredump: All done (took 00s)"]


@pytest.mark.parametrize("line", STARTS + ENDS)
def test_dump_lines_are_the_parsers(line, prefilter):
    start, end = bool(DUMP_START.search(line)), bool(DUMP_END.search(line))
    assert (start, end) == (line in STARTS, line in ENDS)
    assert prefilter.hits(line.encode())[1]
    if not line.startswith("coredump:"):                 # ROCr's: the parser's event says the same
        notes = [n for n in parse_runtime_log(line + "\n").notes if n.kind == "gpu-core-dump"]
        assert notes, line
        ev = notes[0].fields
        assert (ev["event"] == "writing") == start
        assert (ev["event"] in ("created", "truncated") or ev["failed"]) == end


def test_the_prefilter_is_shared():
    from faultkit.capture import recorder
    assert recorder.PREFILTER is fault_lines.PREFILTER
