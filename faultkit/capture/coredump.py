"""GPU core dumps at the moment of the fault, armed by default in every capture.

The runtimes write them themselves, at no cost before a fault (measured on the H200; see
../shared/reference/gpu_coredumps.md): the CUDA driver with `CUDA_ENABLE_COREDUMP_ON_EXCEPTION`,
ROCr on by default since ROCm 6.2, gated by the core-size limit. This module decides the
environment and the core-size limit for the target, finds the cores afterwards (where the
runtime was told to write them, and where older runtimes write them anyway), and asks hung CUDA
processes for a dump through their user-triggered pipe.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import socket
import stat
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import layout
from ..debuggers import flavor_of

LIGHT_CUDA_FLAGS = ("skip_nonrelocated_elf_images,skip_global_memory,skip_shared_memory,skip_local_memory,"
                    "skip_constbank_memory")     # never skip_abort: the H200 then ignored the illegal access
# ROCr's HSA_ENABLE_LIGHTWEIGHT_COREDUMP was merged in 2026-02 (rocm-systems #3338): a ROCm that
# says it is older cannot make a lightweight dump, so its core-size limit is capped instead.
ROCM_LIGHTWEIGHT_SINCE = (7, 3)
# rocr-debug-agent and the ROCr dump exclude each other before rocm-systems #6811 (2026-06).
ROCM_AGENT_AND_DUMP_SINCE = (7, 11)
DEFAULT_CAP = 16 << 30          # core-size limit where a runtime might write a full dump
GiB = 1 << 30


@dataclass
class Arming:
    env: dict[str, str] = field(default_factory=dict)
    core_limit: int | None = None         # soft RLIMIT_CORE for the target (None: leave it)
    cuda: bool = False
    rocm: bool = False
    full: bool = False
    notes: list[str] = field(default_factory=list)        # what was armed, and why not where not
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"cuda": self.cuda, "rocm": self.rocm, "full": self.full, "core_limit": self.core_limit,
                "env": self.env, "notes": self.notes, "warnings": self.warnings}


def rocm_version(text: str | None) -> tuple[int, int] | None:
    m = re.match(r"\s*(\d+)\.(\d+)", text or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def amd_gpu_present() -> bool:
    return os.path.exists("/dev/kfd")


def arm(out: Path, full: bool = False, rocm: str | None = None, target_env: dict[str, str] | None = None,
        debugger: str | None = None, amd: bool | None = None) -> Arming:
    """`rocm`: the installed ROCm version text, if any; `target_env`: the environment the target will
    have (the debug agent there changes what ROCr can do); `debugger`: a debugger attached to it;
    `amd`: an AMD GPU is here (default: /dev/kfd exists)."""
    cores = out / layout.CORES_DIR          # created by the session with the bundle
    a = Arming(full=full)
    soft, hard = (_bytes(v) for v in resource.getrlimit(resource.RLIMIT_CORE))
    existing = next(p for p in [out, *out.absolute().parents] if p.exists())
    free = shutil.disk_usage(existing).free
    amd = amd_gpu_present() if amd is None else amd
    ver = rocm_version(rocm)
    if hard == 0 and (amd or ver):
        a.warnings.append("the hard core-size limit is 0 (ulimit -Hc): no process may write a core, so neither "
                          "runtime can dump; raise it where the server is started (e.g. `ulimit -c unlimited` as "
                          "root, or docker --ulimit core=-1)")
    if full:
        a.warnings.append(f"--full-core: a full GPU core is about the size of the GPU memory in use (tens to "
                          f"hundreds of GB, minutes to write); {free / GiB:.1f} GB are free on the bundle's disk")
    # CUDA: off by default in the driver, self-contained, honours our file pattern.
    a.cuda = True
    a.env.update({"CUDA_ENABLE_COREDUMP_ON_EXCEPTION": "1", "CUDA_COREDUMP_SHOW_PROGRESS": "1",
                  "CUDA_COREDUMP_FILE": str(cores / "cuda.%h.%p.%t"),
                  "CUDA_ENABLE_USER_TRIGGERED_COREDUMP": "1",
                  "CUDA_COREDUMP_PIPE": str(cores / "pipe.%h.%p")})
    if not full:
        a.env["CUDA_COREDUMP_GENERATION_FLAGS"] = LIGHT_CUDA_FLAGS
        a.notes.append("CUDA: lightweight GPU core on exception (registers, stacks, kernels; no memory contents), "
                       "written to cores/cuda.<host>.<pid>.<time>; the driver aborts the process after writing it "
                       "(exit 134): in-process error handlers and the Python traceback do not run")
    else:
        a.notes.append("CUDA: full GPU core on exception (GPU memory included)")
    # ROCm: on by default since 6.2, gated by the core-size limit.
    env = {**os.environ, **(target_env or {})}
    agent = "debug-agent" in env.get("HSA_TOOLS_LIB", "")
    if agent and (ver is None or ver < ROCM_AGENT_AND_DUMP_SINCE):
        a.notes.append("ROCm: GPU core dump NOT armed: rocr-debug-agent is loaded (HSA_TOOLS_LIB) and before "
                       "rocm-systems PR 6811 the two conflict ('Failed to enable debug interface' / 'GPU core dump "
                       "failed'); faultkit kept the debug agent")
    elif debugger and flavor_of(debugger) != "cuda-gdb":
        a.notes.append(f"ROCm: GPU core dump NOT armed: {os.path.basename(debugger)} is attached and handles the "
                       f"exception itself (a runtime dump under a debugger fails before PR 6811)")
    else:
        a.rocm = True
        a.env.update({"HSA_COREDUMP_PATTERN": str(cores / "gpucore.%p"), "HSA_COREDUMP_SHOW_PROGRESS": "1",
                      "HIP_SKIP_ABORT_ON_GPU_ERROR": "0"})
        if not full:
            a.env["HSA_ENABLE_LIGHTWEIGHT_COREDUMP"] = "1"
        a.notes.append("ROCm: ROCr GPU core on exception to cores/gpucore.<pid> (runtimes before 2025-11 write "
                       "gpucore.<pid> in the working directory instead: collected from there too); "
                       "HIP_SKIP_ABORT_ON_GPU_ERROR=0 so the process aborts and the kernel writes the host core "
                       "rocgdb needs")
    # The core-size limit: ROCr stops writing at it (the CUDA driver does not need it). Raised only
    # where ROCm can run: elsewhere it would only make the kernel write host cores of every crash.
    cap = min(hard, max(0, min(DEFAULT_CAP, free // 2)))
    if not (amd or ver) or not a.rocm:
        a.notes.append(f"core-size limit left at {_limit(soft)}: " + ("no AMD GPU or ROCm here (CUDA GPU cores do not "
                       "depend on it)" if not (amd or ver) else "ROCm dumps are not armed"))
    elif full:
        a.core_limit = resource.RLIM_INFINITY if hard >= INFINITE else hard
    elif ver is not None and ver < ROCM_LIGHTWEIGHT_SINCE:
        a.core_limit = cap
        a.notes.append(f"ROCm {ver[0]}.{ver[1]} cannot write lightweight GPU cores: the core-size limit is capped at "
                       f"{cap / GiB:.1f} GB (half the free disk, at most {DEFAULT_CAP // GiB} GB); ROCr stops writing "
                       f"there, keeping the agents, queues and the first segments")
    else:
        a.core_limit = cap
        if a.core_limit != soft:
            a.notes.append(f"core-size limit for the target raised from {_limit(soft)} to {_limit(a.core_limit)} "
                           f"(capped by the hard limit {_limit(hard)} and the free disk)")
    return a


INFINITE = 1 << 63


def _bytes(v: int) -> int:
    return INFINITE if v == resource.RLIM_INFINITY else v


def _limit(v: int) -> str:
    return "unlimited" if v >= INFINITE else f"{v / GiB:.1f} GB" if v >= GiB else f"{v} bytes"


# ---------------- finding the cores ----------------

@dataclass
class FoundCore:
    path: str
    pid: int | None
    how: str                   # armed pattern | working directory | core_pattern | coredumpctl | user-triggered
    size: int
    time: float

    def to_json(self) -> dict:
        return {"path": self.path, "pid": self.pid, "how_found": self.how, "size": self.size, "time": self.time}


def may_be_core(name: str) -> bool:
    """A name in the bundle's cores/ that can be a core: not the CUDA driver's user-triggered pipe
    (a FIFO it makes per GPU process at start), a hidden file, a transcript or a merged listing."""
    return not (name.startswith(("pipe.", ".")) or name.endswith((".txt", ".merged")))


def find_cores(out: Path, pids: list[int], cwd: str, since: float, triggered: set[int] = frozenset(),
               session: int | None = None) -> list[FoundCore]:
    """Cores written since the capture began: in the bundle's cores/, as `gpucore.<pid>` in the
    working directory (older ROCr), and host cores where the kernel's core_pattern puts them.
    Cores of the capture's processes found outside the bundle are moved into its cores/: the
    bundle holds the whole incident, and the user's folders do not fill up with cores. A host
    core is the capture's when its pid was seen or its session is the target's (`session`: the
    launched process leads its own session, so short-lived children the sampler missed count)."""
    from ..ingest.core_file import inspect_core, pid_from_name

    found: dict[str, FoundCore] = {}
    cores = out / layout.CORES_DIR
    wanted = set(pids)

    def add(p: Path, how: str, pid: int | None, outside: bool = False) -> None:
        try:
            st = p.stat()
        except OSError:
            return
        if not stat.S_ISREG(st.st_mode) or st.st_mtime < since - 1 or str(p) in found:
            return
        if outside:
            real = inspect_core(p)
            pid = real.pid if real is not None and real.pid is not None else pid
            ours = pid in wanted or (session is not None and real is not None and real.session == session)
            if real is None or not ours:
                return                  # not a core, or another process's
            dest = cores / (p.name if p.name.startswith("gpucore") else f"host.{pid}")
            try:
                shutil.move(str(p), dest)
                p, how = dest, how + ", moved into the bundle"
            except OSError:
                pass
        found[str(p)] = FoundCore(str(p), pid, how, st.st_size, st.st_mtime)

    if cores.is_dir():
        for p in sorted(cores.iterdir()):
            if not may_be_core(p.name):
                continue
            pid = pid_from_name(p.name)
            add(p, "user-triggered" if pid in triggered else "armed pattern", pid)
    for p in sorted(Path(cwd).glob("gpucore.*")):
        pid = pid_from_name(p.name)
        if pid in wanted:
            add(p, "working directory (a ROCr older than HSA_COREDUMP_PATTERN)", pid, outside=True)
    pattern = _core_pattern()
    if pattern and not pattern.startswith("|"):
        for p in _expand(pattern, cwd):
            add(p, f"core_pattern {pattern!r}", None, outside=True)     # whose it is: read from the core
    elif pattern and "systemd-coredump" in pattern and shutil.which("coredumpctl"):
        for pid in pids:
            dest = cores / f"host.{pid}"
            try:
                subprocess.run(["coredumpctl", "dump", str(pid), "-o", str(dest)], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
            except (OSError, subprocess.TimeoutExpired):
                continue
            add(dest, "coredumpctl", pid)
    return sorted(found.values(), key=lambda c: c.time)


def _core_pattern() -> str | None:
    try:
        return Path("/proc/sys/kernel/core_pattern").read_text().strip()
    except OSError:
        return None


def _expand(pattern: str, cwd: str) -> list[Path]:
    """Files the kernel's core_pattern could have written (a file pattern, not a pipe)."""
    glob = re.sub(r"%.", lambda m: "%" if m.group(0) == "%%" else "*", pattern)
    base = Path(glob) if glob.startswith("/") else Path(cwd) / glob
    if not base.parent.is_dir():
        return []
    hits = set(base.parent.glob(base.name))
    if "%p" not in pattern:                                   # core_uses_pid appends .<pid>
        hits |= set(base.parent.glob(base.name + ".[0-9]*"))
    return sorted(hits)[:1000]


