"""Everything faultkit writes is its owner's only: reports, timelines, bundles, trials, error
tracebacks hold command lines, environments, log text and memory.

Files are written atomically (a temporary file beside the target, renamed over it when complete:
a reader never sees half a report, a crash leaves the old file) and created 0600 from the start
(never world-readable, not even for a moment); folders faultkit creates are 0700.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

FILE_MODE, DIR_MODE = 0o600, 0o700


def private_dir(path: Path | str) -> Path:
    """A folder faultkit owns (a bundle, a trials root, a cache): created or narrowed to 0700."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    os.chmod(path, DIR_MODE)
    return path


def _parent(path: Path) -> Path:
    """The folder a file goes into: made (0700) where missing; an existing one is the user's and
    keeps its mode."""
    parent = path.parent
    missing = []
    p = parent
    while not p.is_dir() and p != p.parent:
        missing.append(p)
        p = p.parent
    for d in reversed(missing):           # mkdir(parents=True) would give the upper ones the umask's mode
        d.mkdir(mode=DIR_MODE, exist_ok=True)
        os.chmod(d, DIR_MODE)
    return parent


class PrivateFile:
    """A file written whole or not at all, 0600: `write` as to any file, `close` puts it in place,
    `discard` (or leaving a `with` block by an exception) leaves the target as it was."""

    def __init__(self, path: Path | str, binary: bool = False):
        self.path = Path(path)
        fd, self.tmp = tempfile.mkstemp(dir=_parent(self.path), prefix=f".{self.path.name}.", suffix=".part")
        os.fchmod(fd, FILE_MODE)        # mkstemp's 0600 already; said once more against an odd umask
        self.fh = os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape")
        self.closed = False

    def write(self, data) -> int:
        return self.fh.write(data)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.fh.close()
            os.replace(self.tmp, self.path)
        except BaseException:
            _unlink(self.tmp)
            raise

    def discard(self) -> None:
        if not self.closed:
            self.closed = True
            try:
                self.fh.close()
            finally:
                _unlink(self.tmp)

    def __enter__(self) -> "PrivateFile":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.discard()


def write_private(path: Path | str, data: str | bytes) -> None:
    """Write a whole file atomically, readable by its owner only."""
    with PrivateFile(path, binary=isinstance(data, bytes)) as fh:
        fh.write(data)


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
