"""One capture: launch the target, keep every piece of evidence, stop it all, write the bundle.

Whatever the backend (plain, tool-wrapped, under debuggers), the session records the target's
stamped output, the kernel log, every process's environment and the system facts, and writes
the manifest atomically at the start and the end.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import secrets
import shlex
import shutil
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import layout
from .. import redact as redaction
from .._signals import exit_words, host_crash_signal
from ..private_files import open_lock, private_dir, private_tree, reserve, write_private
from ..ingest.core_file import inspect_core
from ..launch_env import launch_of
from ..manifest import Agent, Clocks, Core, KernelLog, Manifest, dumps, from_json
from . import agent, coredump, facts, kmsg, program, watchdog
from ..analyze.hang import GoneWorker
from .hang_check import HangCheck, flight_recorder_env
from .console import Console
from ..core_debugger import debugger_for, how_to_open, open_core
from ..debuggers import debugger_of
from .follow import NOT_ARMED, FollowBackend, unfollowed
from .backends import Backend, DebugAttachBackend, DebugLaunchBackend, PlainBackend, kill_leftovers
from .rocprof import Rocprofv3Backend
from . import launcher
from .cgroup import OwnCgroup, set_subreaper
from ..private_files import private_dir, private_tree
from .launcher import (DeferredSigint, Launch, clocks, command_text, ended_by_time_or_interrupt, is_helper,
                       missing_program, port_from_command, port_listening, target_argv)
from .proctree import TreeSampler, children_map as descendants_map, cmdline_of, describe_env_check, verify_env

DEBUGGERS = ("rocgdb", "gdb", "cuda-gdb")          # the backend's name is also its default binary
BACKENDS_READY = ("none", "coredump", "runtime-log", "sanitizer", "rocprofv3", *DEBUGGERS)
RUNTIME_LOG_ENV = {"AMD_LOG_LEVEL": "4", "AMD_LOG_MASK": "0xFFFFFFFF"}
SANITIZER = ["compute-sanitizer", "--target-processes", "all", "--tool", "memcheck", "--print-limit", "100"]


class CaptureError(Exception):
    """A capture refused before it began: one line, and the exit status it means (127: no such
    program, 126: not executable, 1: anything else), like a shell's."""

    def __init__(self, message: str, status: int = 1):
        super().__init__(message)
        self.status = status


@dataclass
class CaptureOptions:
    command: str | list[str]             # an argv (exec'd as it is) or a command line (launcher.target_argv)
    out: Path
    backend: str = "none"
    env: dict[str, str] = field(default_factory=dict)
    port: int | None = None
    allow_running: bool = False
    timeout_s: float | None = 7200.0     # None: no limit
    grace_s: float = 2.0
    redact: bool = True
    attach_workers: bool = False
    attach_match: str | None = None      # attach to processes whose command line matches (default: GPU users)
    debugger: str | None = None          # binary for the debugger backends
    command_deadline_s: float = 60.0
    attach_delay_s: float | None = None  # wait after a worker opens the GPU; default 15 s for cuda-gdb, else 0
    coredump: bool = True                # arm the runtimes' GPU core dumps (--no-coredump)
    full_core: bool = False              # keep GPU memory in the core (its size is the GPU memory in use)
    agent: bool = True                   # the in-process agent in every Python process of the target (--no-agent)
    alloc_history: bool = False          # the agent records every block, not only segments (--alloc-history)
    hang_after_s: float | None = None    # this much silence on the target's output is a hang
    even_idle: bool = False              # --even-idle: a silent tree whose stacks say idle is a hang too
    redact_output: bool = False          # replace secrets in the target's own output too
    force: bool = False                  # write into a folder that is not empty
    rocprof_args: list[str] = field(default_factory=list)   # --rocprof-args: passed to rocprofv3 as given
    pid: int | None = None               # --pid: follow a server that already runs instead of starting one


