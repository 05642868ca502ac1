"""A per-trial figure read from the trial's own output (`--metric REGEX`): generated tokens,
throughput, requests served. A fix that removes the crash but costs a third of the throughput is
not a fix, so arms are compared on it as well as on the crash rate."""

from __future__ import annotations

import re
from pathlib import Path

from .. import layout

NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
MAX_READ = 64 << 20          # the end of a long log: the figure that counts is the last one printed


def metric_from(trial_dir: Path, regex: str) -> float | None:
    """The last match in the client's output, else the server's: the regex's first group (or the
    whole match) read as a number, commas dropped."""
    rx = _compile(regex)
    for name in ("client", layout.SERVER):
        value = _last(trial_dir / layout.log_of(name), rx)
        if value is not None:
            return value
    return None


def _compile(regex: str):
    """The user's pattern in RE2 where it can be (linear time: `(a*)*b` over a 64 MiB log never ends
    in Python's backtracking engine); a pattern only Python's re has (lookaround, backreference) is
    compiled by re."""
    try:
        import re2
        options = re2.Options()
        options.log_errors = False          # (else RE2 writes its parse error on stderr)
        return re2.compile(regex, options)
    except Exception:   # noqa: BLE001 - no RE2, or a pattern RE2 does not take: Python's re
        return re.compile(regex)


def _last(path: Path, rx) -> float | None:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - MAX_READ))
            text = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    found = None
    for m in rx.finditer(text):
        found = m
    if found is None:
        return None
    n = NUMBER.search((found.group(1) if rx.groups else found.group(0)).replace(",", ""))
    return float(n.group(0)) if n else None
