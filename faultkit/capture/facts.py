"""System facts for a bundle. Each is optional: a missing tool is recorded, never an error."""

from __future__ import annotations

import platform
import shutil
import subprocess
from pathlib import Path

from .. import layout
from ..private_files import write_private

TOOLS = [("rocminfo", ["rocminfo"]), ("rocm-smi", ["rocm-smi", "--showallinfo"]), ("amd-smi", ["amd-smi", "static"]),
         ("nvidia-smi", ["nvidia-smi", "-q"]), ("lspci", ["lspci", "-vv", "-d", "1002:"])]


def rocm_version_text() -> str | None:
    for version_file in ("/opt/rocm/.info/version", "/opt/rocm/.info/version-dev"):
        try:
            return Path(version_file).read_text().strip()
        except OSError:
            continue
    return None


def collect(out: Path) -> dict:
    facts: dict = {"host": platform.node(), "kernel": platform.release(), "machine": platform.machine(), "python": platform.python_version()}
    try:
        facts["kernel_cmdline"] = Path("/proc/cmdline").read_text().strip()
        facts["iommu"] = [w for w in facts["kernel_cmdline"].split() if "iommu" in w]
    except OSError:
        pass
    try:   # one boot id: one monotonic clock (the job triage aligns ranks of one machine by it)
        facts["boot_id"] = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        pass
    facts["rocm_version"] = rocm_version_text()
    tools = {}
    for name, cmd in TOOLS:
        if shutil.which(cmd[0]) is None:
            tools[name] = "not installed"
            continue
        try:
            res = subprocess.run(cmd, capture_output=True, timeout=30)
            write_private(out / layout.fact_file(name), res.stdout + res.stderr)
            tools[name] = f"{layout.fact_file(name)} (exit {res.returncode})"
        except (OSError, subprocess.TimeoutExpired) as exc:
            tools[name] = f"failed: {exc}"
    facts["tools"] = tools
    return facts
