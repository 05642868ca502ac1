"""Which output lines mean the GPU or the process died, and which say a GPU core dump is being
written: the one owner of these facts for everything that watches a live target (capture's
recorder, trials' crash detection).

The recorder must keep up with a target that prints gigabytes, so a block is first tested for
the words every pattern contains, all at once (Hyperscan where it is installed: one pass for every
word; else one `in` per word), and only a block with a hit is decoded and matched line by line.
The core-dump lines come from the runtime-log parser's own table, so the recorder and the report
agree on when a dump starts and ends.
"""

from __future__ import annotations

import re

from .ingest.runtime_log import CUDA_DUMP_END, CUDA_DUMP_START, ROCR_CORE_LINES

# A line that means the GPU or the process died: ends a capture or a trial early.
FAULT_PHRASES = ("Memory access fault by GPU", "HW Exception by GPU", "aborting with error", "aborting with status",
                 "Memory Fault Error [", "HIP error: ", "CUDA error: ", "Segmentation fault", "Fatal Python error",
                 "OFFLOAD ERROR", "CUDA Exception:", "illegal memory access", "coredump: Detected an exception",
                 "Generating GPU core dump", "GPU core dump created")
FAULT_LINE = re.compile("|".join(re.escape(p) for p in FAULT_PHRASES))
# Words every FAULT_LINE match contains (tests/test_fault_lines.py checks it): a block with none of
# them is not decoded.
FAULT_WORDS = (b"ault", b"xception", b"abort", b" error: ", b"OFFLOAD", b"illegal", b"core dump", b"Python error")

# A runtime writing a GPU core must not be signalled until it is done (the CUDA driver says so; a
# full ROCm core takes minutes): the capture waits for the end line or the process's exit.
# ROCr's lines: `writing` starts a dump; a created, truncated or failed one ends it.
_UNNAMED = re.compile(r"\(\?P<\w+>")        # the parser's groups, unnamed to join its patterns in one


def _joined(events) -> list[str]:
    return [_UNNAMED.sub("(?:", rx.pattern) for event, failed, rx in ROCR_CORE_LINES if events(event, failed)]


_ROCR_START = _joined(lambda event, failed: event == "writing")
_ROCR_END = _joined(lambda event, failed: event in ("created", "truncated") or failed)
DUMP_START = re.compile("|".join([re.escape(CUDA_DUMP_START), *_ROCR_START]))
DUMP_END = re.compile("|".join([re.escape(CUDA_DUMP_END), *_ROCR_END]))
DUMP_WORDS = (b"core", b"Core")           # in every DUMP_START / DUMP_END line


class Prefilter:
    """`hits(block)`: (may hold a fault line, may hold a core-dump line), at memory speed."""

    def __init__(self):
        self._db = None
        try:
            import hyperscan
            words = [*FAULT_WORDS, *DUMP_WORDS]
            db = hyperscan.Database()
            db.compile(expressions=[re.escape(w.decode()).encode() for w in words], ids=list(range(len(words))),
                       elements=len(words), flags=[hyperscan.HS_FLAG_SINGLEMATCH] * len(words))
            self._db, self._fault_ids = db, set(range(len(FAULT_WORDS)))
        except Exception:              # noqa: BLE001 - not installed, or no SIMD here: the plain tests do it
            self._db = None

    def hits(self, block: bytes) -> tuple[bool, bool]:
        if self._db is None:
            return any(w in block for w in FAULT_WORDS), any(w in block for w in DUMP_WORDS)
        found: set[int] = set()
        self._db.scan(block, match_event_handler=lambda i, *_: found.add(i))
        return bool(found & self._fault_ids), bool(found - self._fault_ids)


PREFILTER = Prefilter()
