"""Stacks sampled at a hang and every rank's flight record (the NCCL/RCCL watchdog's, written by
PyTorch, or its lines in the target's output)."""

from __future__ import annotations

from ..analyze.hang import hang_claims
from ..ingest.flight_recorder import watchdog_collectives
from ..ingest.prefilter import RUNTIME
from .source import Source, anchors

WATCHDOG = "Watchdog caught collective"      # the watchdog's line in a rank's output


def _parse(text):
    return watchdog_collectives(text.text, text.name) if WATCHDOG in text.text else []


def _gather(inc, collectives, text):
    inc.collectives += collectives


SOURCE = Source("stacks", "stacks at a hang and the ranks' flight records: who waits on whom",
                anchors=anchors(WATCHDOG), reads=frozenset({RUNTIME, "kernel-log", "debugger"}),
                parse=_parse, gather=_gather,
                claims=lambda inc, setting: hang_claims(inc.hang, bool(inc.faults)),
                json_keys=("hang",), sections=("Hang analysis",))
