"""Start a command in its own process group, keep its output as it arrives, stop the whole tree.

Output is written raw to `<name>.log` (what the program printed, unchanged, so the triage parsers
read it like any log) and, per block, to `<name>.times.tsv` with the wall clock, CLOCK_MONOTONIC
and CLOCK_BOOTTIME of arrival, by the recorder (capture.recorder): written through as it comes, so
a crash of the target or of faultkit itself loses nothing already read.
"""

from __future__ import annotations

import ctypes
import os
import re
import resource
import shlex
import shutil
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from .. import early_signals, layout
from ..early_signals import STOP_SIGNALS
from ..private_files import private_dir
from .recorder import BLOCK, LineTee, clocks  # noqa: F401 - the recorder has its own module; launches use it


def port_listening(port: int) -> bool:
    """Any socket listening on this port, on any address (0.0.0.0, ::1, a NIC's own): read from the
    kernel's socket tables, not by connecting to 127.0.0.1 (a server on ::1 would pass)."""
    found = listening_ports()
    if found is not None:
        return port in found
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:     # no /proc/net: try loopback
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def listening_ports() -> set[int] | None:
    ports: set[int] = set()
    seen = False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as fh:
                seen = True
                for row in fh.readlines()[1:]:
                    f = row.split()
                    if len(f) > 3 and f[3] == "0A":                 # TCP_LISTEN
                        ports.add(int(f[1].rsplit(":", 1)[1], 16))
        except (OSError, ValueError, IndexError):
            continue
    return ports if seen else None


def port_from_command(cmd: str) -> int | None:
    m = re.search(r"--port[= ](\d+)", cmd)
    return int(m.group(1)) if m else None


SHELL = "/bin/sh"
# A first word only a shell understands (or that it must run itself to have its effect).
SHELL_WORDS = {"cd", "export", "exec", "source", ".", "if", "for", "while", "until", "case", "set", "ulimit", "eval",
               "{", "!", "[[", "function", "unset", "trap", "umask", "alias", "time", "select", "coproc", "wait",
               # builtins with no program of that name: exec'd directly they are "not found"
               "exit", "return", ":", "read", "shift", "readonly", "local", "command", "type", "hash", "getopts",
               "builtin", "declare", "typeset", "let", "break", "continue", "jobs", "fg", "bg", "disown", "pushd",
               "popd", "dirs", "logout"}
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def needs_shell(text: str) -> bool:
    """Whether a command line uses shell syntax (pipes, redirections, expansions, globs, lists,
    `VAR=x cmd`, builtins). Quotes and backslashes alone do not: shlex splits them the same way."""
    quote, word_start, i = None, True, 0
    while i < len(text):
        c = text[i]
        if quote == "'":
            quote = None if c == "'" else quote
        elif c == "\\":
            i += 1
        elif quote == '"':
            if c == '"':
                quote = None
            elif c in "$`":
                return True
        elif c in "'\"":
            quote = c
        elif c in "$`|&;<>()*?[]{}\n" or (word_start and c in "~#"):
            return True
        word_start = c in " \t"
        i += 1
    if quote:
        return True                  # unbalanced: the shell says what is wrong with it
    words = shlex.split(text)
    return not words or words[0] in SHELL_WORDS or bool(ASSIGNMENT.match(words[0]))


def target_argv(command: str | Sequence[str]) -> list[str]:
    """What is exec'd for a command: the argv itself, so the exit status is the target's own and no
    wrapper shell stands between faultkit and it; `/bin/sh -c` only for a command line that needs a
    shell. Several words are an argv (the user's shell already split them); one word or a string is
    a command line."""
    if not isinstance(command, str):
        if len(command) != 1:
            return list(command)
        command = command[0]
    return [SHELL, "-c", command] if needs_shell(command) else shlex.split(command)


def command_text(command: str | Sequence[str]) -> str:
    """The command as one line, for the manifest and messages."""
    if isinstance(command, str):
        return command
    return command[0] if len(command) == 1 else shlex.join(command)


def missing_program(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, str] | None:
    """(126 or 127, why) when the program cannot be started, as a shell would say; None when it can
    (or, for a shell command line, when its first word is not a plain program name)."""
    prog = argv[0] if argv else ""
    if argv[:2] == [SHELL, "-c"] and len(argv) > 2:
        try:
            words = shlex.split(argv[2])
        except ValueError:
            return None
        prog = words[0] if words else ""
        if prog in SHELL_WORDS or ASSIGNMENT.match(prog) or not re.fullmatch(r"[\w./+-]+", prog):
            return None
    path = (env or os.environ).get("PATH", os.defpath)
    if "/" in prog:
        if not os.path.exists(prog):
            return 127, f"{prog}: no such file"
        if os.path.isdir(prog) or not os.access(prog, os.X_OK):
            return 126, f"{prog}: not an executable file"
        return None
    if shutil.which(prog, path=path) is None:
        return 127, f"{prog}: command not found"
    return None


