"""`faultkit doctor`: will a capture on this machine record what it should? Checked before a long
run rather than found missing after it: the kernel log, core limits and core_pattern, the
debuggers and tracers, the GPU runtimes, the free disk, whether a debugger may attach. Each
failure says what to do.

The rules are capture's own (core arming in `capture.coredump`, the ROCm version in
`capture.facts`, the debuggers capture drives): doctor asks them, it does not restate them.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

SCHEMA = "faultkit.doctor/1"
OK, WARN, FAIL, INFO = "ok", "warn", "fail", "info"
GiB = 1 << 30
LOW_DISK, TOO_LITTLE_DISK = 20 * GiB, 1 * GiB       # lightweight GPU cores: MBs; host cores and full GPU cores: GBs
# What `capture --with ...` drives, and how each says its version.
TOOLS = (("gdb", ["--version"]), ("rocgdb", ["--version"]), ("cuda-gdb", ["--version"]),
         ("rocprofv3", ["--version"]), ("compute-sanitizer", ["--version"]))
KMSG = "/dev/kmsg"
PTRACE_SCOPE = "/proc/sys/kernel/yama/ptrace_scope"
NVIDIA_VERSION = "/proc/driver/nvidia/version"


@dataclass
class Check:
    name: str
    status: str            # ok | warn | fail | info
    found: str             # what is there, in words
    fix: str | None = None  # what to do, where status is warn or fail


def run_checks(folder: Path) -> list[Check]:
    return [kernel_log(), *core_dumps(folder), *tools(), *runtimes(), disk(folder), ptrace()]


def kernel_log() -> Check:
    """Capture follows /dev/kmsg and falls back to its snapshots (`capture.kmsg.snapshot`: dmesg,
    then journalctl): the same two are tried here."""
    import tempfile

    from .capture import kmsg
    try:
        fd = os.open(KMSG, os.O_RDONLY | os.O_NONBLOCK)
        os.close(fd)
        return Check("kernel log", OK, f"{KMSG} readable: GPU page faults, Xids and segfaults are followed live")
    except OSError as exc:
        why = f"{KMSG}: {exc.strerror or exc}"
    with tempfile.TemporaryDirectory(prefix="faultkit-doctor-") as tmp:
        snapshot_error = kmsg.snapshot(Path(tmp) / "kernel.log")
        if snapshot_error is None and not _has_records(Path(tmp) / "kernel.log"):
            # journalctl exits 0 with only "-- No entries --" for a user who may not read the kernel's journal
            snapshot_error = "the snapshot holds no kernel records (journalctl: -- No entries --)"
    if snapshot_error is None:
        return Check("kernel log", WARN, f"{why}; a snapshot works, so the kernel log is read before and after "
                     f"the capture only", "give the capture CAP_SYSLOG or run it as root to follow it live")
    fix = kmsg.unreadable_fix()
    return Check("kernel log", FAIL, f"not readable ({why}; {snapshot_error}): GPU page faults, Xids and "
                 f"segfaults would be missing from every bundle", fix)


def _has_records(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            head = fh.read(1 << 16)
    except OSError:
        return False
    return any(ln.strip() and not ln.startswith(b"-- ") for ln in head.splitlines())


def core_dumps(folder: Path) -> list[Check]:
    """The core-size limits and where the kernel puts host cores, judged by capture's own arming."""
    from .capture import coredump, facts
    soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
    arming = coredump.arm(folder, rocm=facts.rocm_version_text())
    limits = f"soft {_limit(soft)}, hard {_limit(hard)}"
    if hard == 0:
        out = [Check("core limit", FAIL, f"{limits}: no process may write a core (ROCm GPU cores and host cores need "
                     "it; CUDA GPU cores do not)",
                     "raise the hard limit where the server starts: `ulimit -c unlimited` as root, "
                     "docker --ulimit core=-1, or LimitCORE=infinity in a systemd unit")]
    elif arming.core_limit is not None:
        out = [Check("core limit", OK, f"{limits}; capture sets the target's soft limit to "
                                       f"{_limit(arming.core_limit)} itself")]
    else:
        # capture's own arming leaves the limit as it is here (no AMD GPU or ROCm: CUDA GPU cores do
        # not need it): say so, and what a soft limit of 0 costs
        left = next((n for n in arming.notes if n.startswith("core-size limit left")), "capture leaves it as it is")
        out = [Check("core limit", WARN if soft == 0 else OK, f"{limits}; {left}"
                     + ("; host cores (of a segfault) are not written" if soft == 0 else ""),
                     "`ulimit -c unlimited` before `faultkit capture` to have host cores in the bundle"
                     if soft == 0 else None)]
    out += [Check("core arming", WARN, w, "see the warning") for w in arming.warnings]
    pattern = coredump._core_pattern()          # the one reader of core_pattern
    if pattern is None:
        out.append(Check("core_pattern", INFO, "not readable"))
    elif pattern.startswith("|"):
        handler = pattern[1:].split()[0] if pattern[1:].split() else "?"
        known = "systemd-coredump" in handler or "apport" in handler
        out.append(Check("core_pattern", OK if known else WARN,
                         f"host cores go to a program: {pattern[:120]}",
                         None if known else f"faultkit finds host cores of systemd-coredump (coredumpctl) and files; "
                                            f"cores handed to {os.path.basename(handler)} are not collected: set "
                                            f"kernel.core_pattern=core or a file path to have them in the bundle"))
    else:
        out.append(Check("core_pattern", OK, f"host cores are written as {pattern!r}"
                         + (" (relative: in the crashing process's working directory)" if not pattern.startswith("/")
                            else "")))
    return out


