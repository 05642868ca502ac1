"""One input's bytes, as the parsers take them: the text of a log (whole, or the prefilter's
excerpt of a big one) or the bytes of a code object.

A log up to `limits.WHOLE` is read whole; past it the stream goes through `prefilter.scan`, so a
1 GB log costs one pass at grep's speed and holds only the lines near an anchor. Every read is in
chunks, bounded by the triage's budget.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import BinaryIO

from .. import limits
from ..model import Problem
from . import prefilter
from .code_object import BUNDLE_MAGIC
from .text import decode

CODE_OBJECT_MAX = 2 * limits.GiB       # an executable carrying code objects is read whole, up to this


@dataclass
class LogRead:
    """A log's text as read (whole, or the prefilter's excerpt of a big one) and what went wrong."""
    text: str = ""                       # a str, or a prefilter.Excerpt of a big log
    size: int = 0                        # bytes read
    binary: bytes | None = None          # an ELF or offload bundle: its bytes
    problems: list[Problem] = field(default_factory=list)


class _Chain:
    """The bytes already read, then the rest of the stream."""

    def __init__(self, head: bytes, rest):
        self.head, self.rest = head, rest

    def read(self, n: int = -1) -> bytes:
        if self.head:
            out, self.head = (self.head, b"") if n < 0 or n >= len(self.head) else (self.head[:n], self.head[n:])
            return out
        return self.rest.read(n)


def is_binary(head: bytes) -> bool:
    return head[:4] == b"\x7fELF" or BUNDLE_MAGIC in head[:1 << 20]


def read_log(stream: BinaryIO, name: str, budget: limits.Budget | None = None, cap: int | None = None,
             whole: int = limits.WHOLE) -> LogRead:
    """Read `stream` to its end (or the bound) as one log: whole up to `whole` bytes, past it
    through the prefilter."""
    budget = budget or limits.Budget()
    cap = budget.for_member() if cap is None else cap
    src = limits.Capped(stream, cap, budget)
    out = LogRead()
    parts, got = [], 0
    while got <= whole:
        chunk = src.read(limits.CHUNK)
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    head = b"".join(parts)
    del parts
    if is_binary(head):
        rest = limits.Capped(src, CODE_OBJECT_MAX - len(head)).readall()
        out.binary, out.size = head + rest, len(head) + len(rest)
        if len(out.binary) >= CODE_OBJECT_MAX:
            out.problems.append(Problem(name, f"binary over {CODE_OBJECT_MAX:,} bytes: only its start was read"))
    elif got <= whole:
        out.text, problems = decode(head, name)
        out.size = len(head)
        out.problems += problems
    else:
        sc = prefilter.scan(_Chain(head, src), name)
        del head
        text, problems = decode(sc.data, name)
        out.text = prefilter.excerpt(text, sc.stretches, sc.lines)
        out.size = sc.size
        out.problems += problems + sc.problems
    if src.over:
        out.problems.append(Problem(name, f"over the {cap:,}-byte bound for one input: the first {src.got:,} bytes "
                                          f"were read"))
    return out
