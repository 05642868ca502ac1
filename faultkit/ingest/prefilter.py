"""Finding the lines of a big log that can matter, at grep's speed, before any parser runs.

Every pattern a log parser tries on a line with nothing open declares, where it is defined, the
literal words (anchors) that each line it matches contains: `anchored(READER, re.compile(...),
"word", ...)`. Patterns tried only inside a record another line opened are listed as that
parser's continuations (`continuation(READER, ...)`), and their lines are kept as context after
the line that opened the record (`after=`, in lines).

One RE2 pattern of all anchors runs over a big file in large blocks (RE2 is a DFA: no
backtracking, and its speed on a literal set is grep's); only the lines around a hit are decoded
and handed to the parsers, numbered as in the file. tests/test_prefilter.py checks that every
match of an anchored pattern contains one of its anchors (read from the pattern's syntax tree),
that every pattern of a parser module is declared, and that parsing the excerpt of every corpus
file gives the records the whole file does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import BinaryIO

from .. import re_cache
from ..model import Problem
from .text import KEEP, MAX_LINE

RUNTIME, KERNEL, DEBUGGER = "runtime-log", "kernel-log", "debugger"
BEFORE = 8                # lines kept before a hit (a prefix line, the header a wrapped message follows)
AFTER = 16                # lines kept after a hit, unless its anchor says more
BLOCK = 4 << 20           # bytes scanned at once (memory: a few blocks)


@dataclass
class Guard:
    """A parser pattern's anchors: the literal words every line it matches holds."""
    reader: str
    pattern: re.Pattern | None     # None: a word that matters by itself (an excerpt mark)
    anchors: tuple[str, ...]
    after: int = AFTER
    ignore_case: bool = False


GUARDS: list[Guard] = []
CONTINUATIONS: dict[str, set[int]] = {}      # reader -> ids of patterns tried only inside open records


def anchored(reader: str, pattern: re.Pattern, *anchors: str, after: int = AFTER) -> re.Pattern:
    """Declare the words every line `pattern` matches contains; returns the pattern."""
    if not anchors:
        raise ValueError(f"{pattern.pattern[:40]!r}: no anchor")
    GUARDS.append(Guard(reader, pattern, anchors, after))
    _compiled.clear()
    return pattern


def words(reader: str, *anchors: str, after: int = AFTER, ignore_case: bool = False) -> None:
    """Words that make a line matter without one pattern of their own (excerpt marks, words
    tested with `in`)."""
    GUARDS.append(Guard(reader, None, anchors, after, ignore_case))
    _compiled.clear()


# the continuation patterns themselves: the front end asks them whether a wrap cut one of their lines
CONTINUATION_PATTERNS: list[re.Pattern] = []


def continuation(reader: str, *patterns: re.Pattern) -> None:
    CONTINUATIONS.setdefault(reader, set()).update(id(p) for p in patterns)
    CONTINUATION_PATTERNS.extend(p for p in patterns if p not in CONTINUATION_PATTERNS)


_compiled: dict = {}


def _alternation(anchors) -> str:
    by_first: dict[str, list[str]] = {}
    for a in sorted(set(anchors)):
        by_first.setdefault(a[0], []).append(re.escape(a[1:]))
    return "|".join(f"{re.escape(c)}(?:{'|'.join(rest)})" for c, rest in by_first.items())


def may_matter(reader: str) -> re.Pattern:
    """Python pattern of one reader's anchors, for lines already decoded (the parser's own skip)."""
    key = ("py", reader)
    if key not in _compiled:
        exact = [a for g in GUARDS if g.reader == reader and not g.ignore_case for a in g.anchors]
        folded = [a for g in GUARDS if g.reader == reader and g.ignore_case for a in g.anchors]
        parts = [_alternation(exact)] + ([f"(?i:{_alternation(folded)})"] if folded else [])
        # (the declared anchors are the program's text: kept compiled across runs, ~16 ms each start)
        _compiled[key] = re_cache.compile("|".join(parts))
    return _compiled[key]


