"""`faultkit dump`: which processes to read, their stacks in rounds, and the hang verdict.

The CLI only parses options and prints: this module decides which processes are read (a running
capture's tree, or the pids given and their children; never faultkit nor its stack tools) and
judges saved dumps the same way as live ones, so `dump --read` and `dump --pid` agree.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .. import layout


class DumpError(Exception):
    """A request that cannot be served; `param` names the option it is about (None: usage)."""

    def __init__(self, message: str, param: str | None = None):
        super().__init__(message)
        self.param = param


@dataclass
class DumpResult:
    rendered: str                      # the report (text or JSON)
    read_any: bool                     # at least one stack was read
    files: list[Path] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)   # "pid N: why" / "warning: why"
    folder: Path | None = None
    unwritten: str | None = None       # -o (or the bundle's stacks/) could not take them: why


def read_saved(reads: list[str], fmt: str) -> DumpResult:
    """Judge dumps saved by py-spy, gdb or faulthandler, in the order they were taken."""
    from ..analyze.hang import analyse
    from ..export.hang_text import render_json, render_text
    from ..ingest.stacks import as_samples, parse_any
    from ..redact import text as redact_text

    dumps = [parse_any(redact_text(Path(r).read_text(errors="replace")), r) for r in reads]
    problems = [f"warning: {why}" for d in dumps for why in d.problems]
    rounds = as_samples([d for d in dumps if d.threads])
    hf = analyse(rounds)
    text = render_json(hf, rounds) if fmt == "json" else render_text(hf, rounds[-1] if rounds else [])
    return DumpResult(text, bool(rounds), problems=problems)


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def roots_of(pids: list[int], bundle: str | None, output: str | None) -> tuple[list[int], Path | None]:
    """The processes to read and the folder their stacks go to (a running bundle keeps them in stacks/)."""
    from .hang_check import NotRunning, running_root

    roots = list(pids)
    folder = Path(output) if output else None
    if bundle:
        try:
            roots.append(running_root(Path(bundle)))
        except NotRunning as exc:
            raise DumpError(str(exc), "BUNDLE")
        folder = folder or Path(bundle) / layout.STACKS_DIR
    if not roots:
        raise DumpError("give --pid PID (or the bundle of a running capture)")
    gone = [p for p in roots if not os.path.exists(f"/proc/{p}")]
    if gone:
        raise DumpError(f"no such process: {', '.join(map(str, gone))}", "--pid")
    return roots, folder


def dump_live(roots: list[int], folder: Path | None, no_children: bool, samples: int, interval_s: float,
              deadline_s: float, fmt: str) -> DumpResult:
    """Stacks of the live processes in `samples` rounds, `interval_s` apart, and the verdict."""
    from ..analyze.hang import analyse
    from ..export.hang_text import render_json, render_text
    from ..private_files import private_dir
    from .hang_check import sample, time_tag
    from .proctree import descendants
    from .stacks import STACK_TOOLS

    def live() -> list[int]:
        # never faultkit itself nor its stack tools (`dump --pid $PPID` descends from the pid it reads);
        # a program faultkit's own process started (a test driving the CLI in-process) is still read
        mine = {os.getpid()} | {q for q in descendants(os.getpid()) if _comm(q) in STACK_TOOLS}
        return [q for q in dict.fromkeys(roots if no_children else [q for r in roots for q in descendants(r)])
                if q not in mine]

    unwritten = None
    if folder is not None:
        try:
            private_dir(folder)        # stacks hold command lines and memory: 0700, files 0600
        except OSError as exc:         # read-only, full: the stacks are still read and printed
            unwritten, folder = f"{folder}: cannot write ({exc.strerror or exc})", None
    s = sample(live, samples, interval_s, deadline_s, folder, tag=time_tag())
    hf = analyse(s.samples, s.interval_s if samples > 1 else None)
    last = s.samples[-1] if s.samples else []
    text = render_json(hf, s.samples) if fmt == "json" else render_text(hf, last)
    problems = [f"pid {p.pid}: {why}" for p in last for why in p.problems]
    return DumpResult(text, any(p.threads for p in last), list(s.files), problems, folder, unwritten or s.unwritten)
