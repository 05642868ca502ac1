"""One capture: launch the target, keep every piece of evidence, stop it all, write the bundle.

Backends that need a debugger or tracer (rocgdb, gdb, cuda-gdb, rocprofv3, sanitizer) are not
built yet; `none` and `runtime-log` are, and they are what every other backend also records.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path

from .._signals import exit_words
from . import facts, kmsg
from .launcher import DeferredSigint, Launch, clocks, ended_by_time_or_interrupt, port_from_command, port_listening
from .proctree import TreeSampler, verify_env

BUNDLE_SCHEMA = "faultkit.bundle/1"
BACKENDS_READY = ("none", "runtime-log")
RUNTIME_LOG_ENV = {"AMD_LOG_LEVEL": "4", "AMD_LOG_MASK": "0xFFFFFFFF"}


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
        try:
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                args = [a.decode(errors="replace") for a in fh.read().split(b"\0") if a]
        except OSError:
            continue
        if args and args == wanted:
            raise CaptureError(f"pid {name} already runs the same command ({' '.join(args)[:120]}); stop it or pass "
                               f"--allow-running.")


def capture(opts: CaptureOptions, echo=print) -> dict:
    if opts.backend not in BACKENDS_READY:
        raise CaptureError(f"--with {opts.backend} is not implemented yet; available: {', '.join(BACKENDS_READY)}")
    if not opts.allow_running:
        stale_guard(opts)
    out = opts.out
    out.mkdir(parents=True, exist_ok=True)
    manifest: dict = {"schema": BUNDLE_SCHEMA, "command": opts.command, "backend": opts.backend,
                      "env_requested": opts.env, "start": clocks(), "state": "running", "files": {}}
    _write_manifest(out, manifest)  # a bundle that survives faultkit's own death says what it was

    before = kmsg.snapshot(out / "kernel-before.log")
    follower = kmsg.KmsgFollower(out / "kernel.log")
    following = follower.start()
    manifest["kernel_log"] = {"before": before or "kernel-before.log",
                              "follow": "kernel.log" if following else follower.error}
    manifest["system"] = facts.collect(out)

    env = dict(opts.env)
    if opts.backend == "runtime-log":
        env = {**RUNTIME_LOG_ENV, **env}
    target = Launch(opts.command, out, "server", env)
    sigint = DeferredSigint()
    sigint.__enter__()
    ended_by = None
    try:
        target.start()
        sampler = TreeSampler(target.proc.pid, opts.redact)
        start = time.monotonic()
        fault_seen = None
        while ended_by is None:
            sampler.sample()
            if target.poll() is not None:
                ended_by = "target-exit"
            elif target.fault_line and fault_seen is None:
                fault_seen = time.monotonic()
            elif fault_seen is not None and time.monotonic() - fault_seen > opts.grace_s:
                ended_by = "fault"
            else:
                ended_by = ended_by_time_or_interrupt(start, opts.timeout_s, sigint)
    finally:
        exit_code = target.poll()
        stopped = target.stop()
        if exit_code is None:
            exit_code = target.poll()
        sigint.__exit__()
        follower.stop()
        after = kmsg.snapshot(out / "kernel-after.log")
        records = sampler.records() if target.proc else []
        (out / "environ.json").write_text(json.dumps([r.to_json() for r in records], indent=2))
        check = verify_env(records, env) if env else None
        manifest.update(state="finished", end=clocks(), ended_by=ended_by, exit=exit_words(exit_code),
                        exit_code=exit_code, stopped_with=stopped, fault_line=target.fault_line,
                        env_check=check)
        manifest["kernel_log"]["after"] = after or "kernel-after.log"
        if ended_by == "timeout" and not target.fault_line:
            manifest["note"] = ("no fault reproduced within the timeout (faults that depend on timing can vanish "
                                "under a debugger or tracer)")
        manifest["files"] = {p.name: p.stat().st_size for p in sorted(out.iterdir()) if p.is_file()}
        _write_manifest(out, manifest)
    if check and not check["ok"]:
        echo(f"WARNING: requested environment did not reach every process: {check['mismatches'][:3]}")
    return manifest


def _write_manifest(out: Path, manifest: dict) -> None:
    tmp = out / "manifest.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=2, default=str))
    os.replace(tmp, out / "manifest.json")


def parse_env(pairs: tuple[str, ...]) -> dict[str, str]:
    env = {}
    for kv in pairs:
        k, sep, v = kv.partition("=")
        if not sep or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", k):
            raise CaptureError(f"--env {kv!r}: expected NAME=VALUE")
        env[k] = v
    return env
