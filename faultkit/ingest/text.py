"""Turning raw bytes of a log into numbered lines, whatever state the log is in.

Logs from crashed runs are cut mid-line, carry terminal escapes and progress-bar carriage
returns, and are not always UTF-8. Pasted evidence is cut into stretches with marks such as
`---`, `[...]` or `<snip>`: such a mark closes every open multi-line record, since what follows
it is another stretch of the log. A bare `...` does not: posters write it inside a record too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator

from ..model import Problem

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
BOUNDARY = re.compile(r"^\s*(?:#\s*)?(?:\[(?:\.{3}|\u2026)\]|[\[<](?:snip|snipped|truncated|cut)[\]>]|-{3,})\s*$", re.I)
# A hex or base64 dump can put megabytes on one line. Messages sit at a line's start (or, glued
# after a progress bar, at its end): the middle of an over-long line is dropped, and said.
MAX_LINE = 8192
KEEP = MAX_LINE // 2


def decode(data: bytes, name: str) -> tuple[str, list[Problem]]:
    problems: list[Problem] = []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        text = data.decode("utf-8", errors="replace")
        bad = text.count("\ufffd")
        problems.append(Problem(name, f"not valid UTF-8 (first bad byte at offset {exc.start}); "
                                      f"{bad} undecodable byte sequence(s) shown as U+FFFD, "
                                      f"the rest parsed"))
    if "\x00" in text:
        text = text.replace("\x00", "")
        problems.append(Problem(name, "contains NUL bytes (a file cut while being written?); removed"))
    return text, problems


@dataclass(slots=True)
class Line:
    """One log line as the parsers see it, numbered as in the file."""
    no: int          # 1-based line number in the file
    text: str        # escapes removed, carriage-return segments kept joined
    boundary: bool = False  # an excerpt boundary: open multi-line records must be closed
    cut: int = 0            # characters dropped from the middle of an over-long line


def numbered_lines(text: str) -> Iterator[Line]:
    """Lines one at a time (a 300 MB log split at once would hold every line in memory)."""
    src = LineSource(text)
    while (line := src.next()) is not None:
        yield line


class LineSource:
    """The text's lines in order, numbered from 1; `skip_to` jumps over a stretch at C speed.
    An excerpt of a big file (ingest.prefilter) holds only some of its lines: they keep the
    numbers they have in the file."""

    def __init__(self, text: str):
        self.text, self.pos, self.no, self.n = text, 0, 0, len(text)
        self.end = 0              # where the line last returned ends
        self.stretches = getattr(text, "stretches", None)
        self.idx, self.k = -1, 0  # index of the last line returned among those held; its stretch

    def _number(self) -> int:
        if self.stretches is None:
            return self.idx + 1
        no, self.k = self.text.line_no(self.idx, self.k)
        return no

    def next(self) -> Line | None:
        if self.pos > self.n:
            return None
        end = self.text.find("\n", self.pos)
        if end < 0:
            end = self.n
        raw = self.text[self.pos:end].rstrip("\r")
        self.idx += 1
        self.pos, self.no, self.end = end + 1, self._number(), end
        return make_line(self.no, raw)

    def skip_to(self, after: int, after_idx: int, pattern: re.Pattern) -> None:
        """Continue from the line holding the next match of `pattern` at or after offset `after`
        (the end of the line of index `after_idx`); the lines in between are passed over unread."""
        m = pattern.search(self.text, after)
        start = self.text.rfind("\n", 0, m.start()) + 1 if m else self.n + 1
        start = max(start, after + 1)
        self.idx, self.k = after_idx + (self.text.count("\n", after + 1, start) if m else 0), 0
        self.pos = start


def make_line(no: int, raw: str) -> Line:
    if "\x1b" in raw:
        raw = ANSI.sub("", raw)
    if BOUNDARY.match(raw):
        return Line(no, "", boundary=True)
    if len(raw) > MAX_LINE:
        # tqdm rewrites a line with \r; the segments stay on one line so a fault glued after a bar
        # is still found with re.search.
        return Line(no, raw[:KEEP].replace("\r", " ") + " ... " + raw[-KEEP:].replace("\r", " "),
                    cut=len(raw) - 2 * KEEP)
    return Line(no, raw.replace("\r", " "))


def cut_problem(name: str, line: Line) -> Problem:
    return Problem(name, f"line of {line.cut + 2 * KEEP:,} characters: only its first and last {KEEP:,} were "
                         f"read", line.no)
