"""Bundles hold command lines, environments and memory: readable by their owner only. The folder
is made 0700 before anything is written into it; files the target or its runtime wrote (cores,
logs) get 0600 at the end, and by the watchdog when faultkit was killed."""

from __future__ import annotations

import os
from pathlib import Path


def private_dir(path: Path) -> None:
    """Bundles hold command lines, environments and memory: readable by their owner only."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)


def private_tree(root: Path) -> None:
    """Files the target or its runtime wrote (cores, logs) get the bundle's permissions too."""
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            _chmod(Path(dirpath) / d, 0o700)
        for f in filenames:
            _chmod(Path(dirpath) / f, 0o600)


def _chmod(p: Path, mode: int) -> None:
    try:
        if not p.is_symlink() and (p.is_file() or p.is_dir()):
            os.chmod(p, mode)
    except OSError:
        pass
