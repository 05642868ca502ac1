"""Which output lines mean the GPU or the process died, and which say a GPU core dump is being
written, for everything that watches a live target (capture's recorder, trials' crash detection).

The words are the sources' (faultkit.sources: each source tags the anchors whose line ends a
capture), so the recorder stops on every line the parsers call a fault. The recorder must keep up
with a target that prints gigabytes, so a block is first searched for those words, all at once
(find_words), and only a block with a hit is decoded and matched line by line. The core-dump lines
come from the runtime-log parser's own table, so the recorder and the report agree on when a dump
starts and ends.
"""

from __future__ import annotations

import re

from .find_words import WordFinder
from .ingest.runtime_log import CUDA_DUMP_END, CUDA_DUMP_START, ROCR_CORE_LINES
from .sources import stop_words

# A line that means the GPU or the process died: ends a capture or a trial early.
FAULT_PHRASES = stop_words()
FAULT_LINE = re.compile("|".join(re.escape(p) for p in FAULT_PHRASES))

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

    def __init__(self, engine: str | None = None):
        self._finder = WordFinder({"fault": [p.encode() for p in FAULT_PHRASES], "dump": DUMP_WORDS}, engine)
        self.engine = self._finder.engine

    def hits(self, block: bytes) -> tuple[bool, bool]:
        found = self._finder.found(block)
        return "fault" in found, "dump" in found


PREFILTER = Prefilter()