def tools() -> list[Check]:
    out = []
    for name, args in TOOLS:
        path = shutil.which(name)
        if path is None:
            out.append(Check(name, INFO, "not installed (capture --with " + _with(name) + " needs it)"))
            continue
        res = _run([path, *args], 20)
        version = _first_line(res[1]) if res else ""
        if res is None or res[0] != 0:
            out.append(Check(name, WARN, f"{path}: `{name} {' '.join(args)}` failed"
                             + (f" (exit {res[0]}: {version})" if res else ""),
                             f"check that {path} runs for this user (library path, permissions)"))
        else:
            out.append(Check(name, OK, f"{path}: {version}"))
    return out


def runtimes() -> list[Check]:
    from .capture import facts
    out = []
    rocm = facts.rocm_version_text()
    kfd = os.path.exists("/dev/kfd")
    if rocm or kfd:
        out.append(Check("ROCm", OK if rocm and kfd else WARN,
                         f"ROCm {rocm or 'version unknown (no /opt/rocm/.info/version)'}; /dev/kfd "
                         f"{'present' if kfd else 'absent'}",
                         None if rocm and kfd else "without /dev/kfd no AMD GPU is usable here (driver not loaded, "
                                                   "or a container without --device /dev/kfd --device /dev/dri)"))
    else:
        out.append(Check("ROCm", INFO, "not installed, no AMD GPU device"))
    nv = _first_line(_read(NVIDIA_VERSION) or "")
    smi = shutil.which("nvidia-smi")
    driver = None
    if smi:
        res = _run([smi, "--query-gpu=name,driver_version", "--format=csv,noheader"], 20)
        if res and res[0] == 0 and res[1].strip():
            driver = "; ".join(sorted(set(ln.strip() for ln in res[1].splitlines() if ln.strip())))
    if nv or driver:
        out.append(Check("NVIDIA", OK, driver or nv))
    elif smi:
        out.append(Check("NVIDIA", WARN, f"{smi} present but no GPU answered",
                         "check the driver (`nvidia-smi` says why) and, in a container, --gpus all"))
    else:
        out.append(Check("NVIDIA", INFO, "no NVIDIA driver"))
    nvcc = shutil.which("nvcc")
    if nvcc:
        res = _run([nvcc, "--version"], 20)
        release = next((ln.strip() for ln in (res[1] if res else "").splitlines() if "release" in ln), "")
        out.append(Check("CUDA toolkit", OK if release else INFO, release or f"{nvcc}: version not read"))
    return out


def disk(folder: Path) -> Check:
    existing = next((p for p in [folder, *folder.absolute().parents] if p.exists()), Path("/"))
    try:
        free = shutil.disk_usage(existing).free
    except OSError as exc:
        return Check("free disk", WARN, f"{existing}: {exc.strerror or exc}", "give a writable folder with --dir")
    found = f"{free / GiB:.1f} GB free at {existing}"
    if free < TOO_LITTLE_DISK:
        return Check("free disk", FAIL, found + ": a bundle with one core would not fit",
                     "free some space or capture into another disk (-o /big/disk/bundle)")
    if free < LOW_DISK:
        return Check("free disk", WARN, found + ": enough for logs and lightweight GPU cores, not for full or host "
                     "cores", "capture with -o on a larger disk before --full-core")
    return Check("free disk", OK, found)


def ptrace() -> Check:
    scope = _read(PTRACE_SCOPE)
    if scope is None or scope == "0" or os.geteuid() == 0:
        return Check("debugger attach", OK, "ptrace allowed" + (f" (yama ptrace_scope {scope})" if scope else ""))
    return Check("debugger attach", WARN, f"yama ptrace_scope is {scope}: a debugger may only attach to its own "
                 f"children", "for --attach-workers or --pid with a debugger: run as root, or "
                 "`sudo sysctl kernel.yama.ptrace_scope=0`")


def exit_status(checks: list[Check]) -> int:
    """0 when nothing failed (warnings allowed), 1 when a check failed."""
    return 1 if any(c.status == FAIL for c in checks) else 0


def render_text(checks: list[Check]) -> str:
    mark = {OK: "ok  ", WARN: "WARN", FAIL: "FAIL", INFO: "--  "}
    lines = []
    for c in checks:
        lines.append(f"{mark[c.status]}  {c.name}: {c.found}")
        if c.fix and c.status in (WARN, FAIL):
            lines.append(f"      what to do: {c.fix}")
    failed = sum(c.status == FAIL for c in checks)
    warned = sum(c.status == WARN for c in checks)
    lines.append(f"{failed} failed, {warned} warning(s)" + ("" if failed else ": a capture here records what it should"
                                                            if not warned else ""))
    return "\n".join(lines) + "\n"


def render_json(checks: list[Check]) -> str:
    return json.dumps({"schema": SCHEMA, "checks": [asdict(c) for c in checks], "exit_status": exit_status(checks)},
                      indent=2) + "\n"


def _with(tool: str) -> str:
    return {"compute-sanitizer": "sanitizer"}.get(tool, tool)


def _limit(v: int | None) -> str:
    if v is None:
        return "unchanged"
    if v == resource.RLIM_INFINITY or v >= 1 << 62:
        return "unlimited"
    return "0" if v == 0 else f"{v / GiB:.1f} GB" if v >= GiB else f"{v:,} bytes"


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _first_line(text: str) -> str:
    return next((ln.strip()[:160] for ln in text.splitlines() if ln.strip()), "")


def _run(cmd: list[str], timeout: float) -> tuple[int, str] | None:
    try:
        res = subprocess.run(cmd, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return res.returncode, (res.stdout + res.stderr).decode("utf-8", "replace")
