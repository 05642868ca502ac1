"""Host stacks as the tools print them -> typed records: py-spy `dump` (JSON and text, with or
without `--native`), GNU gdb `thread apply all bt`, and Python's faulthandler dump (what the
in-process agent writes on its signal). Pure functions of the text: the collector that runs the
tools is capture/stacks.py.

Every parser keeps what it can read and says what it could not, never raises.
"""

from __future__ import annotations

import json
import re

from ..hang_model import ProcessStacks, StackFrame, ThreadStack
from ..limits import small_int
from .debugger import TERMINATED, parse_frame
from .source_lines import add_source_lines

# py-spy text: `Thread 11025 (idle): "MainThread"` (a hex id where the OS id is unknown)
PYSPY_THREAD = re.compile(r'^Thread (?P<id>0x[0-9A-Fa-f]+|\d+) \((?P<status>[^)]*)\)(?:: "(?P<name>.*)")?\s*$')
PYSPY_FRAME = re.compile(r"^\s+(?P<func>\S.*?) \((?P<loc>[^()]*)\)\s*$")
PYSPY_PROCESS = re.compile(r"^Process (?P<pid>\d+): (?P<cmd>.*)$")
# gdb: `Thread 4 (Thread 0x7fc2daf146c0 (LWP 11562) "python3"):`, `Thread 1 (process 4242):`
GDB_THREAD = re.compile(r'^Thread (?P<num>\d+(?:\.\d+)?) \((?P<systag>.*)\):\s*$', re.M)
GDB_LWP = re.compile(r"\b(?:LWP|process) (?P<lwp>\d+)\)?")
GDB_NAME = re.compile(r'"(?P<name>[^"]*)"\)?$')
# gdb's `thread 2` then `bt` opens the stack with `[Switching to thread 2 (Thread 0x7f.. (LWP 11562))]`
GDB_SWITCH = re.compile(r'^\[Switching to thread (?P<num>\d+(?:\.\d+)?) \((?P<systag>.*)\)\]\s*$')
# A gdb frame line, not another `#N` list (torch's `#0 all_reduce from file.py:3174`): gdb prints the
# arguments' parentheses after the function, and a PC or a place (` at file:line`, ` from lib`) or both.
GDB_FRAME_LINE = re.compile(r"^#\d+\s+(?:0x[0-9a-fA-F]+ in )?[^\s(]+ \(.*\)(?: at \S+:\d+| from \S+)?\s*$", re.M)
# A stack that dies, not one that waits: gdb's mark of a signal frame and the functions a crash runs
# through (libc's raise/abort, an assert, ggml's abort that prints the backtrace itself).
CRASH_FUNCTIONS = frozenset({"raise", "__GI_raise", "gsignal", "abort", "__GI_abort", "__pthread_kill_implementation",
                             "__pthread_kill_internal", "__pthread_kill", "pthread_kill", "__assert_fail",
                             "__assert_fail_base", "ggml_abort", "ggml_print_backtrace", "__libc_message"})
# (gdb's and a shell's marks; the lines that say a process died are the sources' stop words: sources/stacks.py
# drops a headerless stack under one of them)
CRASH_WORDS = re.compile(rf"<signal handler called>|received signal SIG|Aborted \(core dumped\)|"
                         rf"{TERMINATED.pattern.split(' (?P')[0]}")
HEADERLESS = "(pasted, no thread header)"       # the source of a stack read without its thread header
# faulthandler
FH_THREAD = re.compile(r"^(?P<cur>Current thread|Thread) (?P<id>0x[0-9a-fA-F]+)(?: \[(?P<name>[^\]]*)\])? "
                       r"\(most recent call first\):\s*$")
FH_FRAME = re.compile(r'^\s*File "(?P<file>.*)", line (?P<line>\d+|\?\?\?) in (?P<func>.*?)\s*$')
PY_SUFFIXES = (".py", ".pyw", ">")              # `<frozen importlib._bootstrap>` is Python too


