"""Gathering the inputs of a triage: files, folders, faultkit bundles, archives, compressed files,
pipes and standard input.

A bundle is a directory (or an archive of one) with a `manifest.json` written by `faultkit
capture`, or any folder of log files a user assembled by hand; either way every file is read and
its kind is detected from its content. Folders and archives go through the same classifier
(`layout.classify`), so a bundle and its tarball give the same evidence.

Every byte goes through one budget (`limits.Budget`): files and members are read as streams, in
chunks, never whole into a buffer sized by the input; archive members are read once, in archive
order, and only what a reader needs as a path (a core, a trace) is copied out, capped by free disk,
into a private folder that is deleted on any exit (SIGTERM included). Files that block or never
end (procfs, sysfs, devices) are refused by what they are; a pipe or FIFO is read as a stream;
links in a folder are followed only to files inside it.
"""

from __future__ import annotations

import atexit
import bz2
import json
import lzma
import os
import shutil
import signal
import stat
import sys
import tarfile
import tempfile
import threading
import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import BinaryIO, Callable, Iterator

from . import layout, limits
from .ingest.core_file import EM_AMDGPU, EM_CUDA, is_core_header
from .ingest.flight_recorder import looks_like_flight_record
from .ingest.logtext import LogRead, read_log
from .ingest.schema import check_manifest, load_json, records
from .manifest import Clocks, Manifest
from .model import Problem

OWN_REPORT = '"schema": "faultkit.triage/'
MAX_DEPTH = 64                    # folders nested deeper are not walked (a loop of bind mounts, a prank)
HEAD = 64 << 10                   # bytes peeked to tell what a member is
# Filesystems whose files are kernel interfaces: /proc/kmsg blocks, /sys files never end or change
# under the reader. Refused whatever their mode says.
KERNEL_FS = frozenset({"proc", "sysfs", "debugfs", "tracefs", "securityfs", "configfs", "cgroup", "cgroup2",
                       "pstore", "bpf", "efivarfs", "fusectl", "binfmt_misc", "autofs", "mqueue", "hugetlbfs"})
STDIN = "-"
STDIN_NAME = "<stdin>"


class InputFile:
    """One evidence file: what the parsers read (a log's text or a code object's bytes), or how to
    read it when it is parsed (files on disk are read one at a time, so a triage never holds every
    log in memory at once)."""

    def __init__(self, name: str, data: bytes | None = None, load: Callable[[], LogRead] | None = None,
                 read: LogRead | None = None):
        self.name = name          # path as shown in reports
        self._data, self._load, self._read = data, load, read

    def log(self) -> LogRead:
        if self._read is not None:
            return self._read
        if self._data is not None:
            return read_log(_Bytes(self._data), self.name)
        return self._load() if self._load is not None else LogRead()

    @property
    def data(self) -> bytes:
        """The bytes (a log's text encoded again where it was read as text)."""
        if self._data is not None:
            return self._data
        got = self.log()
        return got.binary if got.binary is not None else got.text.encode()


