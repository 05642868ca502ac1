"""Drive one gdb-family debugger (rocgdb, GNU gdb, cuda-gdb) through its CLI with pexpect.

Everything the debugger prints goes to a transcript file as it arrives (the triage parses it
like a pasted session). Every command has a deadline: a debugger that hangs or dies is recorded
and left behind, never waited on forever. Commands a debugger does not know (`info dispatches`
in GNU gdb) are answered with `Undefined ...`, which the transcript parser records as unavailable.
"""

from __future__ import annotations

import os
import re
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

import pexpect

from .. import redact as redaction
from .._signals import FAULT_SIGNALS
from ..debuggers import TABLE, flavor_of
from ..private_files import open_append
from .launcher import own_helper
from ..ingest.debugger import INFERIOR_EXIT, LIVE_PROMPT, NOT_RUNNING, TERMINATED, parse_debugger

# The prompt and the exit lines are the transcript parser's (ingest/debugger.py): one grammar.
PROMPT = re.compile(LIVE_PROMPT)
QUIET_SIGNALS = "SIGPIPE SIGUSR1 SIGUSR2 SIGALRM SIGCHLD SIGWINCH SIGPROF SIGURG"

COMMON = ["set pagination off", "set confirm off", "set width 0", "set height 0", "set breakpoint pending on",
          "set print thread-events off", f"handle {QUIET_SIGNALS} nostop noprint pass",
          "catch signal " + " ".join(FAULT_SIGNALS)]
MULTI_PROCESS = ["set detach-on-fork off", "set follow-fork-mode parent", "set follow-exec-mode same",
                 "set schedule-multiple on"]
PRECISE = ["set amdgpu precise-memory on", "show amdgpu precise-memory"]

@dataclass
class StopSeen:
    """What the last prompt brought: a fault stop, an exit, or something to continue past."""
    kind: str               # fault | exited | other
    text: str
    gpu: bool = False
    pids_exited: list[int] = field(default_factory=list)
    signal: str | None = None        # the signal (or CUDA exception) a fault stop was on