def parse_pyspy_json(text: str, pid: int | None = None, source: str = "py-spy") -> ProcessStacks:
    """`py-spy dump --json`: a list of threads, each with its frames innermost first."""
    out = ProcessStacks(pid=pid or 0, source=source)
    try:
        data = json.loads(text)
    except ValueError as exc:
        out.problems.append(f"py-spy output is not JSON ({exc})")
        return out
    if not isinstance(data, list):
        out.problems.append("py-spy JSON is not a list of threads")
        return out
    for t in data:
        if not isinstance(t, dict):
            continue
        if not out.pid and isinstance(t.get("pid"), int):
            out.pid = t["pid"]
        frames = []
        for f in t.get("frames") or []:
            if not isinstance(f, dict):
                continue
            module = f.get("module") if isinstance(f.get("module"), str) else None
            line = f.get("line") if isinstance(f.get("line"), int) and f.get("line") > 0 else None
            name, file = f.get("name"), f.get("filename")
            frames.append(StackFrame(function=str(name) if name is not None else None,
                                     file=str(file) if line and file is not None else None, line=line,
                                     library=_base(module) if module else None, native=bool(module)))
        tid = t.get("os_thread_id") if isinstance(t.get("os_thread_id"), int) else None
        name = t.get("thread_name")
        out.threads.append(ThreadStack(tid=tid, name=str(name) if name is not None else None, frames=frames,
                                       active=t.get("active") if isinstance(t.get("active"), bool) else None))
    return add_source_lines(out)    # a blocked builtin shows only its caller's line


def parse_pyspy_text(text: str, pid: int | None = None, source: str = "py-spy") -> ProcessStacks:
    """`py-spy dump` as it prints for a person."""
    out = ProcessStacks(pid=pid or 0, source=source)
    cur: ThreadStack | None = None
    for line in text.splitlines():
        if (m := PYSPY_PROCESS.match(line)):
            out.pid, out.command = out.pid or small_int(m["pid"]) or 0, m["cmd"]
        elif (m := PYSPY_THREAD.match(line)):
            tid = small_int(m["id"])
            cur = ThreadStack(tid=tid, name=m["name"], active="active" in m["status"])
            out.threads.append(cur)
        elif cur is not None and (m := PYSPY_FRAME.match(line)) and not line.startswith(" " * 8):
            loc = m["loc"]
            file, sep, num = loc.rpartition(":")
            if sep and num.isdigit():
                python = file.endswith(PY_SUFFIXES)
                cur.frames.append(StackFrame(m["func"], file, small_int(num), None, native=not python))
            else:
                cur.frames.append(StackFrame(m["func"], None, None, loc, native=True))
    if not out.threads:
        out.problems.append("no thread found in the py-spy output")
    return add_source_lines(out)    # a blocked builtin shows only its caller's line


def parse_gdb_backtraces(text: str, pid: int | None = None, source: str = "gdb") -> ProcessStacks:
    """`thread apply all bt` (gdb -batch): one block per thread, `#N` frames innermost first."""
    out = ProcessStacks(pid=pid or 0, source=source)
    cur: ThreadStack | None = None
    for line in text.splitlines():
        if (m := GDB_THREAD.match(line) or GDB_SWITCH.match(line)):
            systag = m["systag"]
            lwp, name = GDB_LWP.search(systag), GDB_NAME.search(systag)
            cur = ThreadStack(tid=small_int(lwp["lwp"]) if lwp else None, name=name["name"] if name else None)
            out.threads.append(cur)
        elif line.startswith("#"):
            f = parse_frame(line)
            if f is None:
                continue
            if cur is not None and f.level == 0 and len(cur.frames) == 1 and cur.frames[0] == _gdb_frame(f):
                cur.frames.clear()   # gdb printed the selected frame on `thread N`; `bt` starts it again
            if cur is None or (f.level == 0 and cur.frames):
                # a stack without its thread's header (a lone `bt`, a paste cut above its first header, a
                # second `bt` after the first): one thread the dump does not name
                cur = ThreadStack(tid=None)
                out.threads.append(cur)
            cur.frames.append(_gdb_frame(f))
    if not out.pid:
        # gdb's thread 1 is the process's first thread, whose Linux thread id is the process id
        first = next((m for m in GDB_THREAD.finditer(text) if m["num"] in ("1", "1.1")), None) if "Thread 1" in text \
            else None
        lwp = GDB_LWP.search(first["systag"]) if first else None
        out.pid = small_int(lwp["lwp"]) if lwp else 0
    if not out.threads:
        problem = next((ln.strip() for ln in text.splitlines()
                        if re.search(r"ptrace: |Could not attach|No such process|not permitted", ln)), None)
        out.problems.append(problem or "no thread found in the gdb output")
    return out