@dataclass
class Inputs:
    files: list[InputFile] = field(default_factory=list)
    manifest: Manifest | None = None
    problems: list[Problem] = field(default_factory=list)
    traces: list[str] = field(default_factory=list)          # tracer outputs (paths on disk)
    cores: list[str] = field(default_factory=list)           # core dumps found by name in a bundle's cores/
    environ: list[dict] = field(default_factory=list)        # capture's process records
    # Per log (its name as in `files`): (first line, CLOCK_BOOTTIME ns, wall ns) of each block of
    # lines capture read at one moment, sorted by line.
    stamps: dict[str, list[tuple[int, int, int]]] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)         # inputs named that do not exist or cannot be read
    # A trial folder of faultkit trials / amplify (its result.json), and the clocks it took at its start:
    # what a capture's manifest.start is to a bundle (its lines' arrival stamps time the fault)
    trial: bool = False
    anchors: Clocks | None = None
    agent: list[InputFile] = field(default_factory=list)     # the in-process agent's files (rings are binary)
    hang: list[InputFile] = field(default_factory=list)      # stack samples and flight records (layout.HANG)
    shown: dict[str, str] = field(default_factory=dict)      # a copy out of an archive -> its name in the archive
    archived: tuple[int, int] = (0, 0)                       # archives' regular members: (count, bytes)
    budget: limits.Budget = field(default_factory=limits.Budget)

    @property
    def captured(self) -> bool:
        return self.manifest is not None and (self.manifest.schema or "").startswith("faultkit.bundle")

    def __enter__(self) -> Inputs:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Delete what was copied out of archives."""
        for p in list(self.shown):
            _forget(p)

    def named(self, obj):
        """`obj` (an incident) with every path of a copy out of an archive replaced by its name in the
        archive: reports never show a temporary folder that is gone by the time they are read."""
        return _rename(obj, self.shown) if self.shown else obj


class _Bytes:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def read(self, n: int = -1) -> bytes:
        end = len(self.data) if n is None or n < 0 else self.pos + n
        out = self.data[self.pos:end]
        self.pos += len(out)
        return out


@dataclass
class _Entry:
    rel: str                              # path inside the bundle
    name: str                             # as shown in reports
    size: int | None
    open: Callable[[], BinaryIO] | None = None   # a fresh stream of its bytes (files on disk)
    read: LogRead | None = None           # read already (archive members, streams)
    path: str | None = None               # on disk (a file, or a copy out of an archive)
    head: bytes = b""

    @property
    def lazy(self) -> bool:
        return self.open is not None


# ---------------- what a path is ----------------

def collect(paths: list[str], budget: limits.Budget | None = None) -> Inputs:
    out = Inputs(budget=budget or limits.Budget())
    for raw in paths:
        got = len(out.files) + len(out.traces) + len(out.cores) + len(out.environ)
        problems = len(out.problems)
        try:
            _collect_one(raw, out)
        except RecursionError:
            out.problems.append(Problem(raw, "nested too deeply to read"))
            out.missing.append(raw)
        if raw not in out.missing and len(out.files) + len(out.traces) + len(out.cores) + len(out.environ) == got \
                and out.manifest is None and len(out.problems) > problems and _is_container(raw):
            out.missing.append(raw)       # an archive or folder of which nothing could be read
    return out


def _is_container(raw: str) -> bool:
    return raw != STDIN and (os.path.isdir(raw) or _archive_name(raw))


def _archive_name(raw: str) -> bool:
    return raw.endswith((".tar", ".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar.bz2", ".tbz2", ".tar.zst", ".tzst"))


def _collect_one(raw: str, out: Inputs) -> None:
    if raw == STDIN:
        _load_stream(sys.stdin.buffer, STDIN_NAME, out)
        return
    path = Path(raw)
    try:
        st = path.stat()
    except FileNotFoundError:
        out.problems.append(Problem(raw, "no such file or directory"))
        out.missing.append(raw)
        return
    except OSError as exc:
        out.problems.append(Problem(raw, f"unreadable ({exc.strerror or exc})"))
        out.missing.append(raw)
        return
    refused = _refused(path, st)
    if refused:
        out.problems.append(Problem(raw, refused))
        out.missing.append(raw)
        return
    if stat.S_ISDIR(st.st_mode):
        entries = list(_dir_entries(path, out))
        if not entries and not any(p.file.startswith(raw) for p in out.problems):
            out.problems.append(Problem(raw, "an empty folder: nothing to read"))
        inside = _one_bundle_inside(entries)
        if inside is not None:         # the bundle read as a bundle, the rest (notes, reports) for what it is
            _load(inside[0], out)
            _load(inside[1], out)
            return
        _load(entries, out)
        return
    if stat.S_ISFIFO(st.st_mode):
        try:
            with open(path, "rb") as fh:
                _load_stream(fh, raw, out)
        except OSError as exc:
            out.problems.append(Problem(raw, f"unreadable ({exc.strerror or exc})"))
            out.missing.append(raw)
        return
    try:
        with open(path, "rb") as fh:
            kind = _compression(fh.read(6))
    except OSError as exc:
        out.problems.append(Problem(raw, f"unreadable ({exc.strerror or exc})"))
        out.missing.append(raw)
        return
    if kind is not None or _archive_name(raw):
        with open(path, "rb") as fh:
            _load_stream(fh, raw, out, sized=st.st_size)
        return
    entry = _file_entry(path, raw, path.name, st)
    _load([entry], out, loose=True)


def _refused(path: Path, st: os.stat_result) -> str | None:
    """Why a path is not read, by what it is (not by S_ISREG alone: /proc/kmsg is 'regular')."""
    mode = st.st_mode
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device (it never ends or blocks): not read; for the kernel log use `dmesg | faultkit triage -`"
    if stat.S_ISSOCK(mode):
        return "a socket: not read"
    fs = _filesystem(path)
    if fs in KERNEL_FS:
        return (f"a kernel interface file ({fs}): it blocks or never ends, not read; for the kernel log use "
                f"`dmesg | faultkit triage -`")
    return None


def _filesystem(path: Path) -> str | None:
    """The type of the filesystem holding `path`, from the mount table."""
    try:
        real = os.path.realpath(path)
        best, kind = "", None
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                left, _, right = line.partition(" - ")
                parts = left.split()
                if len(parts) < 5 or not right:
                    continue
                mnt = parts[4].replace("\\040", " ")
                if (real == mnt or real.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
                    best, kind = mnt, right.split()[0]
        return kind
    except OSError:
        real = os.path.realpath(path)
        return "proc" if real.startswith("/proc/") else "sysfs" if real.startswith("/sys/") else None


def _file_entry(path: Path, name: str, rel: str, st: os.stat_result) -> _Entry:
    return _Entry(rel, name, st.st_size, open=lambda: open(path, "rb"), path=str(path))


def _one_bundle_inside(entries: list[_Entry]) -> tuple[list[_Entry], list[_Entry]] | None:
    """A folder that is no bundle but holds one (a user's incident folder: `bundle/` beside the
    report they wrote of it): the bundle's entries, named from its own root, and the others. Read
    as one pile, its history (kernel-before.log) was taken for evidence: a bundle's faults counted
    again, and its machine's earlier faults as incidents of their own."""
    rels = {e.rel for e in entries}
    if layout.MANIFEST in rels:
        return None
    roots = sorted({r[: -len(layout.MANIFEST) - 1] for r in rels if r.endswith("/" + layout.MANIFEST)},
                   key=lambda r: r.count("/"))
    if not roots or any(r != roots[0] and not r.startswith(roots[0] + "/") for r in roots):
        return None                    # none, or several side by side (a job's: `triage run/*` reads them)
    root = roots[0] + "/"
    inner = [replace(e, rel=e.rel[len(root):]) for e in entries if e.rel.startswith(root)]
    if not layout.written_by_capture(e.rel for e in inner):
        return None                    # a manifest.json of something else
    return inner, [e for e in entries if not e.rel.startswith(root)]


