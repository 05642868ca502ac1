"""How a capture runs its target: plainly, wrapped by a tool, or under debuggers.

Each backend starts the target, is stepped by the session's wait loop (`step` returns why the
capture should end, or None), and stops everything it started. The session around it records
output, kernel log, processes and facts the same way for all of them.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from pathlib import Path
from typing import Protocol

from .. import layout
from ..debuggers import flavor_of
from .gdb_driver import GdbDriver, exit_status, signal_number
from .launcher import Launch, LineTee, helper_env, target_argv, target_env
from .proctree import TreeSampler, cmdline_of

AMD_DEBUG_ENV = {"HSA_ENABLE_DEBUG": "1"}


class Backend(Protocol):
    """What the session needs of a way to run the target."""

    def start(self) -> None: ...

    @property
    def root_pid(self) -> int: ...          # the process whose tree is sampled

    @property
    def fault_line(self) -> str | None: ...  # the first output line that means the GPU or process died

    @property
    def output(self) -> LineTee: ...        # the target's stamped output (and when its last line came)

    def step(self, sampler: TreeSampler) -> str | None: ...   # why the capture should end, or None

    @property
    def debuggers(self) -> int: ...         # debuggers attached now (for the live status line)

    def stop(self) -> dict: ...             # stop everything started; manifest fields (`exit_code`, ...)
MAX_ATTACHED = 16   # waves get known coordinates when a debugger attaches late


class FaultGrace:
    """After the first fault line, the runtime is left `grace_s` to finish its report (restarted
    while a GPU core is being written) before the capture ends as a fault."""

    def __init__(self, grace_s: float):
        self.grace_s = grace_s
        self._fault_at: float | None = None

    def step(self, tee: LineTee) -> str | None:
        if tee.fault_line and self._fault_at is None:
            self._fault_at = time.monotonic()
        elif tee.dumping:
            self._fault_at = time.monotonic()      # the grace starts when the core is written
        elif self._fault_at is not None and time.monotonic() - self._fault_at > self.grace_s:
            return "fault"
        return None


class PlainBackend:
    """The command as given (`none`, `runtime-log`) or behind a wrapper (`sanitizer`, `rocprofv3`)."""

    def __init__(self, command, out: Path, env: dict[str, str], grace_s: float, prefix: list[str] | None = None,
                 core_limit: int | None = None, cgroup_procs: str | None = None):
        wrapped = [*prefix, *target_argv(command)] if prefix else command
        self.target = Launch(wrapped, out, layout.SERVER, env, core_limit, cgroup_procs)
        self.grace = FaultGrace(grace_s)

    def start(self) -> None:
        self.target.start()

    @property
    def root_pid(self) -> int:
        return self.target.proc.pid

    @property
    def fault_line(self) -> str | None:
        return self.target.fault_line

    @property
    def output(self) -> LineTee:
        return self.target.tee

    @property
    def debuggers(self) -> int:
        return 0

    def step(self, sampler: TreeSampler) -> str | None:
        if self.target.poll() is not None:
            return "target-exit"
        return self.grace.step(self.target.tee)

    def stop(self) -> dict:
        code = self.target.poll()
        sent = self.target.stop()
        return {"exit_code": code if code is not None else self.target.poll(), "stopped_with": sent}


# gdb's words for a program that could not be started at all
NEVER_RAN = re.compile(r"not in executable format|No executable file specified|No such file or directory|"
                       r"Permission denied|cannot exec|During startup program exited")
STARTED = re.compile(r"Starting program: \S")


class DebugLaunchBackend:
    """`gdb --args PROGRAM ARGS` (`/bin/sh -c LINE` only for shell syntax) following forks and
    execs, so spawned workers are debugged too; the program's output goes to its own pty and is
    stamped like any server log."""

    def __init__(self, binary: str, command, out: Path, env: dict[str, str], command_deadline: float):
        self.out, self.argv = out, target_argv(command)
        full_env = target_env(env)
        self.driver = GdbDriver(binary, out / layout.debugger_transcript(), full_env, command_deadline)
        self.tee = LineTee(out, layout.SERVER)
        self._stream = None
        self._slave: int | None = None
        self.ended: str | None = None
        self.follows_forks = self.driver.flavor != "cuda-gdb"
        self.exit_code: int | None = None     # the program's own status, or -N for the signal it stopped on
        self.stop_signal: str | None = None
        self._inferior = 1                    # gdb's current inferior (1: the launched program)
        self.resolved: list[str] = []         # how a script's machine program was found (capture/program.py)
        self.never_ran: str | None = None     # gdb's words where the program never started
        self._started = False                 # gdb said "Starting program: PATH"

    def start(self) -> None:
        master, self._slave = os.openpty()
        tty = os.ttyname(self._slave)
        self._stream = os.fdopen(master, "rb", buffering=0)
        self._reader = threading.Thread(target=self.tee.run, args=(self._stream,), daemon=True)
        self._reader.start()
        if not self.driver.start(["--args", *self.argv]):
            return
        # cuda-gdb forks its own debug agent (NvDebugAgent) out of the program: following forks
        # made it follow that agent and hang on the H200, so it follows only the first process;
        # spawned workers need --attach-workers.
        self.driver.setup(multi_process=self.follows_forks)
        self.driver.command(f"tty {tty}")
        self.driver.precise_memory()      # before run it reads 'on (currently disabled)'; inherited by inferiors
        self.driver.resume("run")

    @property
    def root_pid(self) -> int:
        return self.driver.pid or os.getpid()

    @property
    def fault_line(self) -> str | None:
        return self.tee.fault_line

    @property
    def output(self) -> LineTee:
        return self.tee

    @property
    def debuggers(self) -> int:
        return int(self.driver.state in ("running", "hung"))

    def step(self, sampler: TreeSampler) -> str | None:
        seen = self.driver.poll_stop(0.2)
        if self.driver.state == "died":
            return "debugger-died"
        if self.driver.state == "hung":
            return "debugger-hung"
        if seen is None:
            return None
        code = exit_status(seen.text, self._inferior)
        if code is not None:
            self.exit_code = code
        if not self._started:
            self._started = STARTED.search(seen.text) is not None
        if seen.kind == "exited" and self._inferior == 1 and code is None and not self._started:
            # `run` started no program (not an executable, no such file): gdb said why, at its start
            # or at `run`; its transcript has both
            try:
                with open(self.driver.transcript, "rb") as fh:
                    said = fh.read(1 << 16).decode(errors="replace")
            except OSError:
                said = seen.text
            self.never_ran = next((ln.strip() for ln in said.splitlines() if NEVER_RAN.search(ln)),
                                  "the debugger started no program")
            self.exit_code, self.ended = 126, "target-exit"
            return self.ended
        if seen.kind == "fault":
            self.driver.harvest()
            self.ended = "debugger-stop"
            # Killed in the debugger, the program never ends by itself: its status is the signal it
            # stopped on, as it would have been without the debugger (a shell's 128+N).
            self.stop_signal = seen.signal
            self.exit_code = -signal_number(seen.signal)
            return self.ended
        if seen.kind == "exited":
            live = self.driver.live_inferior()
            if live is None:
                self.ended = "target-exit"
                return self.ended
            self.driver.command(f"inferior {live}")
            self._inferior = live
        self.driver.resume("continue")
        return None

    def stop(self) -> dict:
        how = self.driver.close()
        if self._slave is not None:
            # With the program gone and our end of the slave closed, the reader drains the pty
            # and ends on EIO; only then is the master closed (no read on a reused fd number).
            os.close(self._slave)
            self._reader.join(timeout=5)
            self._stream.close()
        exit_text = None
        if self.ended == "debugger-stop":
            exit_text = f"stopped in the debugger at {self.stop_signal or 'the fault'}, then killed with it"
        elif self.never_ran:
            exit_text = f"never ran under the debugger: {self.never_ran}"
        elif self.ended == "target-exit" and self.exit_code is None:
            exit_text = "exited under the debugger (its transcript has how)"
        elif self.driver.state in ("died", "hung") and self.exit_code is None:
            # the program's own end is not known: it was stopped with (or after) its debugger
            exit_text = f"unknown: the debugger {self.driver.state} ({self.driver.problem}); the program was stopped"
        return {"debuggers": [{**self.driver.status(), "closed": how, "follows_forks": self.follows_forks,
                               **({"program_resolved": self.resolved} if self.resolved else {})}],
                "exit": exit_text, "exit_code": self.exit_code}


class DebugAttachBackend:
    """Start the command normally and attach one debugger to each GPU worker as it appears.

    Which processes: those that open a GPU device (/dev/kfd, /dev/dri/renderD*, /dev/nvidia*), or
    those whose command line matches `match`. Attaching per worker avoids following fork/exec,
    which crashed cuda-gdb on the H200, and keeps one worker's stop from freezing the launcher."""

    def __init__(self, binary: str, command, out: Path, env: dict[str, str], command_deadline: float,
                 grace_s: float, match: str | None = None, delay_s: float = 0.0, core_limit: int | None = None,
                 target=None, cgroup_procs: str | None = None):
        self.binary, self.out = binary, out
        self.delay_s = delay_s
        self.match = re.compile(match) if match else None
        extra = AMD_DEBUG_ENV if flavor_of(binary) != "cuda-gdb" else {}
        # `target`: a server that already runs (capture --pid): its root may be the GPU process itself.
        self.attach_root = target is not None
        self.target = target or PlainBackend(command, out, {**extra, **env}, grace_s, core_limit=core_limit,
                                             cgroup_procs=cgroup_procs)
        self.command_deadline = command_deadline
        self.sessions: dict[int, _AttachSession] = {}
        self.skipped: dict[int, str] = {}
        self.ended: str | None = None

    def start(self) -> None:
        self.target.start()

    @property
    def root_pid(self) -> int:
        return self.target.root_pid

    @property
    def fault_line(self) -> str | None:
        return self.target.fault_line

    @property
    def output(self) -> LineTee:
        return self.target.output

    @property
    def debuggers(self) -> int:
        return sum(1 for s in self.sessions.values() if s.outcome == "running")

    def step(self, sampler: TreeSampler) -> str | None:
        records = {r.pid: r for r in sampler.records()}
        for rec in records.values():
            if rec.pid in self.sessions or rec.pid in self.skipped or \
                    (rec.pid == self.root_pid and self.match is None and not self.attach_root):
                continue
            wanted = rec.gpu if self.match is None else bool(self.match.search(" ".join(rec.raw_cmdline)))
            if not wanted or not os.path.exists(f"/proc/{rec.pid}"):
                continue
            since = rec.gpu_since if self.match is None else rec.first_seen
            if since is not None and time.time() - since < self.delay_s:
                continue    # still initialising: attaching cuda-gdb during CUDA start-up hung it (H200)
            why = self._not_a_worker(rec, records)
            if why:
                self.skipped[rec.pid] = why
                continue
            if any(not s.attached.is_set() for s in self.sessions.values()):
                break       # one attach at a time: two cuda-gdb attaching at once hung the second (H200)
            s = _AttachSession(self.binary, rec.pid, self.out / layout.debugger_transcript(rec.pid), self.command_deadline)
            self.sessions[rec.pid] = s
            s.start()
        if any(s.fault.is_set() for s in self.sessions.values()):
            self.ended = "debugger-stop"
            return self.ended
        return self.target.step(sampler)

    def _not_a_worker(self, rec, records) -> str | None:
        # The CUDA debugger's backend runs as a child of the process it debugs and opens the GPU
        # too (seen on the H200: attaching to it stalled the first attach, and each new debugger
        # spawned another). A process under an attached one is a helper, not a worker.
        exe = os.path.basename(rec.raw_cmdline[0]) if rec.raw_cmdline else ""
        if exe.startswith(("cuda-gdb", "cudbg", "rocgdb", "gdb", "compute-sanitizer")):
            return f"a debugging tool ({exe})"
        pid, hops = rec.ppid, 0
        while pid and pid in records and hops < 64:
            if pid in self.sessions:
                return f"runs under pid {pid}, which has a debugger attached"
            pid, hops = records[pid].ppid, hops + 1
        if len(self.sessions) >= MAX_ATTACHED:
            return f"already {MAX_ATTACHED} debuggers attached"
        return None

    def stop(self) -> dict:
        records = [s.close() for s in self.sessions.values()]
        result = {**self.target.stop(), "debuggers": records,
                  "not_attached": [{"pid": p, "why": w} for p, w in sorted(self.skipped.items())][:200]}
        faulted = [s for s in self.sessions.values() if s.fault.is_set()]
        if self.ended == "debugger-stop" and faulted:
            # The capture ended at the worker's fault: its signal is the status (the launcher's own
            # is only how it took the stop that followed).
            s = faulted[0]
            result.update(exit_code=-signal_number(s.signal), launcher_exit_code=result.get("exit_code"),
                          exit=f"pid {s.pid} stopped in the debugger at {s.signal or 'a fault'}, then killed with it")
        return result


