"""Host stacks of live processes, read-only and bounded in time: the collector.

Sources, tried in order for each process until one gives threads:
  - py-spy `dump --native --json`: Python and native frames of every thread (py-spy pauses the
    process for the native unwind, a few milliseconds, and never changes it);
  - py-spy without `--native` (where native unwinding fails) merged with gdb's native stacks;
  - GNU gdb `-batch` `thread apply all bt` (any process, Python or not: attach, print, detach);
  - an in-process agent's faulthandler file (`AgentFileSource`), where the agent wrote one.
Each tool runs under a deadline and is killed past it. The tool's own output is kept as it was
printed (to a bundle's stacks/ folder); the parsers in ingest/stacks.py make the records.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol

from .. import redact
from ..ingest.stacks import FH_THREAD, PARSERS
from ..private_files import private_dir, write_evidence
from ..hang_model import ProcessStacks
from ..launch_env import launch_of
from .proctree import _ppid, cmdline_of

# The programs that read a process's stacks: what `dump` never samples among its own children.
STACK_TOOLS = ("py-spy", "gdb", "cuda-gdb", "rocgdb")


@dataclass
class RawStacks:
    pid: int
    source: str           # py-spy --native | py-spy | gdb | faulthandler
    parser: str           # a key of ingest.stacks.PARSERS
    text: str
    problem: str | None = None     # why the tool gave nothing (its last line)
    seconds: float = 0.0

    @property
    def suffix(self) -> str:
        return {"py-spy": "json", "py-spy-text": "txt"}.get(self.parser, "txt")


class StackSource(Protocol):
    name: str

    def missing(self) -> str | None:
        """Why this source cannot run here, or None."""

    def take(self, pid: int, deadline_s: float) -> RawStacks:
        """One dump of every thread of `pid`."""


def _run(cmd: list[str], deadline_s: float) -> tuple[int | None, str, str, float]:
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=deadline_s)
        return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace"), \
            time.monotonic() - t0
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode(errors="replace")
        return None, out, f"no answer within {deadline_s:g} s (killed)", time.monotonic() - t0
    except OSError as exc:
        return None, "", f"{cmd[0]}: {exc.strerror or exc}", time.monotonic() - t0


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith(("Stack backtrace", " "))]
    errors = [ln for ln in lines if ln.startswith("Error:")]
    return (errors or lines or ["no output"])[0][:300]


def pyspy_binary() -> str | None:
    """py-spy is a dependency: beside this interpreter first, then on PATH."""
    here = Path(sys.executable).parent / "py-spy"
    return str(here) if here.exists() else shutil.which("py-spy")


class PySpySource:
    def __init__(self, native: bool = True, binary: str | None = None):
        self.native = native
        self.binary = binary or pyspy_binary()
        self.name = "py-spy --native" if native else "py-spy"

    def missing(self) -> str | None:
        return None if self.binary else "py-spy is not installed (pip install py-spy)"

    def take(self, pid: int, deadline_s: float) -> RawStacks:
        cmd = [self.binary or "py-spy", "dump", "--pid", str(pid), "--json"] + (["--native"] if self.native else [])
        code, out, err, secs = _run(cmd, deadline_s)
        ok = code == 0 and out.lstrip().startswith("[")
        return RawStacks(pid, self.name, "py-spy", out if ok else "", None if ok else _last_line(err or out), secs)


GDB_COMMANDS = ["set width 0", "set pagination off", "set confirm off", "set print frame-arguments none",
                "thread apply all bt"]


class GdbSource:
    name = "gdb"

    def __init__(self, binary: str | None = None):
        self.binary = binary or shutil.which("gdb")

    def missing(self) -> str | None:
        return None if self.binary else "GNU gdb is not installed"

    def take(self, pid: int, deadline_s: float) -> RawStacks:
        cmd = [self.binary or "gdb", "-nx", "-batch", "-p", str(pid)]
        for c in GDB_COMMANDS:
            cmd += ["-ex", c]
        code, out, err, secs = _run(cmd, deadline_s)
        ok = "\n#0 " in "\n" + out or "\n#0  " in "\n" + out
        return RawStacks(pid, self.name, "gdb", out if ok else "", None if ok else _last_line(err or out), secs)


class AgentFileSource:
    """What the in-process agent's faulthandler wrote when asked (its signal), read from the file
    `find(pid)` names: the last dump in it."""
    name = "faulthandler"

    def __init__(self, find: Callable[[int], Path | None]):
        self.find = find

    def missing(self) -> str | None:
        return None

    def take(self, pid: int, deadline_s: float) -> RawStacks:
        path = self.find(pid)
        try:
            text = path.read_text(errors="replace") if path else ""
        except OSError as exc:
            return RawStacks(pid, self.name, "faulthandler", "", f"{path}: {exc.strerror or exc}")
        last = _last_dump(text)
        return RawStacks(pid, self.name, "faulthandler", last, None if last else "the agent wrote no stacks")


def _last_dump(text: str) -> str:
    """faulthandler appends one dump after another, with no line between them: a dump names each
    thread once, so the last dump starts where a thread named before is named again."""
    lines = text.splitlines(keepends=True)
    start, seen = None, set()
    for i, ln in enumerate(lines):
        m = FH_THREAD.match(ln.rstrip("\n"))
        if not m:
            continue
        if start is None or m["id"] in seen:
            start, seen = i, set()
        seen.add(m["id"])
    return "".join(lines[start:]) if start is not None else ""


@dataclass
class Dump:
    """One process's stacks at one moment: the record and the tool output it was read from."""
    stacks: ProcessStacks
    raw: list[RawStacks]