def make_backend(opts: CaptureOptions, env: dict[str, str], core_limit: int | None = None,
                 cgroup_procs: str | None = None) -> Backend:
    binary = opts.debugger or opts.backend
    if opts.backend in DEBUGGERS and shutil.which(binary) is None:
        raise CaptureError(f"--with {opts.backend}: debugger {binary!r} not found (give one with --debugger PATH)")
    delay = opts.attach_delay_s if opts.attach_delay_s is not None else debugger_of(binary).attach_delay_s
    if opts.pid is not None:
        follow = FollowBackend(opts.pid, opts.out, opts.grace_s)
        if opts.backend in DEBUGGERS:
            return DebugAttachBackend(binary, opts.command, opts.out, env, opts.command_deadline_s, opts.grace_s,
                                      opts.attach_match, delay, target=follow)
        if opts.backend not in ("none", "coredump"):
            raise CaptureError(f"--with {opts.backend} changes how the server starts: it cannot be applied to a "
                               f"running process (--pid); use none, or a debugger to attach")
        return follow
    if opts.backend in DEBUGGERS:
        if opts.attach_workers or opts.attach_match:
            return DebugAttachBackend(binary, opts.command, opts.out, env, opts.command_deadline_s, opts.grace_s,
                                      opts.attach_match, delay, core_limit, cgroup_procs=cgroup_procs)
        # A debugger starts only a machine program: a `#!` script, an entry point or a shim is
        # debugged as its interpreter with the script's arguments (execs followed), or refused.
        prog = program.resolve(target_argv(opts.command), {**os.environ, **env})
        if prog.problem:
            raise CaptureError(f"--with {opts.backend}: {prog.problem}; a debugger can start only a machine "
                               f"program (give its interpreter: --with {opts.backend} -- python3 SCRIPT ...)", 126)
        backend = DebugLaunchBackend(binary, prog.argv, opts.out, {**env, **prog.env}, opts.command_deadline_s)
        backend.resolved = prog.chain
        return backend
    if opts.backend == "rocprofv3":
        tool = opts.debugger or "rocprofv3"
        if shutil.which(tool) is None:
            raise CaptureError(f"--with rocprofv3: {tool!r} not found (give one with --debugger PATH)")
        return Rocprofv3Backend(tool, opts.command, opts.out, env, opts.grace_s, core_limit, opts.rocprof_args,
                                cgroup_procs)
    if opts.backend == "sanitizer":
        tool = opts.debugger or SANITIZER[0]
        if shutil.which(tool) is None:
            raise CaptureError(f"--with sanitizer: {tool!r} not found (give one with --debugger PATH)")
        return PlainBackend(opts.command, opts.out, env, opts.grace_s, [tool, *SANITIZER[1:]], core_limit,
                            cgroup_procs)
    return PlainBackend(opts.command, opts.out, env, opts.grace_s, core_limit=core_limit, cgroup_procs=cgroup_procs)


def stale_guard(opts: CaptureOptions) -> None:
    text = command_text(opts.command)
    port = opts.port or port_from_command(text)
    if port is not None and port_listening(port):
        raise CaptureError(f"port {port} is already listening: a server is still running. It would keep its old "
                           f"environment and faultkit would capture the wrong process. Stop it, or pass "
                           f"--allow-running.")
    wanted = target_argv(opts.command)
    if wanted[:2] == [launcher.SHELL, "-c"]:
        try:
            wanted = shlex.split(wanted[2])       # a shell line: its words, as the running one shows them
        except ValueError:
            wanted = wanted[2].split()
    if not wanted:
        return
    # A script, an entry point or a shim runs as its interpreter: compare with what really runs.
    forms = [wanted]
    real = program.resolve(wanted, {**os.environ, **opts.env})
    if not real.problem and real.argv != wanted:
        forms.append(real.argv)
    programs = [_resolved(f[0], None) for f in forms]
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        args = cmdline_of(int(name))
        if not args:
            continue
        if any(_same_args(int(name), args[1:], f[1:]) and prog in _programs_of(int(name), args)
               for f, prog in zip(forms, programs)):
            raise CaptureError(f"pid {name} already runs the same command ({redaction.text(' '.join(args))[:120]}); "
                               f"stop it or pass --allow-running.")


def _same_args(pid: int, running: list[str], wanted: list[str]) -> bool:
    """The same arguments, a script's path compared as the file it names (the kernel hands the
    interpreter the path as it was given: `./serve.py` in one directory is `/srv/serve.py`)."""
    if running == wanted:
        return True
    if len(running) != len(wanted):
        return False
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return False
    return all(a == b or ("/" in a and "/" in b and os.path.realpath(os.path.join(cwd, a)) == os.path.realpath(b))
               for a, b in zip(running, wanted))


