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
    # Gone (or a zombie) by the time its environment was read: a short-lived helper (`true`, a
    # compiler, nvidia-smi) that exited between the /proc listing and the read. Not a mismatch.
    exited_before_check: bool = False
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


def children_map() -> dict[int, list[int]]:
    """Each process's children, from /proc."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            pp = _ppid(int(name))
            if pp is not None:
                children.setdefault(pp, []).append(int(name))
    return children


def descendants(root: int, adopted=None) -> list[int]:
    """`root` and every process under it; `adopted(children)`: more roots, chosen among the map of
    each process's children (faultkit's adopted orphans, the members of its cgroup)."""
    children = children_map()
    out, seen, todo = [], set(), [root, *(adopted(children) if adopted else ())]
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
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
            raw = fh.read()
    except (FileNotFoundError, ProcessLookupError):
        raw = None
        rec.exited_before_check = True
    except OSError:
        raw = None
        rec.env_readable = False
    if raw is not None:
        # An exiting process has no memory left to show: its environ reads empty. Only a process
        # still alive with an empty read really had an empty environment.
        if not raw and not alive(pid):
            rec.exited_before_check = True
        pairs = [kv.decode(errors="replace").split("=", 1) for kv in raw.split(b"\0") if b"=" in kv]
        env = {k: v for k, v in pairs}
        rec.env_fingerprints = {k: redaction.fingerprint(v) for k, v in env.items()}
        rec.env = redaction.env(env) if redact_secrets else env
    rec.gpu_devices = gpu_devices(pid)
    rec.gpu = bool(rec.gpu_devices)
    rec.gpu_since = rec.first_seen if rec.gpu else None
    return rec


def alive(pid: int) -> bool:
    """Running or sleeping, not a zombie (exited, not yet reaped) and not gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read().decode(errors="replace")
        return data[data.rindex(")") + 2:].split()[0] not in ("Z", "X", "x")
    except (OSError, ValueError, IndexError):
        return False


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

    def __init__(self, root: int, redact_secrets: bool = True, adopted=None):
        self.root = root
        self.redact = redact_secrets
        self.adopted = adopted           # see descendants(): processes of the tree no longer under root
        self.seen: dict[int, ProcessRecord] = {}

    def sample(self) -> None:
        for pid in descendants(self.root, self.adopted):
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
                    if fresh is not None and fresh.env_readable and not fresh.exited_before_check:
                        fresh.first_seen = rec.first_seen
                        self.seen[pid] = rec = fresh
                if rec.gpu:
                    continue
                devs = gpu_devices(pid)
                if devs:
                    rec.gpu, rec.gpu_devices, rec.gpu_since = True, devs, time.time()

    def records(self) -> list[ProcessRecord]:
        return sorted(self.seen.values(), key=lambda r: r.pid)


SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox"})


def is_shell(cmdline: list[str]) -> bool:
    return bool(cmdline) and os.path.basename(cmdline[0]).lstrip("-") in SHELLS


def verify_env(records: list[ProcessRecord], wanted: dict[str, str]) -> dict:
    """Did every GPU process really get the variables? Where no process opened a GPU (a CPU-only
    machine, or a crash before the device was opened), every process of the tree is checked."""
    gpu = [r for r in records if r.gpu]
    # A shell is a launcher, not a process the variables are for: a pyenv shim's helper shells, a
    # `sh -c` wrapper. The programs they start are checked (the shells too where nothing else ran).
    programs = [r for r in records if not is_shell(r.cmdline)] or records
    checked = [r for r in (gpu or programs) if not r.exited_before_check]
    exited = [r.pid for r in (gpu or programs) if r.exited_before_check]
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
            "wanted": redaction.env(wanted), "ok": not mismatches and bool(checked), "mismatches": mismatches,
            "exited": exited}


def describe_env_check(check: dict) -> str:
    """The check in one sentence, for a terminal line or a warning (never a Python repr)."""
    exited = check.get("exited") or []
    gone = (f"; {len(exited)} short-lived process{'es' if len(exited) != 1 else ''} exited before "
            f"{'they' if len(exited) != 1 else 'it'} could be checked") if exited else ""
    if check.get("ok"):
        return f"verified in {len(check.get('checked') or [])} process(es){gone}"
    mism = check.get("mismatches") or []
    if not mism:
        return f"not verified: no process could be checked{gone}"
    parts = []
    for m in mism[:3]:
        cmd = m.get("cmdline") or ""
        who = f"pid {m.get('pid')}" + (f" ({cmd[:80]}{'...' if len(cmd) > 80 else ''})" if cmd else "")
        if m.get("variable") is None:
            parts.append(f"{who}: {m.get('problem') or 'environment not readable'}")
        elif m.get("found") is None:
            parts.append(f"{who} has no {m['variable']} (wanted {m['variable']}={m.get('expected')})")
        else:
            parts.append(f"{who} has {m['variable']}={m['found']} (wanted {m.get('expected')})")
    more = f", and {len(mism) - 3} more" if len(mism) > 3 else ""
    return "did not reach every process: " + "; ".join(parts) + more + gone


def _shown(name: str, v: str) -> str:
    return redaction.env({name: v})[name]