class RedactingLog:
    """The transcript file, written line by line with secrets replaced (`Starting program:` repeats
    the target's command line, `info inferiors` and backtraces its arguments)."""

    def __init__(self, raw):
        self.raw, self.buf = raw, b""

    def write(self, data: bytes) -> int:
        self.buf += data
        if b"\n" in self.buf:
            done, _, self.buf = self.buf.rpartition(b"\n")
            self.raw.write(redaction.text((done + b"\n").decode("utf-8", "surrogateescape"))
                           .encode("utf-8", "surrogateescape"))
        if len(self.buf) > 1 << 16:       # a huge line: never hold much back
            self._drain()
        return len(data)

    def flush(self) -> None:
        """pexpect flushes after every read: a line cut there and redacted in two halves would let
        a secret through (`api_key=0x... "X` + `", port=1`), so a partial line waits for its end."""

    def _drain(self) -> None:
        if self.buf:
            self.raw.write(redaction.text(self.buf.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape"))
            self.buf = b""

    def close(self) -> None:
        self._drain()
        self.raw.close()


class GdbDriver:
    def __init__(self, binary: str, transcript: Path, env: dict[str, str] | None = None,
                 command_deadline: float = 30.0, start_deadline: float = 120.0, redact: bool = True):
        self.binary = binary
        self.redact = redact
        self.flavor = flavor_of(binary)
        self.transcript = transcript
        self.env = env
        self.command_deadline = command_deadline
        self.start_deadline = start_deadline
        self.child: pexpect.spawn | None = None
        self.log = None
        self.state = "not-started"       # running | hung | died | closed
        self.problem: str | None = None
        self.unavailable: list[str] = []
        self.precise: str | None = None
        self.history: list[dict] = []
        self.resumed = False             # a run/continue is outstanding: no prompt until it stops

    # ---- process ----
    def start(self, args: list[str]) -> bool:
        raw = open_append(self.transcript, buffering=0)
        self.log = RedactingLog(raw) if self.redact else raw
        # A dumb terminal keeps readline's bracketed-paste and colour codes out of the transcript.
        env = dict(self.env if self.env is not None else os.environ)
        self.user_term = env.get("TERM")
        env["TERM"] = "dumb"
        try:
            self.child = pexpect.spawn(self.binary, ["-q", "-nx", "-iex", "set style enabled off", *args], env=env, timeout=self.command_deadline,
                                       dimensions=(50, 4000))
        except (pexpect.ExceptionPexpect, OSError) as exc:
            self.state, self.problem = "died", f"could not start {self.binary}: {exc}"
            return False
        own_helper(self.child.pid)      # its exit status is pexpect's: never reaped as a tree orphan
        self.child.logfile_read = self.log
        self.state = "running"
        return self._wait_prompt(self.start_deadline) is not None

    @property
    def pid(self) -> int | None:
        return self.child.pid if self.child else None

    def _wait_prompt(self, deadline: float) -> str | None:
        try:
            self.child.expect(PROMPT, timeout=deadline)
            return self.child.before.decode(errors="replace")
        except pexpect.TIMEOUT:
            self.state, self.problem = "hung", f"no prompt within {deadline:.0f} s"
        except pexpect.EOF:
            self._died()
        return None

    def _died(self) -> None:
        self.child.close(force=True)
        status = self.child.exitstatus if self.child.exitstatus is not None else -(self.child.signalstatus or 0)
        self.state, self.problem = "died", f"the debugger exited (status {status}) while faultkit waited on it"

    def command(self, text: str, deadline: float | None = None) -> str | None:
        """Run one command; its output, or None if the debugger hung or died (recorded)."""
        if self.state != "running":
            return None
        t0 = time.monotonic()
        self.child.sendline(text)
        out = self._wait_prompt(deadline or self.command_deadline)
        self.history.append({"command": text, "seconds": round(time.monotonic() - t0, 3),
                             "answered": out is not None})
        if out is not None and re.search(r'Undefined (?:\w+ )?command|No symbol "\w+" in current context|'
                                         r"not supported|unknown command", out):
            self.unavailable.append(text)
        if out is None and self.state == "hung":
            self.problem = f"command {text!r} got no answer within {deadline or self.command_deadline:.0f} s"
        return out

    def setup(self, multi_process: bool) -> None:
        term = f"set environment TERM={self.user_term}" if self.user_term else "unset environment TERM"
        for c in COMMON + (MULTI_PROCESS + [term] if multi_process else []):
            self.command(c)
        if self.flavor == "cuda-gdb":
            self.command("set cuda api_failures ignore")

    def precise_memory(self) -> None:
        """After the inferior exists: rocgdb cannot enable it before (`currently disabled`)."""
        if self.flavor == "cuda-gdb":
            return
        out = self.command(PRECISE[0]) or ""
        answer = self.command(PRECISE[1]) or ""
        if "Undefined" in out or "Undefined" in answer:
            self.precise = "unsupported by this debugger (no AMD GPU support)"
        else:
            m = re.search(r"reporting is (on|off)(?: \(currently (\w+)\))?", answer)
            failed = "could not be enabled" in out + answer
            self.precise = "could-not-enable" if failed else (
                "enabled" if m and m.group(2) == "enabled" else m.group(0) if m else "unknown")

    # ---- running ----
    def resume(self, text: str) -> None:
        if self.state == "running":
            self.child.sendline(text)
            self.resumed = True

    def poll_stop(self, wait: float) -> StopSeen | None:
        """Wait up to `wait` seconds for the prompt after run/continue; None while still running."""
        if self.state != "running":
            return None
        try:
            self.child.expect(PROMPT, timeout=wait)
        except pexpect.TIMEOUT:
            return None
        except pexpect.EOF:
            self._died()
            return None
        self.resumed = False
        return classify(self.child.before.decode(errors="replace"))

    def interrupt(self) -> None:
        if self.state == "running" and self.child.isalive():
            self.child.sendintr()

    def harvest(self) -> None:
        for c in TABLE[self.flavor].harvest:
            if self.command(c) is None:
                break

    def live_inferiors(self) -> list[int]:
        out = self.command("info inferiors") or ""
        return [int(m.group(1)) for m in re.finditer(r"^[* ]\s*(\d+)\s+process \d+", out, re.M)]

    def live_inferior(self) -> int | None:
        live = self.live_inferiors()
        return live[0] if live else None

    def close(self, kill_inferiors: bool = True) -> str:
        """Kill what it debugs (so no stopped process outlives the capture), then quit; force if needed."""
        if self.child is None:
            return "never started"
        if self.state == "running" and self.child.isalive() and self.resumed:
            self.interrupt()
            if self.poll_stop(min(10.0, self.command_deadline)) is None and self.resumed:
                self.state, self.problem = "hung", "did not stop on interrupt at the end of the capture"
        if self.state == "running" and self.child.isalive():
            live = self.live_inferiors() if kill_inferiors else []
            if live:
                self.command("kill inferiors " + " ".join(map(str, live)), deadline=10)
            self.child.sendline("quit")
            try:
                self.child.expect(pexpect.EOF, timeout=10)
            except pexpect.TIMEOUT:
                pass
        how = "quit"
        if self.child.isalive():
            self.child.kill(signal.SIGKILL)
            how = "killed"
        self.child.close(force=True)
        if self.log:
            self.log.close()
        if self.state == "running":
            self.state = "closed"
        return how

    def status(self) -> dict:
        return {"debugger": self.binary, "flavor": self.flavor, "state": self.state, "problem": self.problem,
                "precise_memory": self.precise, "unavailable_commands": self.unavailable,
                "transcript": self.transcript.name, "commands": self.history[-60:]}


def classify(output: str) -> StopSeen:
    log = parse_debugger(output, "<live>")
    faults = [s for s in log.stops if s.kind == "cuda-exception"
              or (s.kind in ("signal", "catchpoint", "core") and s.signal in FAULT_SIGNALS)]
    if faults:
        return StopSeen("fault", output, gpu=any(s.gpu is not None or s.kind == "cuda-exception" for s in faults),
                        signal=faults[0].signal)
    exited = [int(e.fields["pid"]) for e in log.events if e.kind == "inferior-exit" and "pid" in e.fields]
    if exited or INFERIOR_EXIT.search(output) or NOT_RUNNING.search(output):
        return StopSeen("exited", output, pids_exited=exited)
    return StopSeen("other", output)


def exit_status(output: str, current_inferior: int) -> int | None:
    """The launched program's (inferior 1's) exit status in a stop's output, as Popen gives it
    (negative: the signal), or None when the output does not say. gdb prints the code in octal;
    'Program terminated with signal' is about the current inferior."""
    m = next((m for m in INFERIOR_EXIT.finditer(output) if m["inf"] == "1"), None)
    if m:
        try:
            return int(m["code"], 8) if m["code"] else 0
        except ValueError:                    # not octal: not gdb's code
            return None
    m = TERMINATED.search(output)
    if m and current_inferior == 1:
        return -signal_number(m["sig"])
    return None


def signal_number(name: str | None) -> int:
    """A stop's signal as a number; a GPU exception that is no POSIX signal (cuda-gdb's
    CUDA_EXCEPTION_*) counts as SIGABRT: with core dumps armed the CUDA driver aborts the process."""
    try:
        return int(signal.Signals[name or ""])
    except KeyError:
        return int(signal.SIGABRT)