def _resolved(prog: str, cwd: str | None) -> str:
    """A program name as the file it runs: found on PATH, or relative to the process's directory."""
    if "/" not in prog:
        prog = shutil.which(prog) or prog
    elif cwd and not os.path.isabs(prog):
        prog = os.path.join(cwd, prog)
    return os.path.realpath(prog)


def _programs_of(pid: int, args: list[str]) -> set[str]:
    """What a running process runs: its argv[0] resolved in its own directory, and its executable
    (`python3` and `/usr/bin/python3.11` are one program; text equality is not the question)."""
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        cwd = None
    found = {_resolved(args[0], cwd)}
    try:
        found.add(os.path.realpath(os.readlink(f"/proc/{pid}/exe")))
    except OSError:
        pass
    return found


def target_variables(opts: CaptureOptions, token: str) -> tuple[dict[str, str], "coredump.Arming | None", dict]:
    """Every variable the capture gives its target, the core-dump arming and the agent's variables
    among them. What the user set (--env) wins over the backends' defaults, the arming and the flight
    recorder; the agent's own win; the marker goes to every process of the tree. Add a new kind of
    variable for the target here."""
    env = {**(RUNTIME_LOG_ENV if opts.backend == "runtime-log" else {}), **opts.env}
    arming = None
    if opts.coredump and opts.pid is None:
        arming = coredump.arm(opts.out, opts.full_core, facts.rocm_version_text(), env,
                              (opts.debugger or opts.backend) if opts.backend in DEBUGGERS else None)
        env = {**arming.env, **env}
    agent_vars = agent.agent_env(opts.out, opts.alloc_history, env) if opts.agent and opts.pid is None else {}
    env = {**env, **agent_vars}
    if opts.pid is None:
        env = {**flight_recorder_env(opts.out), **env}     # what the user set wins
    env[watchdog.MARKER] = token            # every process of the tree carries it, daemons that setsid too
    env[layout.BUNDLE_ENV] = str(opts.out.resolve())   # `faultkit watch` finds a faulting process's bundle by it
    return env, arming, agent_vars