def _engine():
    """RE2 runs the anchor set at grep's speed; Python's re is ~15x slower. Imported at the first
    scan (a log past limits.WHOLE), not with the parsers: a pasted log's triage never scans."""
    try:
        import re2
    except ImportError:   # pragma: no cover - the dependency is declared; a broken install still works
        return re
    return re2


def _scanner():
    """All readers' anchors as one bytes pattern, and each anchor's context after it."""
    if "scan" not in _compiled:
        after: dict[bytes, int] = {}
        exact, folded = [], []
        for g in GUARDS:
            for a in g.anchors:
                b = a.encode()
                key = b.lower() if g.ignore_case else b
                after[key] = max(after.get(key, 0), g.after)
                (folded if g.ignore_case else exact).append(a)
        alt = "|".join(re.escape(a) for a in sorted(set(exact)))
        if folded:
            alt += "|(?i:" + "|".join(re.escape(a) for a in sorted(set(folded))) + ")"
        _compiled["scan"] = (_engine().compile(alt.encode()), after)
    return _compiled["scan"]


class Excerpt(str):
    """The kept lines of a file, joined by newlines; `stretches` maps them back to the file:
    (index of the stretch's first kept line, its line number in the file)."""
    stretches: list[tuple[int, int]]
    total_lines: int

    def line_no(self, index: int, hint: int = 0) -> tuple[int, int]:
        """File line number of kept line `index` (0-based), and the stretch it is in."""
        k = hint
        st = self.stretches
        while k + 1 < len(st) and st[k + 1][0] <= index:
            k += 1
        while k > 0 and st[k][0] > index:
            k -= 1
        return st[k][1] + index - st[k][0], k


@dataclass
class Scan:
    """The lines of a big file the anchors kept, with where they were in the file."""
    data: bytes = b""                                 # the kept lines, newline-joined
    stretches: list[tuple[int, int]] = field(default_factory=list)
    lines: int = 0                                    # lines in the file
    size: int = 0                                     # bytes read
    problems: list[Problem] = field(default_factory=list)


