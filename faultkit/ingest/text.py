"""Turning raw bytes of a log into numbered lines, whatever state the log is in.

Logs from crashed runs are cut mid-line, carry terminal escapes and progress-bar carriage
returns, and are not always UTF-8. Shared corpus excerpts carry `# source:` headers and
`# ---` excerpt boundaries; those are honoured here so every parser sees the same lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator

from ..model import Problem

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
HEADER_COMMENT = re.compile(r"^# (?:source|notes|Format|Version)\b")
BOUNDARY = re.compile(r"^# ---")
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


@dataclass
class Line:
    no: int          # 1-based line number in the file
    text: str        # escapes removed, carriage-return segments kept joined
    boundary: bool = False  # an excerpt boundary: open multi-line records must be closed
    cut: int = 0            # characters dropped from the middle of an over-long line


def numbered_lines(text: str) -> Iterator[Line]:
    for no, raw in enumerate(text.split("\n"), start=1):
        raw = raw.rstrip("\r")
        if "\x1b" in raw:
            raw = ANSI.sub("", raw)
        if BOUNDARY.match(raw):
            yield Line(no, "", boundary=True)
            continue
        if HEADER_COMMENT.match(raw):
            continue
        # tqdm rewrites a line with \r; keep the segments on one line so a fault glued
        # after a bar is still found with re.search.
        if len(raw) > MAX_LINE:
            yield Line(no, raw[:KEEP].replace("\r", " ") + " ... " + raw[-KEEP:].replace("\r", " "),
                       cut=len(raw) - 2 * KEEP)
            continue
        yield Line(no, raw.replace("\r", " "))


def cut_problem(name: str, line: Line) -> Problem:
    return Problem(name, f"line of {line.cut + 2 * KEEP:,} characters: only its first and last {KEEP:,} were "
                         f"read", line.no)