def capture(opts: CaptureOptions, echo=print, console: Console | None = None) -> Manifest:
    """`console` shows the target's output live and a status line; `echo` says faultkit's own steps."""
    # Every path handed to the target (core patterns, the flight recorder's prefix, the agent's
    # folder, a tool's output) is absolute: a worker that changes directory writes into the bundle.
    opts = dataclasses.replace(opts, out=Path(os.path.abspath(opts.out)))
    if opts.backend not in BACKENDS_READY:
        raise CaptureError(f"--with {opts.backend} is not implemented yet; available: {', '.join(BACKENDS_READY)}")
    if opts.pid is not None and not os.path.exists(f"/proc/{opts.pid}"):
        raise CaptureError(f"--pid {opts.pid}: no such process")
    if opts.pid is not None and opts.env:
        raise CaptureError("--env cannot reach a server that already runs (--pid): its environment was fixed at start")
    if opts.pid is None:
        missing = missing_program(target_argv(opts.command), {**os.environ, **opts.env})
        if missing:
            raise CaptureError(missing[1], missing[0])
    if not opts.allow_running and opts.pid is None:
        stale_guard(opts)
    out = opts.out
    try:
        if out.exists() and any(out.iterdir()) and not opts.force:
            raise CaptureError(f"{out} is not empty: a capture never mixes into an existing bundle or folder. Give a "
                               f"new -o, or --force to write into it anyway")
    except OSError as exc:
        raise CaptureError(f"-o {out}: not usable as a bundle folder ({exc.strerror or exc})")
    token = secrets.token_hex(8)
    env, arming, agent_vars = target_variables(opts, token)
    for w in arming.warnings if arming else ():
        echo(f"WARNING: {w}")
    group, group_why = OwnCgroup.create(token) if opts.pid is None else (None, "--pid: not faultkit's to hold")
    try:
        backend = make_backend(opts, env, arming.core_limit if arming else None, group.procs if group else None)
        try:
            private_dir(out)
            lock = _lock(out)
        except OSError as exc:
            raise CaptureError(f"-o {out}: cannot make the bundle folder there ({exc.strerror or exc})")
    except CaptureError:
        if group:
            group.remove()
        raise
    backend.output.redact = opts.redact_output
    if console is not None:
        backend.output.mirror = console.output
    _reserve(out)
    sigint = DeferredSigint()      # from here on a signal ends the capture cleanly, never half-written
    sigint.__enter__()
    subreaper = set_subreaper(True)    # orphans of the tree come back to faultkit, not to init
    if arming:
        private_dir(out / layout.CORES_DIR)
    private_dir(out / layout.COLLECTIVES_DIR)
    shown = (redaction.text, redaction.env) if opts.redact else (str, dict)
    manifest = Manifest(schema=layout.BUNDLE_SCHEMA, command=_shown_command(opts.command, opts.redact),
                        backend=opts.backend,
                        env_requested=shown[1](opts.env), start=Clocks(**clocks()), state="running", files={},
                        coredump=arming.to_json() if arming else
                        {"armed": False, "notes": [NOT_ARMED if opts.pid is not None else "--no-coredump"]})
    if opts.pid is not None:
        manifest.attached_to_pid = opts.pid
    else:
        manifest.started_as = _shown_command(target_argv(opts.command), opts.redact)    # the argv exec'd
        manifest.tree_held_by = {"cgroup": str(group.path) if group else None, "cgroup_problem": group_why,
                                    "subreaper": subreaper, "marker": watchdog.MARKER}
    try:
        _write_manifest(out, manifest)  # a bundle that survives faultkit's own death says what it was
    except OSError as exc:          # a full disk, a read-only folder: refused before anything runs
        _release(out, group, lock, subreaper, sigint, console)
        for d in (out / layout.CORES_DIR, out / layout.COLLECTIVES_DIR, out):
            try:
                d.rmdir()           # the empty folders it made: the same -o works once there is room
            except OSError:
                pass
        raise CaptureError(f"-o {out}: cannot write the bundle there ({exc.strerror or exc}): nothing was started")
    if sigint.hit:                  # a signal while faultkit itself started: the target is never launched
        return _never_launched(out, manifest, sigint, group, lock, subreaper, console)

    before = kmsg.snapshot(out / layout.KERNEL_BEFORE)
    follower = kmsg.KmsgFollower(out / layout.KERNEL_FOLLOW)
    following = follower.start()
    # `readable` and `problem`: whether the kernel's records of the capture are in the bundle, and
    # if not, why and what to do (triage lists it among the report's problems).
    problem = kmsg.unreadable(follower.error, before)
    manifest.kernel_log = KernelLog(before=before or layout.KERNEL_BEFORE,
                                    follow=layout.KERNEL_FOLLOW if following else follower.error,
                                    readable=problem is None, problem=problem)
    if problem:
        echo(f"WARNING: {problem}")
    manifest.system = facts.collect(out)
    manifest.launch = launch_of(dict(os.environ), manifest.system.get("host")).to_json()

    guard = watchdog.Watchdog(out, token, group.path if group else None)
    ended_by = None
    sampler = None
    result: dict = {}
    me = os.getpid()
    # Children faultkit's caller had before the capture are the caller's, never adopted orphans.
    before_children = set(descendants_map().get(me, ()))

    def adopted(children: dict[int, list[int]]) -> set[int]:
        """The tree's processes that are no longer under its root: the cgroup's members, and
        orphans the subreaper brought back to faultkit (any child of faultkit that is not one of
        its own helpers); exited orphans are reaped here, being faultkit's children now."""
        found = set(group.pids()) if group else set()
        for pid in children.get(me, ()):
            if pid in (guard.proc.pid, backend.root_pid) or pid in before_children or is_helper(pid):
                continue
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    continue
            except ChildProcessError:
                continue
            found.add(pid)
        return found

    hang = HangCheck(out, opts.even_idle, echo=echo)
    try:
        backend.start()
        said = unfollowed(backend) if opts.pid is not None else None
        if said:
            echo(f"WARNING: {said}")
            manifest.warn(said)
        # (under attached debuggers the stop detaches them before the group's SIGINT: a SIGINT while
        # gdb holds a worker stops it there and is not passed on)
        launched = _launch_of(backend) if opts.pid is None and opts.backend not in DEBUGGERS else None
        if launched is not None:
            sigint.on_ctrl_c = launched.forward_sigint
        manifest.root_pid = backend.root_pid
        try:
            _write_manifest(out, manifest)    # `faultkit dump BUNDLE` finds the running tree by it
        except OSError as exc:                # a disk full by now: the capture goes on, the end says it
            echo(f"WARNING: the manifest could not be updated ({exc.strerror or exc}): `faultkit dump "
                 f"{out}` will not find the tree; the capture goes on")
        sampler = TreeSampler(backend.root_pid, opts.redact, adopted)
        start = time.monotonic()
        idle_at = 0.0                     # when the stacks last said idle: the silence counts from there
        status_at = 0.0                   # when the status line was last drawn
        # The stacks a timeout keeps are taken before its deadline, so the capture ends at it.
        lead = _end_sampling_s(hang, bool(agent_vars))
        sample_at = None if opts.timeout_s is None else max(0.0, opts.timeout_s - min(lead, opts.timeout_s / 2))
        sampled_early = False
        while ended_by is None:
            sampler.sample()
            guard.hold(_live(sampler))    # what its watchdog kills if faultkit itself is killed
            if console is not None and time.monotonic() - status_at >= 1.0:
                console.status(_status(time.monotonic() - start, sampler, backend, follower, out))
                status_at = time.monotonic()
            ended_by = backend.step(sampler) or ended_by_time_or_interrupt(start, opts.timeout_s, sigint)
            if ended_by is None and sample_at is not None and not sampled_early \
                    and time.monotonic() - start >= sample_at:
                sampled_early = True
                _timeout_stacks(manifest, hang, sampler, out, agent_vars)
            silent = time.monotonic() - max(backend.output.last_output, idle_at)
            # A hang check that could not finish before the timeout's own stacks is left to them.
            room = sample_at is None or time.monotonic() - start + hang.interval_s + 1.0 <= sample_at
            if ended_by is None and opts.hang_after_s and silent > opts.hang_after_s and room:
                # Silence is a hang only where the stacks show one: an idle server is let run.
                if hang.confirm(lambda: _live(sampler), gone=_gone(sampler)):
                    ended_by = "hang"
                else:
                    idle_at = time.monotonic()
        if ended_by == "target-exit" and sigint.hit:
            ended_by = "interrupted"       # the Ctrl-C it was forwarded at once is what ended it
        if ended_by == "interrupted":
            manifest.interrupted_by = sigint.signal
        if sampled_early and ended_by != "timeout":
            _drop_timeout_stacks(manifest, hang, out)      # it ended otherwise after all: they say nothing
        if ended_by == "timeout" and not sampled_early:
            _timeout_stacks(manifest, hang, sampler, out, agent_vars)
        if agent_vars and ended_by in ("hang", "interrupted"):
            # Every Python thread's stack of each live process, before anything stops it.
            manifest.stacks_asked = agent.ask_for_stacks(out, [r.pid for r in sampler.records()
                                                                  if os.path.exists(f"/proc/{r.pid}")])
        if hang.findings:
            manifest.hang_check = hang.findings
        if arming and ended_by in ("timeout", "hang", "interrupted") and not sigint.forced.is_set():
            # Before the tree is stopped: what every SM of a hung server is running.
            gpu = [r for r in sampler.records() if r.gpu and os.path.exists(f"/proc/{r.pid}")]
            nvidia = [r.pid for r in gpu if any("nvidia" in d for d in r.gpu_devices)]
            amd = [r.pid for r in gpu if r.pid not in nvidia]
            if arming.cuda and nvidia:
                manifest.hang_dumps = coredump.trigger_dumps(out, nvidia, echo=echo)
            rocgdb = shutil.which("rocgdb")
            if amd and rocgdb and opts.backend not in DEBUGGERS:
                manifest.hang_snapshots = coredump.rocm_hang_snapshot(out, amd, rocgdb, echo=echo)
    finally:
        if console is not None:
            console.close()
        sigint.stopping = True             # a Ctrl-C from now on forces the stop
        launch = _launch_of(backend)
        if launch is not None:
            launch.say, launch.force = echo, sigint.forced
            launch.ctrl_c = sigint.signal == "SIGINT"
        result = backend.stop()
        if sampler is not None and opts.pid is None:      # a server we did not start is left running
            sampler.sample()
            result["killed_leftovers"] = kill_leftovers(sampler)
        result["killed_leftovers"] = sorted(set(result.get("killed_leftovers", [])) | set(watchdog.kill_marked(token))
                                            | set(group.kill() if group else ()))
        if sampler is not None:
            sampler.sample()               # reaps what the subreaper brought back and was killed
        if group and not group.remove():
            manifest.warn(f"cgroup {group.path} could not be removed")
        set_subreaper(False) if subreaper else None
        if console is not None:
            dropped = console.drain(2.0)
            if dropped:
                manifest.live_output_dropped_bytes = dropped
        follower.stop()
        after = kmsg.snapshot(out / layout.KERNEL_AFTER)
        records = sampler.records() if sampler else []
        try:
            write_private(out / layout.ENVIRON, json.dumps([r.to_json() for r in records], indent=2))
        except OSError as exc:
            manifest.warn(f"{layout.ENVIRON} not saved ({exc.strerror or exc})")
        # The user's variables (and the backend's) are checked; the core-dump arming is recorded apart.
        # A server that already ran (--pid) was handed nothing: nothing to check, nothing to warn of.
        wanted = {k: v for k, v in env.items() if (not arming or k not in arming.env or k in opts.env)
                  and k != watchdog.MARKER and k not in agent_vars} if opts.pid is None else {}
        check = verify_env(records, wanted) if wanted else None
        exit_code = result.pop("exit_code", None)
        if opts.pid is not None and exit_code is None and ended_by == "target-exit" \
                and opts.pid in follower.faults.segfaults:
            exit_code = -int(signal.SIGSEGV)        # the kernel's segfault record of the followed server
            result["exit"] = "killed by SIGSEGV (the kernel log's segfault record; its status was not readable)"
        manifest.set(state="finished", end=Clocks(**clocks()), ended_by=ended_by, exit_code=exit_code,
                     fault_line=redaction.text(backend.fault_line or "") or None, env_check=check, **result)
        manifest.exit = result.get("exit") or exit_words(exit_code)
        problem = kmsg.unreadable(follower.error, after)
        ours, others = follower.faults.count({r.pid for r in records})
        klog = manifest.kernel_log
        klog.after, klog.readable, klog.problem = after or layout.KERNEL_AFTER, problem is None, problem
        klog.faults_of_capture, klog.faults_elsewhere = ours, others
        manifest.agent = (Agent(enabled=True, mode=agent_vars[agent.files.ENV_MODE], processes=agent.processes(out))
                          if agent_vars else
                          Agent(enabled=False, note="--no-agent" if not opts.agent else "a running server (--pid)"))
        if arming:
            manifest.cores = _cores(out, opts, records, manifest, echo, sigint.forced)
        if ended_by == "hang":
            manifest.note = (f"the target printed nothing for {opts.hang_after_s:g} s: treated as a hang"
                                + ("; each GPU process was asked for a core dump first" if arming and arming.cuda else ""))
        crash = host_crash_signal(exit_code) if ended_by == "target-exit" else None
        if crash is None and ended_by == "target-exit" and ours and follower.faults.segfaults & {r.pid for r in records}:
            crash = "SIGSEGV (the kernel log's segfault record)"
        gpu_cores = any(c.platform in ("cuda", "rocm") for c in manifest.cores or [])
        # a tool between the target and the GPU changes its timing: only then can that be why nothing faulted
        watched = opts.backend not in ("none", "coredump") or bool(result.get("debuggers"))
        if crash and not backend.fault_line and not gpu_cores:
            manifest.note = (f"the target crashed on the host (killed by {crash}), not on the GPU: no GPU fault "
                             f"in the evidence")
        elif ended_by in ("timeout", "target-exit") and not backend.fault_line:
            manifest.note = ("no fault reproduced" + (" within the timeout" if ended_by == "timeout" else "")
                             + (" (faults that depend on timing can vanish under a debugger or tracer)"
                                if watched else ""))
        for d in result.get("debuggers", []):
            if d.get("state") in ("hung", "died"):
                manifest.warn(f"debugger {d['state']}: {d.get('problem')}; it was "
                              f"killed and the capture kept the other evidence")
        if backend.output.disk_error:
            manifest.warn(f"disk full: {backend.output.disk_error}")
        (out / RESERVE).unlink(missing_ok=True)        # the room kept for this last write
        manifest.files = _files_of(out)
        try:
            _write_manifest(out, manifest)
        except OSError as exc:
            echo(f"WARNING: the final manifest could not be written ({exc.strerror or exc}); the bundle keeps the "
                 f"one written at the start")
        private_tree(out)
        guard.done()
        (out / layout.LOCK).unlink(missing_ok=True)     # bookkeeping, not evidence: gone with the capture
        lock.close()
        # Held to here, so a signal while the evidence is written never leaves it half-written.
        sigint.__exit__()
    _end_as_asked(sigint)
    if check and not check["ok"]:
        echo(f"WARNING: requested environment {describe_env_check(check)}")
    return manifest