def _dir_entries(root: Path, out: Inputs) -> Iterator[_Entry]:
    """Every file under `root`, walked without recursion, sorted; links only to files inside it."""
    real_root = os.path.realpath(root)
    stack = [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as it:
                items = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            out.problems.append(Problem(str(folder), f"folder unreadable ({exc.strerror or exc})"))
            continue
        subdirs = []
        for item in items:
            p = Path(item.path)
            try:
                if item.is_dir(follow_symlinks=False):
                    if depth + 1 >= MAX_DEPTH:
                        out.problems.append(Problem(str(p), f"folders nested more than {MAX_DEPTH} deep: not walked"))
                    else:
                        subdirs.append((p, depth + 1))
                    continue
                if item.is_symlink():
                    target = os.path.realpath(p)
                    if not (target == real_root or target.startswith(real_root.rstrip("/") + "/")):
                        out.problems.append(Problem(str(p), "a link out of the folder: not followed"))
                        continue
                st = p.stat()
            except OSError as exc:
                out.problems.append(Problem(str(p), f"unreadable ({exc.strerror or exc})"))
                continue
            if stat.S_ISDIR(st.st_mode):
                continue                  # a link to a folder inside: its files are walked there
            if not stat.S_ISREG(st.st_mode) or _refused(p, st):
                out.problems.append(Problem(str(p), "not a regular file (a pipe, device or socket): not read"))
                continue
            yield _file_entry(p, str(p), p.relative_to(root).as_posix(), st)
        stack.extend(reversed(subdirs))


# ---------------- streams: compressed files, archives, pipes ----------------

def _compression(head: bytes) -> str | None:
    if head[:2] == b"\x1f\x8b":
        return "gzip"
    if head[:6] == b"\xfd7zXZ\x00":
        return "xz"
    if head[:4] == b"\x28\xb5\x2f\xfd":
        return "zstd"
    if head[:3] == b"BZh":
        return "bzip2"
    return None


class _Peeked:
    """A stream whose first bytes were looked at."""

    def __init__(self, raw, n: int):
        self.raw, self.head = raw, b""
        while len(self.head) < n:
            chunk = raw.read(n - len(self.head))
            if not chunk:
                break
            self.head += chunk
        self._left = self.head

    def read(self, n: int = -1) -> bytes:
        if self._left:
            if n is None or n < 0 or n >= len(self._left):
                out, self._left = self._left, b""
            else:
                out, self._left = self._left[:n], self._left[n:]
            return out
        return self.raw.read(n if n is not None and n >= 0 else limits.CHUNK)


def _decompressed(raw: BinaryIO, kind: str | None) -> BinaryIO:
    if kind == "gzip":
        import gzip
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if kind == "xz":
        return lzma.LZMAFile(raw)
    if kind == "bzip2":
        return bz2.BZ2File(raw)
    if kind == "zstd":
        return _Zstd(raw)
    return raw


class _Zstd:
    """A zstd stream, frame after frame, that knows when it was cut: zstandard's stream reader ends a
    cut frame as if it were whole (gzip and lzma raise EOFError there)."""

    def __init__(self, raw):
        import zstandard
        self._new = zstandard.ZstdDecompressor().decompressobj
        self.raw, self._obj, self._buf, self.cut, self._started = raw, self._new(), b"", False, False

    def read(self, n: int = -1) -> bytes:
        want = n if n is not None and n >= 0 else limits.CHUNK
        while len(self._buf) < want:
            chunk = self.raw.read(limits.CHUNK)
            if not chunk:
                self.cut = self._started and not self._obj.eof
                break
            while chunk:
                if self._obj.eof:                 # the next frame
                    self._obj = self._new()
                self._started = True
                self._buf += self._obj.decompress(chunk)
                chunk = self._obj.unused_data if self._obj.eof else b""
        out, self._buf = self._buf[:want], self._buf[want:]
        return out


class _CutAware:
    """A decompressed stream read up to where it breaks: what came before the damage is kept, and
    `cut` says that it ends early."""

    def __init__(self, stream, inner):
        self.stream, self.inner, self.cut, self.why = stream, inner, False, ""

    def read(self, n: int = -1) -> bytes:
        if self.cut:
            return b""
        try:
            data = self.stream.read(n)
        except (OSError, EOFError, zlib.error, lzma.LZMAError) as exc:
            self.cut, self.why = True, str(exc)
            return b""
        except Exception as exc:  # noqa: BLE001 - zstandard.ZstdError
            self.cut, self.why = True, f"{type(exc).__name__}: {exc}"
            return b""
        if not data and getattr(self.inner, "cut", False):
            self.cut, self.why = True, "the stream ends inside a frame"
        return data


def _is_tar(head: bytes) -> bool:
    if len(head) >= 265 and head[257:262] == b"ustar":
        return True
    if len(head) >= 512:                  # a v7 tar has no magic: its header checksum tells
        try:
            return tarfile.calc_chksums(head[:512])[0] == int(head[148:156].split(b"\0")[0].strip() or b"-1", 8)
        except ValueError:
            return False
    return False


def _load_stream(raw: BinaryIO, name: str, out: Inputs, sized: int | None = None) -> None:
    """A compressed file, an archive (compressed or not), a pipe or standard input."""
    try:
        outer = _Peeked(raw, 6)
        kind = _compression(outer.head)
        inner = _Peeked(_decompressed(outer, kind), 512)
    except (OSError, EOFError, zlib.error, lzma.LZMAError, ValueError) as exc:
        out.problems.append(Problem(name, f"unreadable ({exc})"))
        out.missing.append(name)
        return
    except Exception as exc:  # noqa: BLE001 - zstandard.ZstdError and the like
        out.problems.append(Problem(name, f"unreadable ({type(exc).__name__}: {exc})"))
        out.missing.append(name)
        return
    if _is_tar(inner.head):
        _load_tar(inner, name, out)
        return
    if _archive_name(name):
        out.problems.append(Problem(name, "archive cut or unreadable (not a tar archive); nothing read"))
        out.missing.append(name)
        return
    what = f"{kind}-compressed " if kind else ""
    if is_core_header(inner.head):
        # one compressed core (systemd-coredump stores them `.zst`): copied out decompressed, within
        # the bounds, and read by path like the uncompressed core
        src = _CutAware(inner, inner.raw)
        try:
            path = _spill(src, _shown_name(name), 0, out)
        except OSError as exc:        # the copy could not be written
            out.problems.append(Problem(name, f"{what}core not copied out ({exc.strerror or exc}); not read"))
            out.missing.append(name)
            return
        if path is None:
            out.missing.append(name)
            return
        out.shown[path] = name
        size = os.path.getsize(path)
        if src.cut:                   # what came before the damage is read; the input counts as unusable
            out.problems.append(Problem(name, f"{what}core cut ({src.why}): {size:,} bytes decompressed, read "
                                              f"as far as they go"))
            out.missing.append(name)
        _load([_Entry(Path(path).name, name, size, open=lambda: open(path, "rb"), path=path, head=inner.head)], out,
              loose=True)
        return
    try:
        got = read_log(inner, name, out.budget)
    except (OSError, EOFError, zlib.error, lzma.LZMAError) as exc:
        out.problems.append(Problem(name, f"{what}stream unreadable ({exc}); nothing read"))
        out.missing.append(name)
        return
    except Exception as exc:  # noqa: BLE001 - zstandard.ZstdError
        out.problems.append(Problem(name, f"{what}stream unreadable ({type(exc).__name__}: {exc}); nothing read"))
        out.missing.append(name)
        return
    _load([_Entry(Path(name).name, name, got.size, read=got)], out, loose=True)


def _shown_name(name: str) -> str:
    """A compressed file's name without its compression suffix (`core.x.zst` -> `core.x`)."""
    for suffix in (".zst", ".xz", ".gz", ".bz2", ".lz4"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _load_tar(stream, name: str, out: Inputs) -> None:
    """Members in archive order, each read once as a stream: a log is read now (the prefilter keeps
    a big one small), a core or trace copied out with a cap. One bad member never costs the others."""
    entries: list[_Entry] = []
    try:
        tar = tarfile.open(fileobj=stream, mode="r|")
    except (tarfile.TarError, OSError, EOFError, zlib.error, lzma.LZMAError) as exc:
        out.problems.append(Problem(name, f"archive cut or unreadable ({exc}); nothing read"))
        out.missing.append(name)
        return
    try:
        while True:
            try:
                m = tar.next()
            except (tarfile.TarError, OSError, EOFError, zlib.error, lzma.LZMAError, ValueError) as exc:
                out.problems.append(Problem(name, f"archive cut or unreadable ({exc}); members before the damage "
                                                  f"kept"))
                out.missing.append(name)       # exit 1 with the reason on stderr; the report has the members read
                break
            except Exception as exc:  # noqa: BLE001 - zstandard.ZstdError
                out.problems.append(Problem(name, f"archive cut or unreadable ({type(exc).__name__}: {exc}); "
                                                  f"members before the damage kept"))
                out.missing.append(name)
                break
            if m is None:
                break
            if not m.isfile():
                continue
            out.archived = (out.archived[0] + 1, out.archived[1] + m.size)
            shown = f"{name}:{m.name}"
            try:
                entry = _member(tar, m, shown, out)
            except (OSError, tarfile.TarError, EOFError, zlib.error, lzma.LZMAError) as exc:
                out.problems.append(Problem(shown, f"member unreadable ({getattr(exc, 'strerror', None) or exc}); "
                                                   f"the other members are read"))
                continue
            if entry is not None:
                entries.append(entry)
    finally:
        tar.close()
    # A tarball of a bundle folder holds `folder/manifest.json`: paths are relative to that folder.
    manifests = [e.rel for e in entries if PurePosixPath(e.rel).name == layout.MANIFEST]
    prefix = PurePosixPath(min(manifests, key=len)).parent if manifests else PurePosixPath(".")
    if str(prefix) != ".":
        for e in entries:
            pp = PurePosixPath(e.rel)
            if pp.is_relative_to(prefix):
                e.rel = str(pp.relative_to(prefix))
    _load(entries, out)


def _member(tar: tarfile.TarFile, m: tarfile.TarInfo, shown: str, out: Inputs) -> _Entry | None:
    rel = m.name
    # the bundle's root may be the archive's first folder: its roles are not known yet, so both
    # readings of the path count (a core under `incident/cores/` is copied out like one under `cores/`)
    parts = PurePosixPath(rel).parts
    names = {rel} | ({"/".join(parts[1:])} if len(parts) > 1 else set())
    roles = {layout.classify(n, c) for n in names for c in (False, True)}
    if roles == {layout.OUTPUT}:
        return None
    fh = tar.extractfile(m)
    if fh is None:
        return None
    src = _Peeked(fh, HEAD)
    head = src.head
    spill = (bool(roles & {layout.TRACE, layout.CORE}) or is_core_header(head)
             or (rel.endswith(".json") and b'"traceEvents"' in head))
    if spill and is_core_header(head) and (missing := _no_debugger_for(head)):
        # a GPU core is read only by its debugger: gigabytes copied to disk for nothing where none is here
        out.problems.append(Problem(shown, f"a {missing[0]} core of {m.size:,} bytes in the archive, not copied out: "
                                           f"no {missing[1]} here to open it; extract it on a machine that has one"))
        return None
    if spill:
        path = _spill(src, shown, m.size, out)
        # a copy is a file like any other: read as a log too where the bundle's layout says so
        return _Entry(rel, shown, m.size, open=lambda: open(path, "rb"), path=path, head=head) if path else None
    # held until parsed: once the members held reach the bound, the next are kept as excerpts
    whole = limits.WHOLE if out.budget.held < out.budget.hold else 0
    got = read_log(src, shown, out.budget, out.budget.for_member(), whole)
    out.budget.held += len(got.text) + len(got.binary or b"")
    return _Entry(rel, shown, m.size, read=got, head=head)


# ---------------- copies out of archives ----------------

def _no_debugger_for(head: bytes) -> tuple[str, str] | None:
    """(platform, debugger) of a GPU core whose debugger is not on PATH; None for a host core (gdb's)."""
    import struct
    machine = struct.unpack_from("<H", head, 18)[0] if len(head) >= 20 else None
    want = {EM_CUDA: ("CUDA", "cuda-gdb"), EM_AMDGPU: ("AMDGPU", "rocgdb")}.get(machine)
    return want if want and shutil.which(want[1]) is None else None


_spill_root: list[str] = []
_spill_lock = threading.Lock()


def _spill_folder() -> str:
    with _spill_lock:
        if not _spill_root:
            _spill_root.append(tempfile.mkdtemp(prefix="faultkit-archive-"))
            atexit.register(_remove_spills)
            _on_sigterm()
        return _spill_root[0]


def _remove_spills() -> None:
    for root in _spill_root:
        shutil.rmtree(root, ignore_errors=True)


def _on_sigterm() -> None:
    """SIGTERM ends a process without atexit: the copies are removed first, then the signal's own
    ending is kept (exit status 143)."""
    if threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGTERM)

    def handler(signum, frame):
        _remove_spills()
        if callable(previous):
            previous(signum, frame)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    try:
        signal.signal(signal.SIGTERM, handler)
    except (ValueError, OSError):
        pass


def _forget(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _spill(src, shown: str, size: int, out: Inputs) -> str | None:
    """Copy a member that a reader takes by path into the private folder, capped by the budget and
    free disk; its name there is a number (the member's own name may be too long or hostile)."""
    folder = _spill_folder()
    cap = out.budget.spill_cap(folder)
    if cap <= 0:
        out.problems.append(Problem(shown, "not copied out of the archive: no room left (free disk or the "
                                           "triage's byte budget); not read"))
        return None
    sub = tempfile.mkdtemp(dir=folder)
    # the member's last name is kept (readers tell a trace's table by it), shortened where long
    base = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in PurePosixPath(shown).name)[-120:] or "member"
    dest = os.path.join(sub, base)
    written, more = limits.copy_capped(limits.Capped(src, cap, out.budget), dest, cap)
    out.shown[dest] = shown
    if more or written < size:
        out.problems.append(Problem(shown, f"{size:,} bytes in the archive: only the first {written:,} were copied "
                                           f"out (free disk or the triage's byte budget); read cut there"))
    return dest


# ---------------- one bundle's files ----------------

def _load(entries: list[_Entry], out: Inputs, loose: bool = False) -> None:
    manifest = next((e for e in entries if layout.classify(e.rel, False) == layout.MANIFEST_ROLE), None)
    if manifest is not None:
        text = _text(manifest, out)
        value, problems = load_json(text, manifest.name)
        out.problems += problems
        if value is not None:
            value, problems = check_manifest(value, manifest.name)
            out.problems += problems
            if value is not None:
                out.manifest = value
    captured = out.captured and manifest is not None
    trial = None if manifest is not None or loose else _trial_record(entries, out)
    if trial is not None:
        # a trial folder (faultkit trials / amplify): capture's names, read as a capture's, so that its
        # output's arrival stamps time the fault; its result.json is faultkit's record, not evidence
        captured = out.trial = True
        out.anchors = out.anchors or trial[1]
    if manifest is not None and out.manifest is None and layout.written_by_capture(e.rel for e in entries):
        # a damaged manifest does not make a bundle a plain folder (its kernel-before.log, the boot's
        # history, would be read as evidence): its files are known by their names
        captured = True
        out.problems.append(Problem(manifest.name, "the manifest is damaged: read as a capture bundle by its file "
                                                   "names; how the capture ended and what it checked are not known"))
    by_rel: dict[str, _Entry] = {}
    for e in entries:
        if trial is not None and e is trial[0]:
            continue
        role = layout.classify(e.rel, captured)
        if loose and role == layout.OUTPUT:
            role = layout.EVIDENCE       # a file named on the command line is read whatever its suffix
        if role in (layout.OUTPUT, layout.MANIFEST_ROLE, layout.FACTS):
            continue
        if e.size == 0 and role != layout.CORE and not loose:
            continue                     # an empty log says nothing: not listed as an input
        if e.size == 0 and loose:        # one named on the command line (or stdin) is said
            out.problems.append(Problem(e.name, "empty input (0 bytes): nothing in it to read"))
        head = _head(e) if role in (layout.EVIDENCE, layout.TRACE) else b""
        if role == layout.EVIDENCE and OWN_REPORT.encode() in head:
            continue                     # a report faultkit wrote: reading it back would count its faults twice
        if role == layout.EVIDENCE and is_core_header(head):
            role = layout.CORE           # a core dump, whatever its name: read by its debugger
        if role == layout.EVIDENCE and looks_like_flight_record(head):
            role = layout.HANG           # a flight-recorder dump given loose (nccl_trace_rank_3)
        if role == layout.TRACE or (role == layout.EVIDENCE and e.rel.endswith(".json") and b'"traceEvents"' in head):
            if e.path:
                out.traces.append(e.path)
            continue
        if role == layout.CORE:
            if e.path:
                out.cores.append(e.path)
            continue
        by_rel[e.rel] = e
        if role == layout.EVIDENCE:
            out.files.append(InputFile(e.name, read=e.read) if e.read is not None else
                             InputFile(e.name, load=_reader(e, out)))
        elif role in (layout.AGENT, layout.HANG):      # binary records (rings, pickles): bytes, never decoded
            (out.agent if role == layout.AGENT else out.hang).append(
                InputFile(e.name, read=e.read) if e.read is not None else InputFile(e.name, load=_bytes_reader(e, out)))
        elif role == layout.ENVIRONMENT:
            value, problems = load_json(_text(e, out), e.name)
            out.problems += problems
            out.environ.extend(records(value, e.name, out.problems))
    if captured:
        for rel, e in by_rel.items():
            if layout.classify(rel, True) == layout.STAMPS:
                log = by_rel.get(layout.log_for_times(rel))
                if log is not None:
                    out.stamps[log.name] = _stamps(e, out)
        snapshot = by_rel.get(layout.KERNEL_AFTER)
        if snapshot is not None:
            _new_kernel_lines(snapshot, by_rel.get(layout.KERNEL_FOLLOW), by_rel.get(layout.KERNEL_BEFORE), out)


def _trial_record(entries: list[_Entry], out: Inputs) -> tuple[_Entry, Clocks | None] | None:
    """The folder's top-level result.json when it is a trial's (its schema), with the clocks the trial
    took at its start (None where they are missing or not numbers: the folder is still a trial's)."""
    e = next((e for e in entries if e.rel.replace("\\", "/").lstrip("./") == layout.TRIAL_RESULT), None)
    if e is None or (e.size or 0) > 1 << 20:
        return None
    value, _ = load_json(_text(e, out), e.name)
    if not isinstance(value, dict) or value.get("schema") != layout.TRIAL_RESULT_SCHEMA:
        return None
    start = (value.get("clocks") or {}).get("start") if isinstance(value.get("clocks"), dict) else None
    if not isinstance(start, dict):
        return e, None
    wall, mono, boot = start.get("wall"), start.get("monotonic_ns"), start.get("boottime_ns")
    ok = isinstance(wall, (int, float)) and all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 63
                                                for v in (mono, boot))
    if not ok:
        out.problems.append(Problem(e.name, "the trial's start clocks are missing or not numbers: its lines' "
                                            "arrival stamps cannot be put on the kernel's clock"))
        return e, None
    return e, Clocks(wall=float(wall), monotonic_ns=mono, boottime_ns=boot)


