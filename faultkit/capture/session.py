"""One capture: launch the target, keep every piece of evidence, stop it all, write the bundle.

Whatever the backend (plain, tool-wrapped, under debuggers), the session records the target's
stamped output, the kernel log, every process's environment and the system facts, and writes
the manifest atomically at the start and the end.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import layout
from .._signals import exit_words
from . import facts, kmsg
from .backends import Backend, DebugAttachBackend, DebugLaunchBackend, PlainBackend, kill_leftovers
from .rocprof import Rocprofv3Backend
from .launcher import DeferredSigint, clocks, ended_by_time_or_interrupt, port_from_command, port_listening
from .proctree import TreeSampler, cmdline_of, verify_env

DEBUGGERS = ("rocgdb", "gdb", "cuda-gdb")          # the backend's name is also its default binary
BACKENDS_READY = ("none", "runtime-log", "sanitizer", "rocprofv3", *DEBUGGERS)
RUNTIME_LOG_ENV = {"AMD_LOG_LEVEL": "4", "AMD_LOG_MASK": "0xFFFFFFFF"}
SANITIZER = ["compute-sanitizer", "--target-processes", "all", "--tool", "memcheck", "--print-limit", "100"]


class CaptureError(Exception):
    pass


@dataclass
class CaptureOptions:
    command: str
    out: Path
    backend: str = "none"
    env: dict[str, str] = field(default_factory=dict)
    port: int | None = None
    allow_running: bool = False
    timeout_s: float = 7200.0
    grace_s: float = 2.0
    redact: bool = True
    attach_workers: bool = False
    attach_match: str | None = None      # attach to processes whose command line matches (default: GPU users)
    debugger: str | None = None          # binary for the debugger backends
    command_deadline_s: float = 60.0
    attach_delay_s: float | None = None  # wait after a worker opens the GPU; default 15 s for cuda-gdb, else 0


def make_backend(opts: CaptureOptions, env: dict[str, str]) -> Backend:
    if opts.backend in DEBUGGERS:
        binary = opts.debugger or opts.backend
        if shutil.which(binary) is None:
            raise CaptureError(f"--with {opts.backend}: debugger {binary!r} not found (give one with --debugger PATH)")
        if opts.attach_workers or opts.attach_match:
            delay = opts.attach_delay_s if opts.attach_delay_s is not None else (
                15.0 if "cuda-gdb" in os.path.basename(binary) else 0.0)
            return DebugAttachBackend(binary, opts.command, opts.out, env, opts.command_deadline_s, opts.grace_s,
                                      opts.attach_match, delay)
        return DebugLaunchBackend(binary, opts.command, opts.out, env, opts.command_deadline_s)
    if opts.backend == "rocprofv3":
        tool = opts.debugger or "rocprofv3"
        if shutil.which(tool) is None:
            raise CaptureError(f"--with rocprofv3: {tool!r} not found (give one with --debugger PATH)")
        return Rocprofv3Backend(tool, opts.command, opts.out, env, opts.grace_s)
    if opts.backend == "sanitizer":
        tool = opts.debugger or SANITIZER[0]
        if shutil.which(tool) is None:
            raise CaptureError(f"--with sanitizer: {tool!r} not found (give one with --debugger PATH)")
        return PlainBackend(opts.command, opts.out, env, opts.grace_s, [tool, *SANITIZER[1:]])
    return PlainBackend(opts.command, opts.out, env, opts.grace_s)


def stale_guard(opts: CaptureOptions) -> None:
    port = opts.port or port_from_command(opts.command)
    if port is not None and port_listening(port):
        raise CaptureError(f"port {port} is already listening: a server is still running. It would keep its old "
                           f"environment and faultkit would capture the wrong process. Stop it, or pass "
                           f"--allow-running.")
    try:
        wanted = shlex.split(opts.command)
    except ValueError:
        wanted = opts.command.split()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        args = cmdline_of(int(name))
        if args and args == wanted:
            raise CaptureError(f"pid {name} already runs the same command ({' '.join(args)[:120]}); stop it or pass "
                               f"--allow-running.")


def capture(opts: CaptureOptions, echo=print) -> dict:
    if opts.backend not in BACKENDS_READY:
        raise CaptureError(f"--with {opts.backend} is not implemented yet; available: {', '.join(BACKENDS_READY)}")
    if not opts.allow_running:
        stale_guard(opts)
    env = dict(opts.env)
    if opts.backend == "runtime-log":
        env = {**RUNTIME_LOG_ENV, **env}
    backend = make_backend(opts, env)
    out = opts.out
    out.mkdir(parents=True, exist_ok=True)
    manifest: dict = {"schema": layout.BUNDLE_SCHEMA, "command": opts.command, "backend": opts.backend,
                      "env_requested": opts.env, "start": clocks(), "state": "running", "files": {}}
    _write_manifest(out, manifest)  # a bundle that survives faultkit's own death says what it was

    before = kmsg.snapshot(out / layout.KERNEL_BEFORE)
    follower = kmsg.KmsgFollower(out / layout.KERNEL_FOLLOW)
    following = follower.start()
    manifest["kernel_log"] = {"before": before or layout.KERNEL_BEFORE,
                              "follow": layout.KERNEL_FOLLOW if following else follower.error}
    manifest["system"] = facts.collect(out)

    sigint = DeferredSigint()
    sigint.__enter__()
    ended_by = None
    sampler = None
    result: dict = {}
    try:
        backend.start()
        sampler = TreeSampler(backend.root_pid, opts.redact)
        start = time.monotonic()
        while ended_by is None:
            sampler.sample()
            ended_by = backend.step(sampler) or ended_by_time_or_interrupt(start, opts.timeout_s, sigint)
    finally:
        result = backend.stop()
        if sampler is not None:
            sampler.sample()
            result["killed_leftovers"] = kill_leftovers(sampler)
        sigint.__exit__()
        follower.stop()
        after = kmsg.snapshot(out / layout.KERNEL_AFTER)
        records = sampler.records() if sampler else []
        (out / layout.ENVIRON).write_text(json.dumps([r.to_json() for r in records], indent=2))
        check = verify_env(records, env) if env else None
        exit_code = result.pop("exit_code", None)
        manifest.update(state="finished", end=clocks(), ended_by=ended_by, exit_code=exit_code,
                        fault_line=backend.fault_line, env_check=check, **result)
        manifest["exit"] = result.get("exit") or exit_words(exit_code)
        manifest["kernel_log"]["after"] = after or layout.KERNEL_AFTER
        if ended_by in ("timeout", "target-exit") and not backend.fault_line and ended_by != "debugger-stop":
            manifest["note"] = ("no fault reproduced" + (" within the timeout" if ended_by == "timeout" else "")
                                + " (faults that depend on timing can vanish under a debugger or tracer)")
        for d in result.get("debuggers", []):
            if d.get("state") in ("hung", "died"):
                manifest.setdefault("warnings", []).append(f"debugger {d['state']}: {d.get('problem')}; it was "
                                                           f"killed and the capture kept the other evidence")
        manifest["files"] = {p.name: p.stat().st_size for p in sorted(out.iterdir()) if p.is_file()}
        _write_manifest(out, manifest)
    if check and not check["ok"]:
        echo(f"WARNING: requested environment did not reach every process: {check['mismatches'][:3]}")
    return manifest


def _write_manifest(out: Path, manifest: dict) -> None:
    tmp = out / layout.MANIFEST_TMP
    tmp.write_text(json.dumps(manifest, indent=2, default=str))
    os.replace(tmp, out / layout.MANIFEST)
