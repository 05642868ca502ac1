"""`faultkit pack BUNDLE -o incident.tar.gz`: a copy of a capture bundle fit to attach to an issue.

Left out unless asked: core dumps (`--with-cores`: process memory, and gigabytes), the process
environments (`--with-env`) and the machine's kernel history (`--with-kernel-history`: the boot's
kernel log before the capture; by default the end snapshot keeps only the lines new since the capture
began, the capture's window, as triage reads it). Every text file that goes in is redacted again with `redact.py`
(a bundle made with `--no-redact`, or by an older faultkit, must not leak through the copy); a
binary file that shows a secret-shaped value is left out, since it cannot be redacted. What was
left out, and why, is listed in `pack-manifest.json` inside the archive. The archive is 0600.
"""

from __future__ import annotations

import io
import json
import os
import stat
import tarfile
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import layout
from . import redact as redaction
from .ingest.core_file import is_core_header

SCHEMA = "faultkit.pack/1"
# Files of a bundle that are bookkeeping of the capture, not evidence or record.
BOOKKEEPING = frozenset({".lock", ".reserve", layout.MANIFEST_TMP})


class PackError(Exception):
    """The bundle cannot be packed (not a folder, the output not writable): said, no traceback."""


@dataclass
class Packed:
    output: str
    included: list[dict] = field(default_factory=list)     # name, bytes, redacted (lines or values changed)
    left_out: list[dict] = field(default_factory=list)     # name, bytes, why

    def to_json(self) -> dict:
        return {"schema": SCHEMA, **asdict(self)}


def pack(bundle: Path, output: Path, with_cores: bool = False, with_env: bool = False,
         with_kernel_history: bool = False) -> Packed:
    if not bundle.is_dir():
        raise PackError(f"{bundle}: not a bundle folder (pack reads the folder a capture wrote)")
    captured = (bundle / layout.MANIFEST).is_file()
    result = Packed(output=output.name)           # the name only: no local path goes into a shared copy
    root = bundle.resolve().name or "bundle"
    skip = {output.resolve()}
    members: list[tuple[str, bytes]] = []
    for path, rel in _files(bundle, skip, result):
        size = path.stat().st_size
        role = layout.classify(rel, captured)
        try:
            with open(path, "rb") as fh:
                head = fh.read(64)
        except OSError as exc:
            result.left_out.append({"name": rel, "bytes": size, "why": f"unreadable ({exc.strerror or exc})"})
            continue
        if path.name in BOOKKEEPING:
            continue
        if (role == layout.CORE or is_core_header(head)) and not with_cores:
            result.left_out.append({"name": rel, "bytes": size, "why": "core dump (process memory): add --with-cores"})
            continue
        if role == layout.ENVIRONMENT and not with_env:
            result.left_out.append({"name": rel, "bytes": size, "why": "process environments: add --with-env"})
            continue
        if role == layout.CORE or is_core_header(head):
            members.append((rel, None))                    # streamed from disk: a core may be gigabytes
            result.included.append({"name": rel, "bytes": size, "redacted": 0, "checked": False})
            continue
        data = path.read_bytes()
        if captured and not with_kernel_history and rel in (layout.KERNEL_BEFORE, layout.KERNEL_AFTER):
            data = _window(bundle, rel, data)
            if data is None:
                why = ("the machine's kernel log before the capture (its whole boot)" if rel == layout.KERNEL_BEFORE
                       else "the end snapshot of the whole boot's kernel log, with no start snapshot to cut it to "
                            "the capture's window")
                result.left_out.append({"name": rel, "bytes": size, "why": f"{why}: add --with-kernel-history"})
                continue
        cleaned, changed, ok = clean(rel, data)
        if not ok:
            result.left_out.append({"name": rel, "bytes": size, "why": "binary file holding a secret-shaped value: "
                                                                        "it cannot be redacted"})
            continue
        members.append((rel, cleaned))
        result.included.append({"name": rel, "bytes": len(cleaned), "redacted": changed, "checked": True})
    _write(output, root, bundle, members, result)
    return result