def default_sources() -> list[StackSource]:
    return [PySpySource(native=True), PySpySource(native=False), GdbSource()]


def take(pid: int, sources: list[StackSource] | None = None, deadline_s: float = 10.0) -> Dump:
    """Every thread's stack of `pid`, from the first source that gives threads. py-spy without
    native frames is completed with gdb's native stacks, thread by thread."""
    sources = default_sources() if sources is None else sources
    tried: list[RawStacks] = []
    problems: list[str] = []
    best: ProcessStacks | None = None
    for src in sources:
        why = src.missing()
        if why:
            problems.append(f"{src.name}: {why}")
            continue
        if best is not None and not (src.name == "gdb" and best.source == "py-spy"):
            break
        raw = src.take(pid, deadline_s)
        # a tool's output holds the command line (py-spy's `Process N: ...`) and a debugger's view of
        # string arguments and locals: redacted before anything reads, prints or keeps it
        if raw.text:
            raw.text = redact.text(raw.text)
        tried.append(raw)
        if raw.problem:
            problems.append(f"{src.name}: {raw.problem}")
            continue
        got = PARSERS[raw.parser](raw.text, pid, raw.source)
        if not got.threads:
            problems += [f"{src.name}: {p}" for p in got.problems]
            continue
        best = merge_native(best, got) if best is not None else got
    out = best or ProcessStacks(pid=pid, source="none")
    if best is not None and best.source == "gdb" and any("python version" in p for p in problems):
        problems = [p for p in problems if "python version" not in p] + ["not a Python process: native stacks only"]
    out.problems = problems
    out.taken_at = time.time()
    out.command = " ".join(redact.argv(cmdline_of(pid) or [])) or None
    annotate(out)
    return Dump(out, [r for r in tried if r.text])


def merge_native(python: ProcessStacks, native: ProcessStacks) -> ProcessStacks:
    """py-spy's Python frames with gdb's native frames of the same OS thread: native first (they
    are the innermost), then Python."""
    by_tid = {t.tid: t for t in native.threads if t.tid is not None}
    for t in python.threads:
        n = by_tid.get(t.tid)
        if n is not None:
            t.frames = [*n.frames, *t.frames]
    python.source = "py-spy + gdb"
    return python


def annotate(stacks: ProcessStacks) -> None:
    """What the kernel says of each thread: its scheduler state and the CPU time it has used
    (compared across two samples, a spinning wait shows as CPU time with an unchanged stack)."""
    for t in stacks.threads:
        if t.tid is None:
            continue
        stat = _task_stat(stacks.pid, t.tid)
        if stat:
            t.state, t.cpu_ticks = stat
    stacks.rank, stacks.ppid = _rank(stacks.pid), _ppid(stacks.pid)


def _task_stat(pid: int, tid: int) -> tuple[str, int] | None:
    try:
        with open(f"/proc/{pid}/task/{tid}/stat", "rb") as fh:
            data = fh.read().decode(errors="replace")
        fields = data[data.rindex(")") + 2:].split()
        return fields[0], int(fields[11]) + int(fields[12])
    except (OSError, ValueError, IndexError):
        return None


def _rank(pid: int) -> int | None:
    """The distributed rank its launcher gave the process (launch_env's table: torchrun, MPI, Slurm ...)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            env = dict(kv.decode(errors="replace").split("=", 1) for kv in fh.read().split(b"\0") if b"=" in kv)
    except OSError:
        return None
    return launch_of(env).rank


def write(dump: Dump, folder: Path, sample: int) -> list[str]:
    """The tools' own output into a bundle's stacks/ folder: `<pid>.s<sample>.<source>.<ext>`,
    redacted as it is written (whoever made the Dump)."""
    private_dir(folder)
    names = []
    for r in dump.raw:
        name = f"{r.pid}.s{sample}.{r.source.replace(' --', '-').replace(' ', '')}.{r.suffix}"
        write_evidence(folder / name, r.text)
        names.append(name)
    return names


def alive(pid: int) -> bool:
    return os.path.exists(f"/proc/{pid}")
