"""Run the target under rocprofv3 and say what it left behind.

rocprofv3 writes nothing readable until it finalizes, and finalizing after a GPU fault can hang
waiting for the faulted dispatch (reference/rocprofv3_outputs.md §9). So the capture stops it
with SIGINT and a long wait (finalization), then SIGTERM and SIGKILL, and records every output
file with whether it is complete; leftover `.dat` buffer files are kept as the residue they are.
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
from pathlib import Path

from .. import layout
from .backends import PlainBackend

STOP_DEADLINES = (30.0, 10.0, 5.0)     # SIGINT (finalize), SIGTERM, SIGKILL


def rocm_version(binary: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"(?:ROCm|rocm)[- ]?(?:version:?\s*)?(\d+)\.(\d+)", out.stdout + out.stderr)
    return (int(m.group(1)), int(m.group(2))) if m else None


def command_prefix(binary: str, out_dir: Path, version: tuple[int, int] | None,
                   extra: list[str] = ()) -> list[str]:
    """Tracing flags for the version: CSV up to 6.4, the rocpd database from 7.0; allocation
    tracing from 6.4; output names keyed by pid from 6.3 (6.2 names files by pid itself). `extra`
    (--rocprof-args) goes last, so a user's flag overrides faultkit's."""
    flags = ["--kernel-trace", "--memory-copy-trace", "--hip-trace"]
    v = version or (6, 3)
    if v >= (6, 4):
        flags.append("--memory-allocation-trace")
    flags += ["--output-format", "rocpd" if v >= (7, 0) else "csv", "-d", str(out_dir)]
    if v >= (6, 3):
        flags += ["-o", "%hostname%/%pid%"]
    return [binary, *flags, *extra, "--"]


def describe_outputs(root: Path) -> list[dict]:
    out = []
    for p in sorted(root.rglob("*")) if root.is_dir() else []:
        if not p.is_file():
            continue
        out.append({"file": str(p.relative_to(root.parent)), "bytes": p.stat().st_size, "state": _state(p)})
    return out


def _state(p: Path) -> str:
    if p.suffix == ".dat":
        return "buffer residue: finalization did not complete"
    if p.stat().st_size == 0:
        return "empty"
    if p.suffix == ".csv":
        with open(p, "rb") as fh:
            fh.seek(-1, 2)
            return "complete" if fh.read(1) == b"\n" else "cut mid-row"
    if p.suffix == ".json":
        try:
            json.loads(p.read_bytes())
            return "complete"
        except ValueError:
            return "cut (not valid JSON)"
    if p.suffix == ".db":
        try:
            con = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
            ok = con.execute("PRAGMA quick_check").fetchone()[0]
            con.close()
            return "complete" if ok == "ok" else f"damaged ({ok})"
        except sqlite3.Error as exc:
            return f"unreadable ({exc})"
    return "unknown"


class Rocprofv3Backend(PlainBackend):
    def __init__(self, binary: str, command: str, out: Path, env: dict[str, str], grace_s: float,
                 core_limit: int | None = None, extra: list[str] = (), cgroup_procs: str | None = None):
        self.version = rocm_version(binary)
        self.trace_dir = out / layout.ROCPROF_DIR
        self.prefix = command_prefix(binary, self.trace_dir, self.version, list(extra))
        super().__init__(command, out, env, grace_s, self.prefix, core_limit, cgroup_procs)

    def stop(self) -> dict:
        code = self.target.poll()
        sent = self.target.stop(STOP_DEADLINES)
        outputs = describe_outputs(self.trace_dir)
        return {"exit_code": code if code is not None else self.target.poll(), "stopped_with": sent,
                "rocprofv3": {"rocm_version": ".".join(map(str, self.version)) if self.version else None,
                              "command": self.prefix, "outputs": outputs,
                              "complete": bool(outputs) and all(o["state"] == "complete" for o in outputs),
                              "note": None if outputs else "rocprofv3 wrote nothing (finalization never ran "
                                                           "or hung: expected after a GPU fault with kernel tracing)"}}