# ---------------- hangs: ask each CUDA process for a dump ----------------

def trigger_dumps(out: Path, pids: list[int], wait_s: float = 60.0, echo=print) -> dict[int, str]:
    """Write to each GPU process's user-triggered coredump pipe and wait for its core, so a hung
    server's report says what every SM was running. Returns pid -> what happened."""
    cores = out / layout.CORES_DIR
    host = socket.gethostname()
    result: dict[int, str] = {}
    for pid in pids:
        pipe = cores / f"pipe.{host}.{pid}"
        if not pipe.exists() or not stat.S_ISFIFO(pipe.stat().st_mode):
            continue
        try:
            fd = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
            try:
                os.write(fd, b"1")
            finally:
                os.close(fd)
            result[pid] = "triggered"
            echo(f"asked pid {pid} for a GPU core dump (user-triggered pipe)")
        except OSError as exc:
            result[pid] = f"could not write to its pipe ({exc.strerror or exc})"
    deadline = time.monotonic() + wait_s
    pending = {p for p, r in result.items() if r == "triggered"}
    while pending and time.monotonic() < deadline:
        for pid in list(pending):
            done = [p for p in cores.glob(f"cuda.*.{pid}.*") if _settled(p)]
            if done:
                result[pid] = f"dumped to {done[0].name}"
                pending.discard(pid)
            elif not os.path.exists(f"/proc/{pid}"):
                result[pid] = "exited before its dump was written"
                pending.discard(pid)
        time.sleep(0.5)
    for pid in pending:
        result[pid] = f"no core within {wait_s:.0f} s"
    return result