def _never_launched(out: Path, manifest: Manifest, sigint: DeferredSigint, group, lock, subreaper: bool,
                    console: Console | None) -> Manifest:
    """A signal came before the target was launched (while faultkit started): nothing ran, and the
    bundle, finished, says so (`ended_by` interrupted, the signal, no exit status)."""
    manifest.set(state="finished", end=Clocks(**clocks()), ended_by="interrupted", exit_code=None)
    manifest.interrupted_by = sigint.signal
    manifest.exit = "never started"
    manifest.note = f"{sigint.signal} came while faultkit was starting: the target was never launched"
    (out / RESERVE).unlink(missing_ok=True)
    manifest.files = _files_of(out)
    try:
        _write_manifest(out, manifest)
    except OSError as exc:
        manifest.warn(f"the final manifest could not be written ({exc.strerror or exc})")
    private_tree(out)
    _release(out, group, lock, subreaper, sigint, console)
    _end_as_asked(sigint)
    return manifest


def _release(out: Path, group, lock, subreaper: bool, sigint: DeferredSigint, console: Console | None) -> None:
    """What a capture holds before its target starts, given back: the status line, the cgroup, the
    subreaper, the disk reserve, the bundle's lock, the signal handlers."""
    if console is not None:
        console.close()
    if group:
        group.remove()
    if subreaper:
        set_subreaper(False)
    (out / RESERVE).unlink(missing_ok=True)
    (out / layout.LOCK).unlink(missing_ok=True)
    lock.close()
    sigint.__exit__()


