"""compute-sanitizer's reports (memcheck's access errors; racecheck, initcheck, synccheck findings):
read by the debugger's grammar, judged as their own evidence."""

from __future__ import annotations

import re

from ..analyze.debug_stop import sanitizer_claims, sanitizer_fault
from ..analyze.record_faults import api_error_faults
from ..ingest.prefilter import DEBUGGER
from .source import Source

# Every compute-sanitizer report line starts with its prefix; the debugger's parser reads them.
MARKERS = re.compile(r"^[ \t]*========= ", re.M)

SOURCE = Source(
    "sanitizer", "compute-sanitizer's reports: the kernel, the access, the allocation",
    kind=DEBUGGER, markers=MARKERS, faults=lambda inc: [sanitizer_fault(r) for r in inc.debugger.sanitizer] + api_error_faults(inc.debugger),
    claims=lambda inc, setting: sanitizer_claims(inc.debugger))
