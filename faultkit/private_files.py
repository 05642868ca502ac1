"""The one writer: everything faultkit writes goes through this module (tests/test_architecture.py
proves no other module opens a file for writing). Reports, timelines, bundles, trials, dumps,
packs, registry exports, the agent's spool and metrics hold command lines, environments, log text
and memory, so every file is its owner's only.

Files are written atomically (a temporary file beside the target, renamed over it when complete:
a reader never sees half a report, a crash leaves the old file) and created 0600 from the start
(never world-readable, not even for a moment); folders faultkit creates are 0700. Text from
evidence is written with `write_evidence`, which redacts it by name and by shape (faultkit.redact)
as it goes: a writer that forgets to redact cannot exist. Streams (a followed kernel log, a
debugger's transcript) are appended through `open_append`, 0600 from their first byte.
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

FILE_MODE, DIR_MODE = 0o600, 0o700

# What a full disk, a read-only folder, a quota or a file-size limit says: a write's failure, never
# faultkit's own (an OSError of these inside a writer's `with` is about the file being written).
WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG})


class CannotWrite(OSError):
    """A file faultkit writes could not be written: its path and why (`str` is the one line every
    verb says). The target is as it was (a PrivateFile's temporary is removed)."""

    def __init__(self, path: Path | str, exc: OSError):
        super().__init__(exc.errno, exc.strerror or str(exc), str(path))
        self.path = Path(path)

    def __str__(self) -> str:
        return f"{self.path}: cannot write ({self.strerror})"


def _cannot_write(path: Path | str, exc: OSError) -> CannotWrite:
    return exc if isinstance(exc, CannotWrite) else CannotWrite(path, exc)


def private_dir(path: Path | str) -> Path:
    """A folder faultkit owns (a bundle, a trials root, a spool, a cache): created or narrowed to
    0700; the folders above it that were missing are made 0700 too."""
    path = Path(path)
    _make_dirs(path)
    os.chmod(path, DIR_MODE)
    return path


def _make_dirs(folder: Path) -> None:
    """`folder` and the folders above it that are missing, each 0700; an existing one is the user's
    and keeps its mode. (mkdir(parents=True) gives the upper ones the umask's mode: `-o new/b` or
    `--spool new/spool` made `new` 0755.)"""
    missing = []
    p = folder
    while not p.is_dir() and p != p.parent:
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        d.mkdir(mode=DIR_MODE, exist_ok=True)
        os.chmod(d, DIR_MODE)


def _parent(path: Path) -> Path:
    """The folder a file goes into: made (0700) where missing; an existing one is the user's and
    keeps its mode."""
    _make_dirs(path.parent)
    return path.parent


class PrivateFile:
    """A file written whole or not at all, 0600: `write` as to any file, `close` puts it in place,
    `discard` (or leaving a `with` block by an exception) leaves the target as it was."""

    def __init__(self, path: Path | str, binary: bool = False):
        self.path = Path(path)
        try:
            fd, self.tmp = tempfile.mkstemp(dir=_parent(self.path), prefix=f".{self.path.name}.", suffix=".part")
        except OSError as exc:
            raise _cannot_write(self.path, exc) from exc
        os.fchmod(fd, FILE_MODE)        # mkstemp's 0600 already; said once more against an odd umask
        self.fh = os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape")
        self.closed = False

    def write(self, data) -> int:
        try:
            return self.fh.write(data)
        except OSError as exc:
            raise _cannot_write(self.path, exc) from exc

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.fh.close()
            os.replace(self.tmp, self.path)
        except OSError as exc:
            _unlink(self.tmp)
            raise _cannot_write(self.path, exc) from exc
        except BaseException:
            _unlink(self.tmp)
            raise

    def discard(self) -> None:
        if not self.closed:
            self.closed = True
            try:
                self.fh.close()
            except OSError:
                pass                    # a full disk's last flush: the file is dropped anyway
            finally:
                _unlink(self.tmp)

    def __enter__(self) -> "PrivateFile":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
            return
        self.discard()
        # A library that wrote into `fh` itself (tarfile, pyarrow) raised the disk's error without a name.
        if isinstance(exc, OSError) and not isinstance(exc, CannotWrite) and exc.errno in WRITE_ERRNOS:
            raise CannotWrite(self.path, exc) from exc


def write_private(path: Path | str, data: str | bytes) -> None:
    """Write a whole file atomically, readable by its owner only."""
    with PrivateFile(path, binary=isinstance(data, bytes)) as fh:
        fh.write(data)


def write_evidence(path: Path | str, data: str | bytes, redact: bool = True) -> None:
    """Text from evidence (a tool's output, log lines, a transcript) written atomically and 0600,
    redacted by name and by shape on the way (bytes are read as UTF-8, undecodable bytes kept)."""
    from . import redact as redaction          # imported here: the writer is loaded by every verb
    if redact:
        text = data.decode("utf-8", "surrogateescape") if isinstance(data, bytes) else data
        red = redaction.text(text)
        if red != text or isinstance(data, str):
            data = red.encode("utf-8", "surrogateescape") if isinstance(data, bytes) else red
    write_private(path, data)


def open_append(path: Path | str, buffering: int = -1, text: bool = False):
    """A stream faultkit appends to as evidence arrives (a followed log, a transcript): created 0600
    (an existing file is narrowed to 0600), binary unless `text`; the caller closes it."""
    fd = open_fd(path, append=True)
    if text:
        return os.fdopen(fd, "a", buffering=buffering, encoding="utf-8")
    return os.fdopen(fd, "ab", buffering=buffering)


def open_fd(path: Path | str, append: bool = False) -> int:
    """A file descriptor to write evidence into as it arrives (splice(2) refuses O_APPEND: the
    recorder takes one without), 0600 from its first byte; the caller closes it."""
    path = Path(path)
    try:
        _parent(path)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | (os.O_APPEND if append else 0), FILE_MODE)
    except OSError as exc:
        raise _cannot_write(path, exc) from exc
    os.fchmod(fd, FILE_MODE)
    return fd


def open_lock(path: Path | str):
    """A lock file (its content is nothing; `fcntl.flock` on it is the point), 0600."""
    # never through a link: lock files may live in a shared folder such as /tmp
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, FILE_MODE)
    return os.fdopen(fd, "w")


def reserve(path: Path | str, size: int) -> None:
    """Disk kept for a file to be written later (capture's final manifest), 0600."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
    try:
        os.posix_fallocate(fd, 0, size)
    finally:
        os.close(fd)


def scratch_dir(prefix: str = "faultkit-"):
    """A private temporary folder (0700, removed when the `with` ends) in the user's cache, never /tmp."""
    return tempfile.TemporaryDirectory(prefix=prefix, dir=cache_dir())


def private_tree(root: Path | str) -> None:
    """Files others wrote into a folder of faultkit's (the target's cores and logs) get its modes."""
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            _chmod(Path(dirpath) / d, DIR_MODE)
        for f in filenames:
            _chmod(Path(dirpath) / f, FILE_MODE)


def cache_dir() -> Path:
    """The user's own cache folder for faultkit (XDG_CACHE_HOME, else ~/.cache), 0700."""
    base = os.environ.get("XDG_CACHE_HOME") or ""
    root = Path(base) if os.path.isabs(base) else Path.home() / ".cache"    # the spec ignores relative paths
    return private_dir(root / "faultkit")


def _chmod(p: Path, mode: int) -> None:
    try:
        if not p.is_symlink() and (p.is_file() or p.is_dir()):
            os.chmod(p, mode)
    except OSError:
        pass


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