def _files_of(out: Path) -> dict[str, int]:
    """The manifest's list of the bundle's top files and their sizes."""
    return {p.name: p.stat().st_size for p in sorted(out.iterdir()) if p.is_file()}


def _end_as_asked(sigint: DeferredSigint) -> None:
    """A signal that came while the capture was finishing (not the one that ended it) was held until
    the bundle was written; now faultkit ends as it asked (SIGINT: 130; SIGTERM: killed by it)."""
    if sigint.late is not None:
        signal.raise_signal(sigint.late)


AGENT_STACKS_WAIT_S = 1.0


def _end_sampling_s(hang: HangCheck, agent_on: bool) -> float:
    """About how long the stacks of a timeout take: the agent's dump, two samples `interval` apart,
    and the tools' own time (a second or two each round)."""
    return (AGENT_STACKS_WAIT_S if agent_on else 0.0) + hang.interval_s + 2.0


def _timeout_stacks(manifest: Manifest, hang: HangCheck, sampler: TreeSampler, out: Path, agent_vars: dict) -> None:
    """Every live process's stacks for a capture its --timeout ends, before anything is stopped:
    the agent's (each Python thread) and two samples judged by the hang check."""
    if agent_vars:
        manifest.stacks_asked = agent.ask_for_stacks(out, _live(sampler), AGENT_STACKS_WAIT_S)
    hang.confirm(lambda: _live(sampler), "timeout", _gone(sampler))


