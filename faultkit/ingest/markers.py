"""Lines that several nodes' logs share, and lines that say a peer is gone.

Alignment markers are moments both sides of a job record: a collective sequence number in PyTorch's
watchdog lines (`WorkNCCL(SeqNum=N, OpType=ALLREDUCE, ...)`, ProcessGroupNCCL.cpp's format; RCCL
prints the same through PyTorch), and a request id that a server logs on every rank that serves it
(`rid=...`, SGLang's form; `request_id=...`/`request_id: ...`, vLLM's and others'). Peer losses are
what the other ranks print when the one that faulted dies: gloo's "Connection closed by peer" /
"Connection reset by peer" (gloo/transport/tcp/pair.cc), NCCL's "remote process exited or there was
a network error" and "NCCL communicator was aborted", a socket's "Broken pipe".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..model import Origin
from .runtime_log import COLLECTIVE_TIMEOUT     # the watchdog's line: its owner reads it for faults too

REQUEST = re.compile(r"\b(?:rid|request_id|req_id)\s*[=:]\s*[\"']?(?P<id>[A-Za-z0-9][A-Za-z0-9_-]{7,})")
PEER_LOSS = re.compile(r"Connection (?:closed|reset) by peer|remote process exited or there was a network error|"
                       r"NCCL communicator was aborted|Broken pipe|ProcessGroupGloo.*(?:closed|reset)")
# A rank's own collective timing out: gloo's "Timed out waiting 2000ms for recv operation to complete"
# (gloo/transport/tcp/unbound_buffer.cc, pair.cc) and ProcessGroupNCCL's watchdog line. What follows
# it in that rank (an exception, an abort) is the timeout's consequence, not a cause of its own.
OWN_TIMEOUT = re.compile(r"Timed out waiting \d+ms for (?:recv|send) operation|" + COLLECTIVE_TIMEOUT.pattern)
_ANCHORS = ("SeqNum=", "rid", "request_id", "req_id", "by peer", "remote process exited", "communicator was aborted",
            "Broken pipe", "Timed out waiting")


@dataclass(frozen=True)
class Marker:
    origin: Origin
    key: str          # what makes two lines the same moment: "request:<id>" or "collective:<seq>:<op>"
    kind: str         # "request" | "collective-timeout"


@dataclass(frozen=True)
class PeerLoss:
    origin: Origin
    text: str
    kind: str = "peer-loss"    # or "collective-timeout": this rank's own collective timed out


def markers_in(text: str, name: str) -> tuple[list[Marker], list[PeerLoss]]:
    """Markers (the first line of each key) and peer losses of one log. Never raises."""
    markers, losses, seen = [], [], set()
    for n, line in enumerate(text.splitlines(), 1):
        if not any(a in line for a in _ANCHORS):
            continue
        for m in REQUEST.finditer(line):
            key = f"request:{m.group('id')}"
            if key not in seen:
                seen.add(key)
                markers.append(Marker(Origin(name, n), key, "request"))
        m = COLLECTIVE_TIMEOUT.search(line)
        if m:
            key = f"collective:{m.group('seq')}:{m.group('op')}"
            if key not in seen:
                seen.add(key)
                markers.append(Marker(Origin(name, n), key, "collective-timeout"))
        if PEER_LOSS.search(line):
            losses.append(PeerLoss(Origin(name, n), line.strip()[:300]))
        elif not m and OWN_TIMEOUT.search(line):     # (the watchdog's line is the runtime log's fault already)
            losses.append(PeerLoss(Origin(name, n), line.strip()[:300], "collective-timeout"))
    return markers, losses