def scan(stream: BinaryIO, name: str, limit: int | None = None) -> Scan:
    """Read `stream` block by block (at most `limit` bytes) and keep the lines near an anchor.
    Memory: one block, the lines kept, and the last few lines of the previous block. Lines between
    hits are never split or looked at one by one: the anchors' search and newline counts run in C."""
    pattern, after_of = _scanner()
    out = Scan()
    kept: list[bytes] = []
    kept_lines = 0
    carry = b""                # an unfinished last line of the previous block
    prefix: bytes | None = None    # the previous block's last BEFORE lines (before-context of a hit)
    prefix_no = 1              # file line number of the first line of the next buffer
    pending = 0                # lines still to keep after the previous block
    last_kept = 0              # file line number of the last line kept
    long_cut = 0

    def keep(piece: bytes, first_no: int) -> None:
        nonlocal kept_lines, last_kept
        lines = piece.split(b"\n")
        if first_no != last_kept + 1 or not out.stretches:
            out.stretches.append((kept_lines, first_no))
        for k, ln in enumerate(lines):
            if len(ln) > 2 * MAX_LINE:     # what make_line would keep of it, said the same way
                out.problems.append(Problem(name, f"line of {len(ln):,} characters: only its first and last "
                                                  f"{KEEP:,} were read", first_no + k))
                ln = ln[:KEEP] + b" ... " + ln[-KEEP:]
            kept.append(ln)
        kept_lines += len(lines)
        last_kept = first_no + len(lines) - 1

    while True:
        want = BLOCK if limit is None else min(BLOCK, limit - out.size)
        chunk = stream.read(want) if want > 0 else b""
        out.size += len(chunk)
        final = not chunk
        body = carry + chunk
        if final:
            carry = b""
            has_lines = bool(body)
        else:
            cut = body.rfind(b"\n") + 1
            if cut == 0 and len(body) > max(BLOCK, 4 * MAX_LINE):
                # One line longer than a block (a hex dump): its middle is dropped now, so memory
                # stays bounded; what is kept of it is still searched.
                long_cut += len(body) - 2 * KEEP
                carry = body[:KEEP] + b" ... " + body[-KEEP:]
                continue
            carry, body = body[cut:], body[:cut]
            has_lines = cut > 0
        if body.endswith(b"\n"):
            body = body[:-1]                 # lines are joined by newlines; the last has none
        if not has_lines and not final:
            continue
        if has_lines:
            buf = body if prefix is None else prefix + b"\n" + body
            start_new = 0 if prefix is None else len(prefix) + 1     # offset of the first line not seen before
            first_new_no = prefix_no if prefix is None else prefix_no + prefix.count(b"\n") + 1
            # lines at or before `last_kept` are not kept again
            floor = 0
            for _ in range(max(0, last_kept - prefix_no + 1)):
                floor = buf.find(b"\n", floor) + 1 or len(buf) + 1
            spans: list[list[int]] = []      # [start offset, end offset, first line number]

            def add(s: int, e: int, s_no: int) -> None:
                if spans and s <= spans[-1][1] + 1:
                    spans[-1][1] = max(spans[-1][1], e)
                else:
                    spans.append([s, e, s_no])

            def forward(s: int, count: int) -> tuple[int, int]:
                """End offset of `count` lines from offset s, and how many were missing."""
                e = s
                for k in range(count):
                    nl = buf.find(b"\n", e)
                    if nl < 0:
                        return len(buf), count - k - 1
                    e = nl + 1
                return e - 1, 0

            if pending:
                e, pending = forward(start_new, pending)
                add(max(start_new, floor), e, first_new_no)
            pos, no = start_new, first_new_no
            last_no = first_new_no + body.count(b"\n")
            for m in pattern.finditer(buf, start_new):
                st = m.start()
                no += buf.count(b"\n", pos, st)
                pos = st
                line_start = buf.rfind(b"\n", 0, st) + 1
                a = after_of.get(m.group(0)) or after_of.get(m.group(0).lower(), AFTER)
                if spans and spans[-1][1] >= len(buf):
                    pending = max(pending, no + a - last_no)     # kept to the end of the block already
                    continue
                s, s_no = line_start, no
                for _ in range(BEFORE):
                    if s <= floor:
                        break
                    s = buf.rfind(b"\n", 0, s - 1) + 1
                    s_no -= 1
                s, s_no = (floor, s_no + buf.count(b"\n", s, floor)) if s < floor else (s, s_no)
                e, missing = forward(line_start, a + 1)
                pending = max(pending, missing)
                add(s, e, s_no)
            for s, e, s_no in spans:
                if s <= e:
                    keep(buf[s:e], s_no)
            # the last BEFORE lines of this block, for a hit at the start of the next
            p = buf.rfind(b"\n") + 1
            for _ in range(BEFORE - 1):
                if p <= 0:
                    break
                p = buf.rfind(b"\n", 0, p - 1) + 1
            prefix_no = first_new_no + buf.count(b"\n", start_new, p) if p >= start_new else \
                prefix_no + buf.count(b"\n", 0, p)
            prefix = buf[p:]
            out.lines = last_no
        if final:
            break
    if long_cut:
        out.problems.append(Problem(name, f"a line longer than {BLOCK >> 20} MB: {long_cut:,} bytes of its middle "
                                          f"were dropped unread"))
    out.data = b"\n".join(kept)
    return out


def excerpt(text: str, stretches: list[tuple[int, int]], total_lines: int) -> Excerpt:
    e = Excerpt(text)
    e.stretches = stretches or [(0, 1)]
    e.total_lines = total_lines
    return e