def _drop_timeout_stacks(manifest: Manifest, hang: HangCheck, out: Path) -> None:
    for f in [f for f in hang.findings if str(f.get("tag", "")).startswith("timeout-")]:
        hang.findings.remove(f)
        (out / layout.STACKS_DIR / layout.STACK_SAMPLES.format(tag=f["tag"])).unlink(missing_ok=True)
    manifest.stacks_asked = None


def _shown_command(command, redact: bool) -> str:
    """The command for the manifest: an argv redacted element by element (a flag and its value are
    two), a command line as text."""
    if isinstance(command, str) or len(command) == 1:
        text = command_text(command)
        return redaction.text(text) if redact else text
    if not redact:
        return shlex.join(command)
    # Quoted as a shell would need, the marker left readable (`--api-key <redacted>`).
    return " ".join(shlex.quote(a.replace(redaction.MARK, "REDACTED")).replace("REDACTED", redaction.MARK)
                    for a in redaction.argv(list(command)))


def _launch_of(backend) -> Launch | None:
    """The process launch under a backend (a wrapper's, an attaching debugger's target), if any."""
    t = getattr(backend, "target", None)
    while t is not None and not isinstance(t, Launch):
        t = getattr(t, "target", None)
    return t


def _live(sampler: TreeSampler) -> list[int]:
    return [r.pid for r in sampler.records() if os.path.exists(f"/proc/{r.pid}")]