def _gdb_frame(f) -> StackFrame:
    func = f.function if f.function and f.function != "??" else (f"{f.pc:#x}" if f.pc else None)
    return StackFrame(func, f.file, f.line, _base(f.objfile) if f.objfile else None, native=True)


def parse_faulthandler(text: str, pid: int | None = None, source: str = "faulthandler") -> ProcessStacks:
    """faulthandler's dump (`dump_traceback(all_threads=True)`, or on its registered signal):
    Python frames only, innermost first; threads are named by their pthread id."""
    out = ProcessStacks(pid=pid or 0, source=source)
    cur: ThreadStack | None = None
    for line in text.splitlines():
        if (m := FH_THREAD.match(line)):
            cur = ThreadStack(tid=None, name=m["name"] or m["id"])     # "Current": the one that dumped, not busy
            out.threads.append(cur)
        elif (m := FH_FRAME.match(line)):
            if cur is None:          # frames pasted without their `Thread 0x... (most recent call first):`
                cur = ThreadStack(tid=None)
                out.threads.append(cur)
            cur.frames.append(StackFrame(m["func"], m["file"], small_int(m["line"])))
    if not out.threads:
        out.problems.append("no thread found in the faulthandler dump")
    return out


def parse_samples(text: str, name: str) -> tuple[list[list[ProcessStacks]], float | None, list[str]]:
    """A bundle's stacks/samples-<tag>.json (capture wrote it): the records of each round."""
    try:
        d = json.loads(text)
        samples = [[ProcessStacks.from_json(p) for p in s] for s in d.get("samples") or []]
        interval = d.get("interval_s")
        return samples, interval if isinstance(interval, (int, float)) else None, []
    except (ValueError, TypeError, AttributeError) as exc:
        return [], None, [f"{name}: not a stack-samples record ({type(exc).__name__}: {exc})"]