def _head(e: _Entry) -> bytes:
    if e.head or not e.lazy:
        return e.head or (e.read.binary[:HEAD] if e.read and e.read.binary else
                          e.read.text[:HEAD].encode() if e.read else b"")
    try:
        with e.open() as fh:
            e.head = fh.read(HEAD)
    except OSError:
        e.head = b""
    return e.head


def _read(e: _Entry, out: Inputs) -> LogRead:
    if e.read is not None:
        return e.read
    try:
        with e.open() as fh:
            return read_log(fh, e.name, out.budget)
    except (OSError, EOFError) as exc:
        return LogRead(problems=[Problem(e.name, f"unreadable ({getattr(exc, 'strerror', None) or exc})")])


def _text(e: _Entry, out: Inputs) -> str:
    """A record file's text (manifest, process records, stamps, kernel snapshots)."""
    got = _read(e, out)
    out.problems.extend(got.problems)
    if hasattr(got.text, "stretches"):
        out.problems.append(Problem(e.name, f"over {limits.WHOLE:,} bytes: read as a log excerpt, not as a record"))
        return ""
    return got.text


def _reader(e: _Entry, out: Inputs) -> Callable[[], LogRead]:
    return lambda: _read(e, out)


def _bytes_reader(e: _Entry, out: Inputs) -> Callable[[], LogRead]:
    """A binary record file as it is, within the per-member budget."""
    def load() -> LogRead:
        try:
            with e.open() as fh:
                src = limits.Capped(fh, out.budget.for_member(), out.budget)
                data = src.readall()
        except (OSError, EOFError) as exc:
            return LogRead(problems=[Problem(e.name, f"unreadable ({getattr(exc, 'strerror', None) or exc})")])
        problems = [Problem(e.name, f"over {len(data):,} bytes: only its start was read")] if src.over else []
        return LogRead(size=len(data), binary=data, problems=problems)
    return load


