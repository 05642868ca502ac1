"""Stacks sampled at a hang and every rank's flight record (the NCCL/RCCL watchdog's, written by
PyTorch, or its lines in the target's output)."""

from __future__ import annotations

from ..analyze.hang import hang_claims
from ..ingest.flight_recorder import watchdog_collectives
from ..ingest.normalize import for_runtime
from ..ingest.prefilter import RUNTIME
from ..ingest.stacks import HEADERLESS, PYSPY_DUMP, STACK_DUMP, stacks_in_text
from .runtime_log import PROCESS_DEATHS
from .source import Source, anchors

WATCHDOG = "Watchdog caught collective"      # the watchdog's line in a rank's output


def _parse(text):
    """The watchdog's lines, and the host stack dumps pasted in the text (py-spy, gdb, faulthandler)."""
    # (the runtime's own reading of the text: a launcher's worker tag, the rank's pid, stays on its lines)
    dumps = stacks_in_text(text.text, text.name)
    if any(a.word in text.text for a in PROCESS_DEATHS):    # a stack without its header under a death is a crash's
        dumps = [d for d in dumps if not d.source.endswith(HEADERLESS)]
    return (watchdog_collectives(for_runtime(text.text), text.name) if WATCHDOG in text.text else [], dumps)


def _gather(inc, records, text):
    collectives, dumps = records
    inc.collectives += collectives
    inc.pasted_stacks += dumps


SOURCE = Source("stacks", "stacks at a hang and the ranks' flight records: who waits on whom",
                kind=STACK_DUMP, markers=PYSPY_DUMP,
                anchors=anchors(WATCHDOG), reads=frozenset({RUNTIME, "kernel-log", "debugger", STACK_DUMP}),
                parse=_parse, gather=_gather,
                claims=lambda inc, setting: hang_claims(inc.hang, bool(inc.faults)),
                json_keys=("hang",), sections=("Hang analysis",))
