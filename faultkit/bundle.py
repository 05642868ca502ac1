"""Gathering the inputs of a triage: files, folders, faultkit bundles and .tar.gz archives.

A bundle is a directory with a `manifest.json` written by `faultkit capture`, or any folder of
log files a user assembled by hand; either way every file is read and its kind is detected
from its content.
"""

from __future__ import annotations

import json
import os
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from .model import Problem

MAX_FILE_BYTES = 4 << 30
# Rendered reports are outputs, not evidence: reading one back would count its faults twice.
SKIP_SUFFIXES = {".pftrace", ".png", ".jpg", ".so", ".o", ".pyc", ".md", ".html"}


@dataclass
class InputFile:
    name: str      # path as shown in reports
    data: bytes


@dataclass
class Inputs:
    files: list[InputFile] = field(default_factory=list)
    manifest: dict | None = None
    problems: list[Problem] = field(default_factory=list)
    traces: list[str] = field(default_factory=list)   # rocprofv3 outputs of a capture bundle


def collect(paths: list[str]) -> Inputs:
    out = Inputs()
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            out.problems.append(Problem(raw, "no such file or directory"))
        elif path.is_dir():
            _collect_dir(path, out)
        elif raw.endswith((".tar.gz", ".tgz", ".tar")):
            _collect_tar(path, out)
        else:
            _read(path, str(path), out)
    return out


def _collect_dir(root: Path, out: Inputs) -> None:
    manifest = root / "manifest.json"
    if manifest.is_file():
        try:
            out.manifest = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            out.problems.append(Problem(str(manifest), f"unreadable manifest ({exc}); files are read without it"))
    captured = out.manifest is not None and out.manifest.get("schema", "").startswith("faultkit.bundle")
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for fn in sorted(filenames):
            p = Path(dirpath) / fn
            if p == manifest or p.suffix in SKIP_SUFFIXES or fn.startswith("."):
                continue
            if captured and Path(dirpath) == root and (fn in CAPTURE_NOT_EVIDENCE or fn.endswith(".times.tsv")):
                continue
            if captured and (root / "rocprofv3") in (Path(dirpath), *Path(dirpath).parents):
                out.traces.append(str(p))      # tracer output: tables, not log text
                continue
            if captured and Path(dirpath) == root and fn == "kernel-after.log":
                _new_kernel_lines(root, out)
                continue
            _read(p, str(p), out)


# Written by capture but not evidence of this run: the boot's earlier kernel log (old faults
# would be taken for new ones), process records, tool inventories.
CAPTURE_NOT_EVIDENCE = {"kernel-before.log", "environ.json", "manifest.json.tmp", "rocminfo.txt", "rocm-smi.txt",
                        "amd-smi.txt", "nvidia-smi.txt", "lspci.txt"}


def _new_kernel_lines(root: Path, out: Inputs) -> None:
    """Use the after-snapshot only where the follower caught nothing, and only its new lines."""
    follow = root / "kernel.log"
    if follow.is_file() and follow.stat().st_size > 0:
        return
    try:
        before = set((root / "kernel-before.log").read_bytes().splitlines())
    except OSError:
        before = set()
    try:
        after = (root / "kernel-after.log").read_bytes().splitlines()
    except OSError as exc:
        out.problems.append(Problem(str(root / "kernel-after.log"), f"unreadable ({exc})"))
        return
    new = b"\n".join(line for line in after if line not in before)
    out.files.append(InputFile(str(root / "kernel-after.log") + " (lines new since the capture began)", new))


def _collect_tar(path: Path, out: Inputs) -> None:
    try:
        with tarfile.open(path) as tar:
            for member in tar:
                if not member.isfile() or Path(member.name).suffix in SKIP_SUFFIXES:
                    continue
                fh = tar.extractfile(member)
                if fh is None:
                    continue
                data = fh.read()
                if Path(member.name).name == "manifest.json":
                    try:
                        out.manifest = json.loads(data)
                    except ValueError as exc:
                        out.problems.append(Problem(f"{path}:{member.name}", f"unreadable manifest ({exc})"))
                    continue
                out.files.append(InputFile(f"{path}:{member.name}", data))
    except (tarfile.TarError, OSError, EOFError) as exc:
        out.problems.append(Problem(str(path), f"archive cut or unreadable ({exc}); members before the damage kept"))


TRACE_SUFFIXES = {".csv", ".db", ".dat"}


def is_trace_file(path: Path) -> bool:
    """Tracer outputs are tables, read by the trace ingest, never by the log parsers."""
    if path.suffix in TRACE_SUFFIXES or path.name.endswith("_results.json"):
        return True
    if path.suffix == ".json":
        try:
            with open(path, "rb") as fh:
                return b'"traceEvents"' in fh.read(4096)
        except OSError:
            return False
    return False


def _read(path: Path, name: str, out: Inputs) -> None:
    if is_trace_file(path):
        out.traces.append(name)
        return
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            out.problems.append(Problem(name, f"{size} bytes: larger than {MAX_FILE_BYTES} bytes, skipped"))
            return
        out.files.append(InputFile(name, path.read_bytes()))
    except OSError as exc:
        out.problems.append(Problem(name, f"unreadable ({exc.strerror or exc})"))