def _base(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def parse_any(text: str, name: str) -> ProcessStacks:
    """A saved stack dump of any of the four kinds, told apart by its content."""
    if re.match(r"\s*\[\s*(?:\{|\])", text):          # a JSON list of threads (gdb's start with "[New LWP")
        return parse_pyspy_json(text)
    if "(most recent call first):" in text:
        return parse_faulthandler(text)
    if re.search(r"^#\d+\s", text, re.M) and re.search(r"^Thread \d+(?:\.\d+)? \(", text, re.M):
        return parse_gdb_backtraces(text)
    out = parse_pyspy_text(text)
    if not out.threads and (lone := _headerless(text)):
        return lone[0]             # a lone gdb `bt`, faulthandler's frames without their header
    if not out.threads:
        out.problems = [f"{name}: not a py-spy, gdb or faulthandler stack dump" if not _crash_stack(text) else
                        f"{name}: a crash's stack (where the program died, not where it waits): give it to "
                        f"`faultkit triage`"]
    return out


def as_samples(dumps: list[ProcessStacks]) -> list[list[ProcessStacks]]:
    """Saved dumps in the order given: the k-th dump of each process is its k-th sample (a dump
    without a pid, faulthandler's, is one process)."""
    per: dict[int, list[ProcessStacks]] = {}
    for d in dumps:
        per.setdefault(d.pid, []).append(d)
    rounds = max((len(v) for v in per.values()), default=0)
    return [[v[k] for v in per.values() if k < len(v)] for k in range(rounds)]


PARSERS = {"py-spy": parse_pyspy_json, "py-spy-text": parse_pyspy_text, "gdb": parse_gdb_backtraces,
           "faulthandler": parse_faulthandler}


# A pasted file holds host stacks when one of the dumps' own thread headers opens a line.
STACK_MARKERS = re.compile(r'^Thread (?:0x[0-9A-Fa-f]+|\d+) \([^)]*\)(?:: ".*")?\s*$|'          # py-spy
                           r'^Thread \d+(?:\.\d+)? \(.*\):\s*$|'                                 # gdb
                           r'^(?:Current thread|Thread) 0x[0-9a-fA-F]+(?: \[[^\]]*\])? \(most recent call first\):', re.M)


# A file that is a py-spy dump from its first line: `py-spy dump` (each process opens with
# `Process N: <command>`) or `py-spy dump --json` (a list of threads, each with its "pid").
PYSPY_JSON_IN_TEXT = re.compile(r'^\[\s*\{\s*"pid":', re.M)
PYSPY_DUMP = re.compile(r'\A\s*(?:Process \d+: |\[\s*\{\s*"pid":)')
STACK_DUMP = "stack-dump"          # its input kind


def _headerless(text: str) -> list[ProcessStacks]:
    """A stack pasted without any thread header: a lone gdb `bt` (two or more gdb frame lines) or
    faulthandler's frame lines alone, read as the threads the dump does not name. A crash's stack
    (a signal frame, raise/abort, a debugger's signal stop) is where a program died, not a wait:
    the debugger's reader has it, no hang is read from it."""
    if len(GDB_FRAME_LINE.findall(text)) >= 2:
        d = parse_gdb_backtraces(text)
        d.source = f"gdb bt {HEADERLESS}"
    elif len(re.findall(FH_FRAME.pattern, text, re.M)) >= 2 and "Traceback (most recent call last)" not in text:
        d = parse_faulthandler(text)
        d.source = f"faulthandler {HEADERLESS}"
    else:
        return []
    if _crashed(text, d):
        return []
    return [d] if d.threads else []


def _crashed(text: str, d: ProcessStacks) -> bool:
    return CRASH_WORDS.search(text) is not None or any(f.function in CRASH_FUNCTIONS for t in d.threads for f in t.frames)


def _crash_stack(text: str) -> bool:
    """A headerless stack that `_headerless` left out because it is a crash's."""
    if len(GDB_FRAME_LINE.findall(text)) >= 2:
        return _crashed(text, parse_gdb_backtraces(text))
    return len(re.findall(FH_FRAME.pattern, text, re.M)) >= 2 and _crashed(text, parse_faulthandler(text))


def stacks_in_text(text: str, name: str) -> list[ProcessStacks]:
    """The host stack dumps in a pasted text (a log with py-spy dumps in it, a gdb session's
    `thread apply all bt`, faulthandler's dump): one record per process, py-spy's split at its
    `Process N:` lines. Empty when the text holds none."""
    if re.match(r"\s*\[\s*\{", text) and '"frames"' in text:
        d = parse_pyspy_json(text)
        return [d] if d.threads else []
    if (m := PYSPY_JSON_IN_TEXT.search(text)) and '"frames"' in text:
        # `py-spy dump --json` pasted between a post's words: the list where it opens, to where it closes
        try:
            dump, _ = json.JSONDecoder().raw_decode(text, m.start())
        except ValueError:
            dump = None
        d = parse_pyspy_json(json.dumps(dump)) if isinstance(dump, list) else None
        if d is not None and d.threads:
            return [d]
    if not STACK_MARKERS.search(text):
        return _headerless(text)
    if "(most recent call first):" in text and not re.search(PYSPY_THREAD.pattern, text, re.M):
        d = parse_faulthandler(text)
        return [d] if d.threads else []
    if re.search(r"^#\d+\s", text, re.M) and re.search(r"^Thread \d+(?:\.\d+)? \(.*\):\s*$", text, re.M):
        d = parse_gdb_backtraces(text)
        d.source = "gdb (pasted)"
        return [d] if d.threads else []
    out = []
    starts = [m.start() for m in re.finditer(r"^Process \d+: ", text, re.M)] or [0]
    if starts[0] != 0:
        starts.insert(0, 0)
    for a, b in zip(starts, starts[1:] + [len(text)]):
        d = parse_pyspy_text(text[a:b])
        if d.threads:
            out.append(d)
    return out