def target_env(extra: dict[str, str]) -> dict[str, str]:
    """The target's environment: faultkit's own with the capture's variables on top (the user's
    --env, the core-dump arming, the capture marker). The one place a launched target's
    environment is made; debugger-launched targets get it through their debugger."""
    return {**os.environ, **extra}


# faultkit's own helper processes (attached debuggers, the watchdog) carry this, with faultkit's
# pid: the subreaper brings the target's orphans back as faultkit's children, and these are not them.
HELPER = "FAULTKIT_HELPER"


def helper_env(env: dict[str, str] | None = None) -> dict[str, str]:
    return {**(os.environ if env is None else env), HELPER: str(os.getpid())}


# Helpers whose exit status a waiter of faultkit's own collects (pexpect's debuggers): once one
# exits it is a zombie whose environment reads empty, and reaping it as a tree orphan would steal
# that status (pexpect: "no child process"). Their pids are known from the spawn, so they are listed.
_WAITED: set[int] = set()


def own_helper(pid: int) -> None:
    _WAITED.add(pid)


def is_helper(pid: int) -> bool:
    if pid in _WAITED:
        return True
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            if f"{HELPER}={os.getpid()}".encode() in fh.read().split(b"\0"):
                return True
        # forked by faultkit and not yet exec'd (a helper being started): still faultkit's command line
        with open(f"/proc/{pid}/cmdline", "rb") as a, open("/proc/self/cmdline", "rb") as b:
            return a.read() == b.read()
    except OSError:
        return False


@dataclass
class Launch:
    command: str | list[str]             # a command line, or an argv (see target_argv)
    out_dir: Path
    name: str = layout.SERVER
    env_extra: dict[str, str] = field(default_factory=dict)
    core_limit: int | None = None        # the target's soft core-size limit (GPU core dumps), None: inherited
    cgroup_procs: str | None = None      # the capture's own cgroup: the target joins it before exec
    proc: subprocess.Popen | None = None
    started: dict | None = None
    say: object = None                   # says each stop step (faultkit's console)
    force: threading.Event | None = None  # set: stop with SIGKILL now
    ctrl_c: bool = False                 # a Ctrl-C began this stop: its hint is "again" (a --timeout's is not)
    tee: "LineTee" = None
    _reader: threading.Thread | None = None
    sigint_at: float | None = None       # when a Ctrl-C was passed on (forward_sigint): the stop's first step

    def __post_init__(self):
        self.tee = LineTee(self.out_dir, self.name)

    def start(self) -> None:
        private_dir(self.out_dir)
        env = target_env(self.env_extra)
        self.started = clocks()
        argv = target_argv(self.command)
        kw = dict(stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                  start_new_session=True, preexec_fn=_child_setup(self.core_limit, self.cgroup_procs))
        try:
            self.proc = subprocess.Popen(argv, **kw)
        except OSError:
            # Not startable: a shell execs it instead and says why in the output, with its 127/126,
            # as when every target ran under one.
            self.proc = subprocess.Popen([SHELL, "-c", 'exec "$@"', "sh", *argv], **kw)
        _pipe_size(self.proc.stdout)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def watch_for(self, pattern: str) -> threading.Event:
        return self.tee.watch_for(pattern)

    def _read(self) -> None:
        self.tee.run(self.proc.stdout)

    @property
    def fault_line(self) -> str | None:
        return self.tee.fault_line

    @property
    def lines(self) -> int:
        return self.tee.lines

    def poll(self) -> int | None:
        return self.proc.poll() if self.proc else None

    def forward_sigint(self) -> None:
        """SIGINT to the whole process group now (from a signal handler: no lock, no I/O)."""
        if self.proc is None or self.sigint_at is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGINT)
            self.sigint_at = time.monotonic()
        except OSError:
            pass

    def stop(self, deadlines: tuple[float, float, float] = (5.0, 5.0, 5.0)) -> list[str]:
        """SIGINT, then SIGTERM, then SIGKILL to the whole process group, each with a deadline, each
        said through `say`; once `force` is set (a second Ctrl-C), SIGKILL at once. Returns what was sent."""
        sent: list[str] = []
        if self.proc is None:
            return sent
        pgid = self.proc.pid
        steps = list(zip((signal.SIGINT, signal.SIGTERM, signal.SIGKILL), deadlines))
        i = 0
        if self.sigint_at is not None and self.force is not None and self.force.is_set():
            sent.append("SIGINT")             # passed on at the Ctrl-C; a second one forces the kill now
        while i < len(steps):
            sig, wait = steps[i]
            if not group_alive(pgid):
                break
            forced = self.force is not None and self.force.is_set()
            if forced:
                sig = signal.SIGKILL
            passed_on = i == 0 and sig == signal.SIGINT and self.sigint_at is not None
            try:
                if not passed_on:             # (a Ctrl-C passed on at once was this first step)
                    os.killpg(pgid, sig)
                sent.append(sig.name)
            except ProcessLookupError:
                break
            if self.say is not None:
                nxt = steps[i + 1][0].name if i + 1 < len(steps) and sig != signal.SIGKILL else None
                hint = "Ctrl-C again" if self.ctrl_c or self.sigint_at is not None else "Ctrl-C"
                self.say(f"stopping: {sig.name} sent" + (f", {nxt} in {wait:g} s ({hint} to kill it now)"
                                                         if nxt else ""))
            if sig == signal.SIGKILL:
                wait = max(wait, 5.0)
            end = time.monotonic() + wait
            while time.monotonic() < end and group_alive(pgid):
                self.proc.poll()
                if sig != signal.SIGKILL and self.force is not None and self.force.is_set():
                    break
                time.sleep(0.05)
            if sig == signal.SIGKILL:
                break
            i += 1
        self.proc.poll()
        if self._reader is not None:
            self._reader.join(timeout=5)
        return sent