def _stamps(e: _Entry, out: Inputs) -> list[tuple[int, int, int]]:
    """Rows are `first line<TAB>wall s<TAB>monotonic ns<TAB>boottime ns` (older bundles: a row per line).
    A row whose fields are not numbers in range (a cut row, a 400-digit clock) is passed over, counted."""
    rows, bad = [], 0
    for row in _text(e, out).splitlines():
        parts = row.split("\t")
        try:
            if len(parts) < 4 or max(len(p) for p in parts[:4]) > 40:
                raise ValueError("not a row")
            first, boot, wall = int(parts[0]), int(parts[3]), float(parts[1])
            if not (0 < first < 1 << 40 and 0 <= boot < 1 << 63 and 0 <= wall < 1e11):
                raise ValueError("out of range")
            rows.append((first, boot, int(wall * 1e9)))
        except (ValueError, OverflowError):
            bad += 1              # a row cut by a crash
    if bad > 1 or (bad and rows):
        out.problems.append(Problem(e.name, f"{bad} row(s) not read (cut, or fields that are not times)"))
    rows.sort()
    return rows


def _new_kernel_lines(after: _Entry, follow: _Entry | None, before: _Entry | None, out: Inputs) -> None:
    """Use the after-snapshot only where the follower caught nothing, and only its new lines."""
    if follow is not None and (follow.size or 0) > 0:
        return
    old = set(_text(before, out).splitlines()) if before is not None else set()
    new = "\n".join(line for line in _text(after, out).splitlines() if line not in old)
    out.files.append(InputFile(after.name + " (lines new since the capture began)", new.encode()))


# ---------------- names in reports ----------------

def _rename(obj, shown: dict[str, str], seen: set | None = None):
    """Replace paths of copies by their names in the archive, in place, through an incident's
    records (dataclasses, lists, dicts); returns `obj`."""
    seen = set() if seen is None else seen

    def fix(v):
        if isinstance(v, str):
            for path, name in shown.items():
                if path in v:
                    v = v.replace(path, name)
            return v
        if id(v) in seen or isinstance(v, (int, float, bytes, type(None))):
            return v
        seen.add(id(v))
        if isinstance(v, list):
            v[:] = [fix(x) for x in v]
        elif isinstance(v, dict):
            items = [(fix(k), fix(x)) for k, x in v.items()]
            v.clear()
            v.update(items)
        elif isinstance(v, tuple):
            return type(v)(fix(x) for x in v) if not hasattr(v, "_fields") else type(v)(*(fix(x) for x in v))
        elif hasattr(v, "__dataclass_fields__"):
            for name in v.__dataclass_fields__:
                try:
                    object.__setattr__(v, name, fix(getattr(v, name)))
                except (AttributeError, TypeError):
                    pass
        return v

    return fix(obj)
