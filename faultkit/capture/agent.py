"""Capture's side of the in-process agent: the environment that places it into every Python process
of the target, the record of which processes ran it, and asking live ones for their stacks.

The agent itself is faultkit/agent/ (loaded by path inside the target); this module only wires it.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from ..agent import files

SITE_DIR = Path(__file__).resolve().parent.parent / "agent" / "site"


def agent_env(out: Path, alloc_history: bool, env: dict[str, str]) -> dict[str, str]:
    """The variables that switch the agent on for the target. `env`: what the target will get
    otherwise (the user's --env over faultkit's own environment): its PYTHONPATH is kept after the
    agent's folder."""
    path = env.get("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    return {"PYTHONPATH": os.pathsep.join([str(SITE_DIR)] + ([path] if path else [])),
            files.ENV_DIR: str((out / files.DIR).resolve()),
            files.ENV_MODE: "blocks" if alloc_history else "segments"}


def processes(out: Path) -> list[dict]:
    """Every process that ran the agent (each wrote its header file), for the manifest."""
    d = out / files.DIR
    rows = []
    try:
        names = sorted(os.listdir(d))
    except OSError:
        return rows
    for n in names:
        parsed = files.split(n)
        if parsed is None or parsed[1] != files.HEADER:
            continue
        try:
            h = json.loads((d / n).read_text())
        except (OSError, ValueError):
            rows.append({"pid": parsed[0], "header": n, "problem": "header file unreadable"})
            continue
        alloc = h.get("alloc") or {}
        rows.append({"pid": h.get("pid", parsed[0]), "armed": h.get("armed"),
                     "allocations": alloc.get("mechanism"), "note": alloc.get("note"),
                     "failures": h.get("failures") or [], "header": n})
    return rows


def ask_for_stacks(out: Path, alive: list[int], wait_s: float = 1.0) -> dict[str, str]:
    """SIGUSR2 to each live process whose agent registered it (and that still catches it: a target
    may have put its own handler there since), so faulthandler writes every thread's stack into its
    stacks file before the tree is stopped."""
    sig = getattr(signal, files.STACK_SIGNAL)
    asked: dict[str, str] = {}
    for row in processes(out):
        pid = row.get("pid")
        if not isinstance(pid, int) or pid not in alive or "stacks-on-" + files.STACK_SIGNAL not in (row.get("armed") or []):
            continue
        if not _catches(pid, sig):
            asked[str(pid)] = f"not asked: {files.STACK_SIGNAL} is no longer caught by the process"
            continue
        try:
            os.kill(pid, sig)
            asked[str(pid)] = f"asked at {time.time():.3f} (wall)"
        except OSError as exc:
            asked[str(pid)] = f"not asked: {exc.strerror or exc}"
    if asked:
        time.sleep(wait_s)
    return asked


def _catches(pid: int, sig: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False
