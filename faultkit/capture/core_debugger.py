"""Open a GPU core dump in its debugger, in batch, with a fixed list of commands.

CUDA cores open in cuda-gdb alone (`target cudacore`, no executable, no GPU needed). A ROCr
GPU core holds no host state: rocgdb needs it merged with the host core first (`roccoremerge
OUT HOSTCORE GPUCORE`), then opens the unified core with the executable (the interpreter, for
Python). The transcript is parsed by the same parser as any debugger session.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..ingest.core_file import CUDA, ROCM_GPU, ROCM_UNIFIED, CoreFile

CUDA_COMMANDS = ["set pagination off", "set width 0", "target cudacore {core}", "info cuda kernels",
                 "info cuda devices", "bt", "x/12i $errorpc-64", "x/4i $pc", "info registers"]
ROCM_COMMANDS = ["set pagination off", "set width 0", "info agents", "info queues", "info dispatches", "info threads",
                 "bt", "x/12i $pc-32", "info sharedlibrary"]
DEFAULT_DEBUGGER = {CUDA: "cuda-gdb", ROCM_GPU: "rocgdb", ROCM_UNIFIED: "rocgdb"}
TIMEOUT_S = 300.0


@dataclass
class CoreOpening:
    core: str
    command: list[str]                     # what ran (or would run)
    transcript: str | None = None          # what the debugger printed, the command line first
    transcript_path: str | None = None     # where it was saved, when saved
    analysed_with: str | None = None       # the debugger binary
    merged: str | None = None              # the unified core roccoremerge wrote
    seconds: float | None = None
    problems: list[str] = field(default_factory=list)


def debugger_for(core: CoreFile, given: str | None = None) -> str | None:
    """The debugger binary for this core: the one given if it fits the platform, else from PATH."""
    want = DEFAULT_DEBUGGER.get(core.platform)
    if want is None:
        return None
    if given:
        name = os.path.basename(given)
        fits = "cuda" in name if core.platform == CUDA else "cuda" not in name
        if fits:
            return given if os.path.sep in given or shutil.which(given) else None
    return shutil.which(want)


def batch_command(core: CoreFile, debugger: str, exe: str | None = None, unified: str | None = None) -> list[str]:
    if core.platform == CUDA:
        cmds = [c.format(core=core.path) for c in CUDA_COMMANDS]
        return [debugger, "-batch", "-nx", *[a for c in cmds for a in ("-ex", c)]]
    target = unified or core.path
    head = [debugger, "-batch", "-nx"] + ([exe] if exe else []) + ["-core", target]
    return head + [a for c in ROCM_COMMANDS for a in ("-ex", c)]


def how_to_open(core: CoreFile, exe: str | None = None, host_core: str | None = None) -> str:
    """The exact command a user can run elsewhere (cores open on any machine with the same debugger)."""
    if core.platform == CUDA:
        return shlex.join(batch_command(core, "cuda-gdb")) + "   # any machine with cuda-gdb; no GPU needed"
    if core.platform == ROCM_GPU:
        host = host_core or "HOSTCORE"
        merged = core.path + ".merged"
        return (f"roccoremerge {shlex.quote(merged)} {shlex.quote(host)} {shlex.quote(core.path)} && "
                + shlex.join(batch_command(CoreFile(merged, ROCM_UNIFIED, 0), "rocgdb", exe or "EXE"))
                + "   # HOSTCORE: the kernel's core of the same pid; EXE: the program (python3 for Python)")
    return shlex.join(batch_command(core, "rocgdb", exe or "EXE"))


def open_core(core: CoreFile, debugger: str, exe: str | None = None, host_core: str | None = None,
              save_dir: Path | None = None, timeout_s: float = TIMEOUT_S) -> CoreOpening:
    """Run the debugger on the core and keep what it printed (saved beside the core in a bundle)."""
    unified = None
    problems: list[str] = []
    if core.platform == ROCM_GPU:
        unified, why = _merge(core, host_core, debugger, save_dir)
        if unified is None:
            return CoreOpening(core.path, [], problems=[why], analysed_with=None)
    cmd = batch_command(core, debugger, exe, unified)
    t0 = time.monotonic()
    try:
        res = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             timeout=timeout_s, start_new_session=True)
        out = res.stdout.decode("utf-8", "replace")
        if res.returncode != 0:
            problems.append(f"{os.path.basename(debugger)} exited with {res.returncode}")
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode("utf-8", "replace")
        problems.append(f"{os.path.basename(debugger)} did not finish within {timeout_s:.0f} s; killed")
    except OSError as exc:
        return CoreOpening(core.path, cmd, problems=[f"could not run {debugger}: {exc.strerror or exc}"])
    text = "$ " + shlex.join(cmd) + "\n" + out
    opening = CoreOpening(core.path, cmd, text, None, debugger, unified, round(time.monotonic() - t0, 2), problems)
    if save_dir is not None:
        path = save_dir / f"{Path(core.path).name}.{os.path.basename(debugger)}.txt"
        try:
            path.write_text(text, encoding="utf-8")
            opening.transcript_path = str(path)
        except OSError as exc:
            problems.append(f"transcript not saved ({exc.strerror or exc})")
    return opening


def _merge(core: CoreFile, host_core: str | None, debugger: str, save_dir: Path | None) -> tuple[str | None, str]:
    tool = shutil.which("roccoremerge") or str(Path(debugger).with_name("roccoremerge"))
    if not os.access(tool, os.X_OK):
        return None, "roccoremerge not found: a ROCr GPU core opens in rocgdb only once merged with the host core"
    if not host_core:
        return None, ("no host core of the same process was found (core_pattern, coredumpctl): the GPU core alone "
                      "shows agents but no queues, dispatches or waves")
    where = save_dir or Path(tempfile.mkdtemp(prefix="faultkit-core-"))
    merged = where / f"{Path(core.path).name}.merged"
    try:
        res = subprocess.run([tool, str(merged), host_core, core.path], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"roccoremerge failed ({exc})"
    if res.returncode != 0 or not merged.is_file():
        return None, f"roccoremerge failed (exit {res.returncode}): {res.stdout.decode('utf-8', 'replace')[-300:]}"
    return str(merged), ""
