"""Debugger transcripts (rocgdb, GNU gdb, cuda-gdb), a live stop's or a GPU core's: the stop, the
stopping wave or warp, its PC and frames, the agents', queues' and dispatches' tables."""

from __future__ import annotations

import re

from ..analyze.debug_stop import examine, stop_claims, stop_fault
from ..ingest.debugger import parse_debugger
from ..ingest.prefilter import DEBUGGER
from .source import Source, anchors, parser_anchors

MARKERS = re.compile(r"^\(c?u?d?a?-?gdb\) |received signal (?:SIG|CUDA_EXC)|\[Switching to |CUDA Exception:|"
                     r"hit Catchpoint \d+ \(signal|^GNU gdb|^Program terminated with signal|"
                     r"AMDGPU (?:Wave|Lane|Dispatch|Queue|Agent) |stopped because of SIG|\*stopped,reason=|"
                     r"precise memory (?:violation )?signal reporting|^[ \t]*Kernel Parent Dev Grid|^\[Inferior \d+ \(process \d+\)|"
                     r"^\[New inferior \d+|A problem internal to GDB has been detected", re.M)

STOPS = anchors("CUDA Exception:", stop=True)       # cuda-gdb stopped a warp on a GPU exception


def _gather(inc, log, text):
    inc.debugger.extend(log)
    # Stops are judged per transcript: each worker's debugger has its own tables. A transcript of a
    # core (opened by triage or saved beside it by a capture) says so.
    inc.stops.extend(examine(log, text.name, from_core=text.from_core))


SOURCE = Source(
    "debugger", "debugger transcripts: the stop, the wave or warp, its PC, the GPU's tables",
    kind=DEBUGGER, markers=MARKERS, anchors=STOPS + parser_anchors(DEBUGGER, STOPS), reads=frozenset({DEBUGGER}),
    parse=lambda t: parse_debugger(t.text, t.name), gather=_gather, faults=lambda inc: [stop_fault(s) for s in inc.stops],
    claims=lambda inc, setting: stop_claims(inc.stops),     # its launched kernels: sources/kernel_mentions.py
    json_keys=("debugger_stops", "debugger"), sections=("Debugger stop",))