def _gone(sampler: TreeSampler) -> list[GoneWorker]:
    return [GoneWorker(r.pid, r.ppid, " ".join(r.cmdline)) for r in sampler.records()
            if r.gpu and not os.path.exists(f"/proc/{r.pid}")]


def _status(elapsed: float, sampler: TreeSampler, backend, follower, out: Path) -> str:
    records = sampler.records()
    alive = [r for r in records if os.path.exists(f"/proc/{r.pid}")]
    try:
        cores = sum(1 for p in (out / layout.CORES_DIR).iterdir() if coredump.may_be_core(p.name) and p.is_file())
    except OSError:
        cores = 0
    h, rest = divmod(int(elapsed), 3600)
    # Only the tree's own: another job's fault on a shared node is not this capture's evidence.
    ours, others = follower.faults.count({r.pid for r in records})
    return (f"[faultkit {h}:{rest // 60:02d}:{rest % 60:02d}] {len(alive)} processes, "
            f"{sum(1 for r in alive if r.gpu)} on a GPU, {backend.debuggers} debugger(s) attached, "
            f"{ours} kernel-log fault(s)" + (f" (+{others} elsewhere)" if others else "")
            + f", {cores} core(s) | {out}")


def _cores(out: Path, opts: CaptureOptions, records, manifest: Manifest, echo, stop=None) -> list[Core]:
    """Every core the run left, each opened in its debugger where one is installed; once `stop` is
    set (a signal while finishing) the rest are listed with how to open them, not opened."""
    triggered = {p for p, r in (manifest.hang_dumps or {}).items() if r.startswith("dumped")}
    found = coredump.find_cores(out, [r.pid for r in records], os.getcwd(), manifest.start.wall, triggered,
                                manifest.root_pid)
    cmdlines = {r.pid: r.raw_cmdline for r in records}
    inspected = {c.path: inspect_core(c.path) for c in found}
    hosts = {c.pid: c.path for c in found if inspected[c.path] is not None and inspected[c.path].platform == "host"}
    listed = []
    for c in found:
        core = inspected[c.path]
        entry = {**c.to_json(), "platform": core.platform if core else "not a core",
                 "problems": [p.message for p in core.problems] if core else []}
        if core is not None and core.platform != "host":
            exe = _exe(cmdlines.get(c.pid))
            tool = debugger_for(core, opts.debugger)
            if tool and not (stop is not None and stop.is_set()):
                echo(f"opening {c.path} in {os.path.basename(tool)}")
                op = open_core(core, tool, exe, hosts.get(c.pid), out / layout.CORES_DIR)
                entry.update(analysed_with=tool, transcript=op.transcript_path, seconds=op.seconds,
                             merged=op.merged)
                entry["problems"] += op.problems
            else:
                entry.update(analysed_with=None, open_with=how_to_open(core, exe, hosts.get(c.pid)))
        listed.append(from_json(Core, entry))
    return listed



def _exe(cmdline: list[str] | None) -> str | None:
    if not cmdline:
        return None
    return shutil.which(cmdline[0]) or (cmdline[0] if os.path.isabs(cmdline[0]) else None)


RESERVE = layout.RESERVE


def _reserve(out: Path) -> None:
    """Keep 1 MiB of the disk for the final manifest: a target that fills the disk must not cost
    the record of what happened."""
    try:
        reserve(out / RESERVE, 1 << 20)
    except OSError:
        pass


def _lock(out: Path):
    """One capture per bundle at a time (two writing one folder would interleave their files)."""
    fh = open_lock(out / layout.LOCK)
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.close()
        raise CaptureError(f"another faultkit capture is writing into {out} right now")
    return fh


def _write_manifest(out: Path, manifest: Manifest) -> None:
    write_private(out / layout.MANIFEST, dumps(manifest))