def _settled(p: Path) -> bool:
    """The driver writes the file in one go; a size that holds still for half a second is done."""
    try:
        a = p.stat().st_size
        time.sleep(0.5)
        return a > 0 and p.stat().st_size == a
    except OSError:
        return False


# ---------------- hangs on ROCm: a brief look with rocgdb ----------------

ROCM_HANG_COMMANDS = ["info agents", "info queues", "info dispatches", "info threads", "thread apply all bt 8"]


def rocm_hang_snapshot(out: Path, pids: list[int], binary: str, deadline_s: float = 60.0, echo=print) -> dict[int, str]:
    """ROCr has no user-triggered dump: attach rocgdb to each GPU process for its agents, queues,
    dispatches and the waves' backtraces, then detach (the process goes on, to be stopped with the
    rest). Transcripts go to cores/hang-<pid>.<debugger>.txt and are parsed like any session."""
    from .gdb_driver import GdbDriver

    result: dict[int, str] = {}
    for pid in pids:
        path = out / layout.CORES_DIR / f"hang-{pid}.{os.path.basename(binary)}.txt"
        d = GdbDriver(binary, path, None, deadline_s)
        try:
            if not d.start([]):
                result[pid] = f"debugger did not start: {d.problem}"
                continue
            d.setup(multi_process=False)
            answer = d.command(f"attach {pid}", deadline=max(60.0, deadline_s))
            if answer is None or re.search(r"ptrace: |Could not attach|No such process", answer):
                result[pid] = f"attach failed: {(answer or d.problem or '').strip()[-200:]}"
                continue
            for cmd in ROCM_HANG_COMMANDS:
                if d.command(cmd) is None:
                    break
            d.command("detach")
            result[pid] = f"snapshot in {path.name}"
            echo(f"looked at pid {pid} with {os.path.basename(binary)} ({path.name})")
        finally:
            d.close(kill_inferiors=False)
    return result
