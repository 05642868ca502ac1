"""Gathering the inputs of a triage: files, folders, faultkit bundles and .tar.gz archives.

A bundle is a directory (or an archive of one) with a `manifest.json` written by `faultkit
capture`, or any folder of log files a user assembled by hand; either way every file is read and
its kind is detected from its content. Folders and archives go through the same classifier
(`layout.classify`), so a bundle and its tarball give the same evidence.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import stat
import tarfile
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Callable, Iterator

from . import layout
from .ingest.core_file import is_core_header
from .ingest.flight_recorder import looks_like_flight_record
from .model import Problem

MAX_FILE_BYTES = 4 << 30          # traces and cores (read by their own readers, as streams)
MAX_TEXT_BYTES = 256 << 20        # a log is read whole up to this; past it, its last part (where a crash is)
MAX_TOTAL_BYTES = 4 << 30         # evidence text in all
OWN_REPORT = b'"schema": "faultkit.triage/'


class InputFile:
    """One evidence file: its bytes, or how to read them when they are parsed (files in folders
    are read one at a time, so a triage never holds every log in memory at once)."""

    def __init__(self, name: str, data: bytes | None = None, load: Callable[[], bytes] | None = None):
        self.name = name          # path as shown in reports
        self._data, self._load = data, load

    @property
    def data(self) -> bytes:
        if self._data is not None:
            return self._data
        return self._load() if self._load is not None else b""


@dataclass
class Inputs:
    files: list[InputFile] = field(default_factory=list)
    manifest: dict | None = None
    problems: list[Problem] = field(default_factory=list)
    traces: list[str] = field(default_factory=list)          # tracer outputs (paths on disk)
    cores: list[str] = field(default_factory=list)           # core dumps found by name in a bundle's cores/
    environ: list[dict] = field(default_factory=list)        # capture's process records
    # Per log (its name as in `files`): (first line, CLOCK_BOOTTIME ns, wall ns) of each block of
    # lines capture read at one moment, sorted by line.
    stamps: dict[str, list[tuple[int, int, int]]] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)         # inputs named that do not exist or cannot be read
    agent: list[InputFile] = field(default_factory=list)     # the in-process agent's files (rings are binary)
    hang: list[InputFile] = field(default_factory=list)      # stack samples and flight records (layout.HANG)

    @property
    def captured(self) -> bool:
        return isinstance(self.manifest, dict) and str(self.manifest.get("schema", "")).startswith("faultkit.bundle")


@dataclass
class _Entry:
    rel: str                              # path inside the bundle
    name: str                             # as shown in reports
    size: int
    read: Callable[[], bytes]
    path: Callable[[], str | None]        # a path on disk (archives: extracted on demand)
    head: Callable[..., bytes]            # the first bytes (64, or n), without reading the rest
    tail: Callable[[int], bytes]          # the last n bytes
    lazy: bool = False                    # readable again later (a file on disk, not an archive member)


def collect(paths: list[str]) -> Inputs:
    out = Inputs()
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            out.problems.append(Problem(raw, "no such file or directory"))
            out.missing.append(raw)
        elif path.is_dir():
            _load(_dir_entries(path, out), out)
        elif raw.endswith((".tar.gz", ".tgz", ".tar")):
            try:
                with tarfile.open(path) as tar:
                    _load(_tar_entries(path, tar, out), out)
            except (tarfile.TarError, OSError, EOFError) as exc:
                out.problems.append(Problem(str(path), f"archive cut or unreadable ({exc}); members before the "
                                                       f"damage kept"))
        else:
            entry = _file_entry(path, str(path), path.name, out)
            if entry is not None:
                _load([entry], out, loose=True)
            else:
                out.missing.append(raw)
    return out


def _regular(path: Path, name: str, out: Inputs) -> os.stat_result | None:
    """Only regular files are read: a FIFO blocks forever and /dev/zero never ends."""
    try:
        st = path.stat()
    except OSError as exc:
        out.problems.append(Problem(name, f"unreadable ({exc.strerror or exc})"))
        return None
    if not stat.S_ISREG(st.st_mode):
        out.problems.append(Problem(name, "not a regular file (a pipe, device or socket): not read"))
        return None
    return st


def _file_entry(path: Path, name: str, rel: str, out: Inputs) -> _Entry | None:
    st = _regular(path, name, out)
    if st is None:
        return None
    return _Entry(rel, name, st.st_size, path.read_bytes, lambda: str(path), lambda n=64: _head(path, n),
                  lambda n: _tail(path, n), lazy=True)


def _tail(path: Path, n: int) -> bytes:
    with open(path, "rb") as fh:
        fh.seek(max(0, path.stat().st_size - n))
        return fh.read(n)


def _head(path: Path, n: int = 64) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(n)
    except OSError:
        return b""


def _dir_entries(root: Path, out: Inputs) -> Iterator[_Entry]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for fn in sorted(filenames):
            p = Path(dirpath) / fn
            entry = _file_entry(p, str(p), p.relative_to(root).as_posix(), out)
            if entry is not None:
                yield entry


_extracted: list[str] = []


def _tar_entries(path: Path, tar: tarfile.TarFile, out: Inputs) -> Iterator[_Entry]:
    members = [m for m in tar if m.isfile()]
    names = [m.name for m in members]
    # A tarball of a bundle folder holds `folder/manifest.json`: paths are relative to that folder.
    manifests = [n for n in names if PurePosixPath(n).name == layout.MANIFEST]
    prefix = str(PurePosixPath(min(manifests, key=len)).parent) if manifests else "."
    for m in members:
        pp = PurePosixPath(m.name)
        rel = str(pp.relative_to(prefix)) if prefix != "." and pp.is_relative_to(prefix) else m.name
        yield _Entry(rel, f"{path}:{m.name}", m.size, _member_reader(tar, m), _member_extractor(tar, m),
                     lambda n=64, m=m: _member_reader(tar, m, n)(), lambda n, m=m: _member_tail(tar, m, n))


def _member_reader(tar: tarfile.TarFile, m: tarfile.TarInfo, limit: int = MAX_FILE_BYTES) -> Callable[[], bytes]:
    def read() -> bytes:
        fh = tar.extractfile(m)
        return fh.read(limit) if fh is not None else b""
    return read


def _member_tail(tar: tarfile.TarFile, m: tarfile.TarInfo, n: int) -> bytes:
    """The last n bytes of a member, read as a stream (a compressed archive cannot seek back cheaply)
    and kept bounded: a gzip bomb costs time, not memory."""
    fh = tar.extractfile(m)
    if fh is None:
        return b""
    keep = b""
    while True:
        chunk = fh.read(16 << 20)
        if not chunk:
            return keep
        keep = (keep + chunk)[-n:]


def _member_extractor(tar: tarfile.TarFile, m: tarfile.TarInfo) -> Callable[[], str | None]:
    """Trace readers and debuggers take paths: copy the member out, under a private folder,
    with only the safe parts of its name (never `..` or an absolute path)."""
    def extract() -> str | None:
        if not _extracted:
            _extracted.append(tempfile.mkdtemp(prefix="faultkit-archive-"))
            atexit.register(shutil.rmtree, _extracted[0], True)
        parts = [p for p in PurePosixPath(m.name).parts if p not in ("", ".", "..", "/")]
        dest = Path(_extracted[0], str(len(os.listdir(_extracted[0]))), *parts)
        dest.parent.mkdir(parents=True, exist_ok=True)
        fh = tar.extractfile(m)
        if fh is None:
            return None
        with open(dest, "wb") as w:
            shutil.copyfileobj(fh, w)
        return str(dest)
    return extract


def _load(entries, out: Inputs, loose: bool = False) -> None:
    entries = list(entries)
    manifest = next((e for e in entries if layout.classify(e.rel, False) == layout.MANIFEST_ROLE), None)
    if manifest is not None:
        try:
            value = json.loads(manifest.read())
            if not isinstance(value, dict):
                raise ValueError(f"a JSON {type(value).__name__}, not an object")
            out.manifest = value
        except (OSError, ValueError) as exc:
            out.problems.append(Problem(manifest.name, f"unreadable manifest ({exc}); files are read without it"))
    captured = out.captured and manifest is not None
    by_rel: dict[str, _Entry] = {}
    total = 0
    for e in entries:
        role = layout.classify(e.rel, captured)
        if loose and role == layout.OUTPUT:
            role = layout.EVIDENCE       # a file named on the command line is read whatever its suffix
        if role in (layout.OUTPUT, layout.MANIFEST_ROLE, layout.FACTS):
            continue
        head = _peek(e) if role == layout.EVIDENCE else b""      # read once: for folders, each peek is I/O
        if role == layout.EVIDENCE and OWN_REPORT in head:
            continue                           # a report faultkit wrote: reading it back would count its faults twice
        if role == layout.EVIDENCE and is_core_header(head):
            role = layout.CORE                 # a core dump, whatever its name: read by its debugger
        if role == layout.EVIDENCE and looks_like_flight_record(head):
            role = layout.HANG                 # a flight-recorder dump given loose (nccl_trace_rank_3)
        if role != layout.CORE and (e.size > MAX_FILE_BYTES or total + min(e.size, MAX_TEXT_BYTES) > MAX_TOTAL_BYTES):
            out.problems.append(Problem(e.name, f"{e.size} bytes: over the {MAX_FILE_BYTES}-byte cap per file or "
                                                f"{MAX_TOTAL_BYTES} in all; skipped"))
            continue
        if role == layout.TRACE or (role == layout.EVIDENCE and e.rel.endswith(".json") and _is_torch_trace(e)):
            p = e.path()
            if p:
                out.traces.append(p)
            continue
        if role == layout.CORE:
            p = e.path()
            if p:
                out.cores.append(p)
            continue
        total += min(e.size, MAX_TEXT_BYTES)
        by_rel[e.rel] = e
        if role == layout.AGENT:
            out.agent.append(InputFile(e.name, load=_reader(e, out)) if e.lazy else InputFile(e.name, _read(e, out)))
        elif role == layout.EVIDENCE:
            out.files.append(InputFile(e.name, load=_reader(e, out)) if e.lazy else InputFile(e.name, _read(e, out)))
        elif role == layout.ENVIRONMENT:
            out.environ.extend(_environ(e, out))
        elif role == layout.HANG:
            out.hang.append(InputFile(e.name, load=_reader(e, out)) if e.lazy else InputFile(e.name, _read(e, out)))
    if captured:
        for rel, e in by_rel.items():
            if layout.classify(rel, True) == layout.STAMPS:
                log = by_rel.get(layout.log_for_times(rel))
                if log is not None:
                    out.stamps[log.name] = _stamps(e)
        snapshot = by_rel.get(layout.KERNEL_AFTER)
        if snapshot is not None:
            _new_kernel_lines(snapshot, by_rel.get(layout.KERNEL_FOLLOW), by_rel.get(layout.KERNEL_BEFORE), out)


def _read(e: _Entry, out: Inputs) -> bytes:
    try:
        if e.size > MAX_TEXT_BYTES:
            out.problems.append(Problem(e.name, f"{e.size:,} bytes: only its last {MAX_TEXT_BYTES:,} were read (a "
                                                f"crash is at the end of a log)"))
            return e.tail(MAX_TEXT_BYTES)
        return e.read()
    except (OSError, tarfile.TarError, EOFError, zlib.error) as exc:
        out.problems.append(Problem(e.name, f"unreadable ({getattr(exc, 'strerror', None) or exc})"))
        return b""


def _reader(e: _Entry, out: Inputs) -> Callable[[], bytes]:
    return lambda: _read(e, out)


def _peek(e: _Entry) -> bytes:
    try:
        return e.head()
    except (OSError, tarfile.TarError, EOFError):
        return b""


def _is_torch_trace(e: _Entry) -> bool:
    try:
        return b'"traceEvents"' in e.head(4096)
    except (OSError, tarfile.TarError, EOFError):
        return False


def _environ(e: _Entry, out: Inputs) -> list[dict]:
    try:
        procs = json.loads(e.read())
    except (OSError, ValueError, tarfile.TarError) as exc:
        out.problems.append(Problem(e.name, f"unreadable process record ({exc})"))
        return []
    if not isinstance(procs, list):
        out.problems.append(Problem(e.name, "process record is not a list: ignored"))
        return []
    return [p for p in procs if isinstance(p, dict)]


def _stamps(e: _Entry) -> list[tuple[int, int, int]]:
    """Rows are `first line<TAB>wall s<TAB>monotonic ns<TAB>boottime ns` (older bundles: a row per line)."""
    out = []
    try:
        data = e.read().decode("utf-8", "replace")
    except (OSError, tarfile.TarError, EOFError):
        return out
    for row in data.splitlines():
        parts = row.split("\t")
        try:
            out.append((int(parts[0]), int(parts[3]), int(float(parts[1]) * 1e9)))
        except (ValueError, IndexError):
            continue              # a row cut by a crash
    out.sort()
    return out


def _new_kernel_lines(after: _Entry, follow: _Entry | None, before: _Entry | None, out: Inputs) -> None:
    """Use the after-snapshot only where the follower caught nothing, and only its new lines."""
    if follow is not None and follow.size > 0:
        return
    old = set(_read(before, out).splitlines()) if before is not None else set()
    new = b"\n".join(line for line in _read(after, out).splitlines() if line not in old)
    out.files.append(InputFile(after.name + " (lines new since the capture began)", new))