def _window(bundle: Path, rel: str, data: bytes) -> bytes | None:
    """The capture's window of a kernel-log snapshot: the end snapshot's lines that the start
    snapshot did not hold (None: nothing of it belongs to the window, or it cannot be cut)."""
    if rel == layout.KERNEL_BEFORE:
        return None
    try:
        before = set((bundle / layout.KERNEL_BEFORE).read_bytes().split(b"\n"))
    except OSError:
        return None
    return b"\n".join(ln for ln in data.split(b"\n") if ln not in before or not ln)


def _files(bundle: Path, skip: set[Path], result: Packed):
    """Regular files under the bundle, never through a link (a link could point anywhere)."""
    for dirpath, dirnames, filenames in os.walk(bundle):
        here = Path(dirpath)
        for d in list(dirnames):
            if (here / d).is_symlink():
                dirnames.remove(d)
                result.left_out.append({"name": (here / d).relative_to(bundle).as_posix(), "bytes": 0,
                                        "why": "a symbolic link (never followed)"})
        dirnames.sort()
        for fn in sorted(filenames):
            p = here / fn
            rel = p.relative_to(bundle).as_posix()
            try:
                st = p.lstat()
            except OSError:
                continue
            if p.resolve() in skip:
                continue
            if stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode):
                result.left_out.append({"name": rel, "bytes": 0, "why": "not a regular file (a link, pipe or device)"})
                continue
            yield p, rel


def clean(rel: str, data: bytes) -> tuple[bytes, int, bool]:
    """The file redacted again: (bytes, how many values or lines changed, whether it may go in)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        # Binary (a rocpd database, a trace): it cannot be rewritten, only refused where it shows a secret.
        shown = data.decode("latin-1")
        return data, 0, redaction.value(shown) == shown
    if rel.endswith(".json"):
        try:
            doc = json.loads(text)
        except (ValueError, RecursionError):
            doc = None
        if doc is not None:
            counter = [0]
            out = _json(doc, counter)
            return (json.dumps(out, indent=2) + "\n").encode() if counter[0] else data, counter[0], True
    lines = text.split("\n")
    changed = 0
    for i, line in enumerate(lines):
        red = redaction.text(line)
        if red != line:
            lines[i], changed = red, changed + 1
    return ("\n".join(lines).encode() if changed else data), changed, True


def _json(v, counter: list[int], key: str | None = None):
    """Strings redacted as free text; a value under a secret-looking name replaced whole."""
    if isinstance(v, dict):
        return {k: _json(x, counter, k) for k, x in v.items()}
    if isinstance(v, list):
        return [_json(x, counter) for x in v]
    if isinstance(v, str):
        if key is not None and redaction.secret_name(key) and v and v != redaction.MARK:
            counter[0] += 1
            return redaction.MARK
        red = redaction.text(v)
        if red != v:
            counter[0] += 1
        return red
    return v


def _write(output: Path, root: str, bundle: Path, members: list[tuple[str, bytes | None]], result: Packed) -> None:
    try:
        output.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=output.parent, prefix=f".{output.name}.", suffix=".part")
    except OSError as exc:
        raise PackError(f"{output}: cannot write there ({exc.strerror or exc})")
    os.fchmod(fd, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh, tarfile.open(fileobj=fh, mode="w:gz") as tar:
            now = time.time()
            for rel, data in members:
                name = f"{root}/{rel}"
                if data is None:
                    info = tar.gettarinfo(str(bundle / rel), arcname=name)
                    info.mode, info.uid, info.gid, info.uname, info.gname = 0o600, 0, 0, "", ""
                    with open(bundle / rel, "rb") as src:
                        tar.addfile(info, src)
                else:
                    _add(tar, name, data, now)
            _add(tar, f"{root}/{layout.PACK_MANIFEST}", (json.dumps(result.to_json(), indent=2) + "\n").encode(), now)
        os.replace(tmp, output)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _add(tar: tarfile.TarFile, name: str, data: bytes, mtime: float) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o600, mtime
    tar.addfile(info, io.BytesIO(data))