PR_SET_PDEATHSIG = 1
PIPE_SIZE = BLOCK          # the target's output pipe: 1 MiB (Linux's default 64 KiB wakes the reader 16x as often)
F_SETPIPE_SZ = 1031


def _pipe_size(stream) -> None:
    try:
        import fcntl
        fcntl.fcntl(stream.fileno(), F_SETPIPE_SZ, PIPE_SIZE)
    except (OSError, ValueError, AttributeError):
        pass                  # above /proc/sys/fs/pipe-max-size for this user: the default stays


def _child_setup(limit: int | None, cgroup_procs: str | None = None):
    """In the launched child, before exec: its own cgroup (every descendant stays in it, whatever it
    does), its core-size limit, and SIGKILL when faultkit dies (even by SIGKILL), so a killed
    capture never leaves a server running behind it."""
    parent = os.getpid()

    def apply() -> None:
        if cgroup_procs:
            try:
                fd = os.open(cgroup_procs, os.O_WRONLY)
                try:
                    os.write(fd, b"0")
                finally:
                    os.close(fd)
            except OSError:
                pass          # the capture still has the subreaper and the marker
        if limit is not None:
            _, hard = resource.getrlimit(resource.RLIMIT_CORE)
            resource.setrlimit(resource.RLIMIT_CORE,
                               (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):
            pass
        if os.getppid() != parent:          # faultkit died before the prctl took effect
            os._exit(137)
    return apply


def group_alive(pgid: int) -> bool:
    """True while any process of the group exists (zombies of our own child excluded)."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                data = fh.read().decode(errors="replace")
            fields = data[data.rindex(")") + 2:].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                return True
        except (OSError, ValueError, IndexError):
            continue
    return False




class DeferredSigint:
    """Ctrl-C during a capture or trial must not skip the bookkeeping that stops the tree and saves
    the evidence: the signal only sets `hit`, and the wait loop ends cleanly on it."""

    # SIGTERM (a supervisor), SIGHUP (the terminal closed) and SIGQUIT end a capture the same way:
    # the tree is stopped and the manifest finished, never left `running`.
    SIGNALS = STOP_SIGNALS

    def __init__(self):
        self.hit = False
        self.signal: str | None = None
        self.stopping = False                 # the tree is being stopped: another signal forces it
        self.forced = threading.Event()
        self.late: int | None = None          # a signal that came only while stopping (not the interrupt)
        self.on_ctrl_c = None                 # called at the first SIGINT: passes it to the target at once
        self._old: dict = {}

    def __enter__(self) -> "DeferredSigint":
        for s in self.SIGNALS:
            if early_signals.inherited_ignore(s):
                continue                      # `nohup faultkit capture`: the caller asked for it ignored
            self._old[s] = signal.signal(s, self._on)
        # What came while faultkit started (held by the command line) is this capture's interrupt;
        # taken after our handlers are in, so none falls between the two.
        pending, original = early_signals.take()
        self._old.update({s: h for s, h in original.items() if s in self._old})
        for s in pending:
            self._on(s, None)
        return self

    def _on(self, signum, frame) -> None:
        if self.hit or self.stopping:
            if not self.hit and self.late is None:
                self.late = signum
            self.forced.set()
            return
        self.hit = True
        self.signal = signal.Signals(signum).name
        if signum == signal.SIGINT and self.on_ctrl_c is not None:
            # A Ctrl-C reaches the target as a terminal would deliver it (its own session keeps the
            # terminal's SIGINT from it): at once, not after the stacks and bookkeeping an interrupt
            # collects first (a second Ctrl-C within that second killed it without any SIGINT).
            self.on_ctrl_c()

    def __exit__(self, *exc) -> None:
        for s, old in self._old.items():
            signal.signal(s, old)


def ended_by_time_or_interrupt(start: float, timeout_s: float | None, sigint: DeferredSigint) -> str | None:
    if timeout_s is not None and time.monotonic() - start > timeout_s:
        return "timeout"
    if sigint.hit:
        return "interrupted"
    time.sleep(0.05)
    return None
