"""The target's process tree as /proc shows it: command lines, real environments, GPU use.

A variable set for a launcher does not always reach the GPU worker (a server that was already
running, a launcher that scrubs its children's environment); only /proc/PID/environ of the worker
says what it really had.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import asdict, dataclass, field

from .. import redact as redaction

GPU_DEVICE = re.compile(r"^/dev/(?:kfd|dri/renderD\d+|nvidia\d*|nvidiactl|nvidia-uvm)$")


@dataclass
class ProcessRecord:
    pid: int
    ppid: int
    cmdline: list[str]
    env: dict[str, str] = field(default_factory=dict)
    gpu: bool = False
    gpu_devices: list[str] = field(default_factory=list)
    first_seen: float = 0.0
    env_readable: bool = True
    gpu_since: float | None = None   # time.time() when it was first seen holding a GPU device
    # Kept in memory only (never written): the real command line, to recognise the process again,
    # and a fingerprint of every variable, to check requested values without writing them.
    raw_cmdline: list[str] = field(default_factory=list, repr=False)
    env_fingerprints: dict[str, str] = field(default_factory=dict, repr=False)

    def to_json(self) -> dict:
        out = asdict(self)
        del out["raw_cmdline"], out["env_fingerprints"]
        return out


def _ppid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read().decode(errors="replace")
        # comm may contain spaces and parentheses: fields start after the last ')'
        return int(data[data.rindex(")") + 2:].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            pp = _ppid(int(name))
            if pp is not None:
                children.setdefault(pp, []).append(int(name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def cmdline_of(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return [a.decode(errors="replace") for a in fh.read().split(b"\0") if a]
    except OSError:
        return None


def read_process(pid: int, redact_secrets: bool = True) -> ProcessRecord | None:
    cmdline = cmdline_of(pid)
    if cmdline is None:
        return None
    rec = ProcessRecord(pid=pid, ppid=_ppid(pid) or 0, first_seen=time.time(), raw_cmdline=cmdline,
                        cmdline=redaction.argv(cmdline) if redact_secrets else cmdline)
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            pairs = [kv.decode(errors="replace").split("=", 1) for kv in fh.read().split(b"\0") if b"=" in kv]
        env = {k: v for k, v in pairs}
        rec.env_fingerprints = {k: redaction.fingerprint(v) for k, v in env.items()}
        rec.env = redaction.env(env) if redact_secrets else env
    except OSError:
        rec.env_readable = False
    rec.gpu_devices = gpu_devices(pid)
    rec.gpu = bool(rec.gpu_devices)
    rec.gpu_since = rec.first_seen if rec.gpu else None
    return rec


def gpu_devices(pid: int) -> list[str]:
    found = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if GPU_DEVICE.match(target):
                found.add(target)
    except OSError:
        pass
    return sorted(found)


class TreeSampler:
    """Remembers every descendant seen; processes are short-lived, so sample often."""

    def __init__(self, root: int, redact_secrets: bool = True):
        self.root = root
        self.redact = redact_secrets
        self.seen: dict[int, ProcessRecord] = {}

    def sample(self) -> None:
        for pid in descendants(self.root):
            rec = self.seen.get(pid)
            if rec is None:
                rec = read_process(pid, self.redact)
                if rec is not None:
                    self.seen[pid] = rec
            else:
                now = cmdline_of(pid)
                if now and now != rec.raw_cmdline:      # empty: a zombie, whose record stays as it was
                    # Seen between fork and exec, a child showed its parent's command line and
                    # environment: read it again now that it has exec'd.
                    fresh = read_process(pid, self.redact)
                    if fresh is not None and fresh.env_readable:
                        fresh.first_seen = rec.first_seen
                        self.seen[pid] = rec = fresh
                if rec.gpu:
                    continue
                devs = gpu_devices(pid)
                if devs:
                    rec.gpu, rec.gpu_devices, rec.gpu_since = True, devs, time.time()

    def records(self) -> list[ProcessRecord]:
        return sorted(self.seen.values(), key=lambda r: r.pid)


def verify_env(records: list[ProcessRecord], wanted: dict[str, str]) -> dict:
    """Did every GPU process really get the variables? Where no process opened a GPU (a CPU-only
    machine, or a crash before the device was opened), every process of the tree is checked."""
    gpu = [r for r in records if r.gpu]
    checked = gpu or records
    mismatches = []
    for r in checked:
        if not r.env_readable:
            mismatches.append({"pid": r.pid, "variable": None, "problem": "environment not readable"})
            continue
        for k, v in wanted.items():
            if r.env_fingerprints.get(k) != redaction.fingerprint(v):
                # Values as the record has them (redacted where secret): compared by fingerprint.
                mismatches.append({"pid": r.pid, "cmdline": " ".join(r.cmdline)[:200], "variable": k,
                                   "expected": _shown(k, v), "found": r.env.get(k) if k in r.env else None})
    return {"checked": [r.pid for r in checked], "scope": "gpu-processes" if gpu else "all-processes",
            "wanted": redaction.env(wanted), "ok": not mismatches and bool(checked), "mismatches": mismatches}


def _shown(name: str, v: str) -> str:
    return redaction.env({name: v})[name]