class _AttachSession:
    def __init__(self, binary: str, pid: int, transcript: Path, command_deadline: float):
        self.pid = pid
        self.driver = GdbDriver(binary, transcript, helper_env(), command_deadline)
        self.fault = threading.Event()
        self.attached = threading.Event()     # set once attached, or once attaching has failed
        self.done = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.outcome = "attaching"
        self.signal: str | None = None        # what the fault stop was on

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        d = self.driver
        try:
            if not d.start([]):
                self.outcome = "debugger did not start"
                return
            d.setup(multi_process=False)
            out = d.command(f"attach {self.pid}", deadline=max(60.0, d.command_deadline))
            if out is None or re.search(r"ptrace: |Could not attach|No such process", out):
                self.outcome = f"attach failed: {(out or d.problem or '').strip()[-200:]}"
                return
            d.precise_memory()
            d.resume("continue")
            self.outcome = "running"
            self.attached.set()
            while not self._stop.is_set():
                seen = d.poll_stop(0.3)
                if d.state != "running":
                    self.outcome = f"debugger {d.state}: {d.problem}"
                    return
                if seen is None:
                    continue
                if seen.kind == "fault":
                    self.signal = seen.signal
                    d.harvest()
                    self.outcome = "fault stop" + (" on a GPU thread" if seen.gpu else " on a host thread")
                    self.fault.set()
                    return
                if seen.kind == "exited":
                    self.outcome = "process exited"
                    return
                d.resume("continue")
        finally:
            self.attached.set()
            self.done.set()

    def close(self) -> dict:
        self._stop.set()
        self.done.wait(5)
        how = self.driver.close()
        return {**self.driver.status(), "pid": self.pid, "outcome": self.outcome, "closed": how}


def kill_leftovers(sampler: TreeSampler, keep: int | None = None) -> list[int]:
    """Descendants that outlived their parent (a debugger that died leaves its inferiors
    running, reparented away from our process group): kill them by pid, checking the command
    line first so a reused pid is never hit."""
    killed = []
    for rec in sampler.records():
        if rec.pid in (keep, os.getpid()):
            continue
        if cmdline_of(rec.pid) == rec.raw_cmdline:
            try:
                os.kill(rec.pid, signal.SIGKILL)
                killed.append(rec.pid)
            except OSError:
                pass
    return killed
