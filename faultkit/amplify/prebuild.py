"""The agent's C++ libraries (the allocation tracker, the poison library) built once before the first
trial, with the target's own interpreter, into the cache the trials' processes attach from.

Without it a cold cache (a fresh machine) is built by the trials themselves: in the background of the
first process that imports torch, killed with each trial's tree, so the first trials of the H200's run
had no allocation map ("waiting for the tracker's build") and the black box could name no block."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from ..agent import build as agent_build

BUILD_SCRIPT = Path(agent_build.__file__)
PYTHON = re.compile(r"python[0-9.]*$")


def target_python(command: str) -> str:
    """The interpreter the server runs under: its first word when that is a python, the `#!` line of a
    console script (torchrun, vllm, ...) when that names one, else faultkit's own."""
    try:
        argv = shlex.split(command or "")
    except ValueError:                    # an unbalanced quote: the shell will say so when the trial runs
        argv = []
    argv = [a for a in argv if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", a)]   # VAR=value words
    if argv and os.path.basename(argv[0]) == "env":
        argv = [a for a in argv[1:] if not a.startswith("-")]
    if not argv:
        return sys.executable
    first = shutil.which(argv[0]) or argv[0]
    if PYTHON.search(os.path.basename(first)):
        return first
    try:
        with open(first, "rb") as fh:
            line = fh.readline(300).decode(errors="replace")
    except OSError:
        return sys.executable
    if line.startswith("#!"):
        words = line[2:].split()
        words = words[1:] if words and os.path.basename(words[0]) == "env" else words
        if words and PYTHON.search(os.path.basename(words[0])):
            return shutil.which(words[0]) or words[0]
    return sys.executable


def prebuild(command: str, poison: bool, echo, warn, timeout_s: float = agent_build.COMPILER_TIMEOUT_S + 60) -> dict:
    """Runs faultkit/agent/build.py with the target's python; says what it did. Never fatal: without the
    libraries the trials run, without the black box (and the poison arm is not counted)."""
    py = target_python(command)
    cache = agent_build.cache_dir()
    what = "allocation tracker" + (" and poison library" if poison else "")
    echo(f"building the agent's {what} for {py} into {cache} (once, before the first trial) ...")
    try:
        p = subprocess.run([py, str(BUILD_SCRIPT), *(["--poison"] if poison else [])], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        warn(f"warning: the agent's {what} could not be built ahead ({exc}): the trials' processes build it "
             f"themselves, and trials that end before it is built have no black box")
        return {"python": py, "cache": cache, "ok": False, "output": str(exc)}
    lines = [ln for ln in p.stdout.splitlines() if ln.strip()]
    if p.returncode != 0 and any("ModuleNotFoundError" in ln and "torch" in ln for ln in lines):
        echo(f"  {py} has no torch: nothing to build (the agent's allocation map is for torch's allocator)")
        return {"python": py, "cache": cache, "ok": False, "output": "no torch"}
    if p.returncode == agent_build.NOTHING_TO_BUILD and lines:
        echo(f"  {py}: {lines[-1]}")
        return {"python": py, "cache": cache, "ok": False, "output": lines[-1]}
    for ln in lines[-4:] if p.returncode else lines:
        (echo if p.returncode == 0 else warn)(f"  {ln}")
    if p.returncode != 0:
        warn(f"warning: the agent's {what} was not built: the trials run without the black box's allocation map"
             + (" and the poison arm cannot be counted" if poison else ""))
    return {"python": py, "cache": cache, "ok": p.returncode == 0, "output": "\n".join(lines[-20:])}
