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

import bz2
import gzip
import io
import json
import lzma
import os
import re
import sqlite3
import stat
import tarfile
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath

from . import layout
from . import redact as redaction
from .ingest.core_file import is_core_header
from .private_files import PrivateFile, scratch_dir, write_private

SCHEMA = "faultkit.pack/1"
# Files of a bundle that are bookkeeping of the capture, not evidence or record.
BOOKKEEPING = frozenset({layout.LOCK, layout.RESERVE, layout.MANIFEST_TMP})


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
        if path.name in BOOKKEEPING:
            continue
        try:
            with open(path, "rb") as fh:
                head = fh.read(64)
                inner = _inner_head(head, fh)
        except OSError as exc:
            result.left_out.append({"name": rel, "bytes": size, "why": f"unreadable ({exc.strerror or exc})"})
            continue
        core = role == layout.CORE or is_core_header(head) or is_core_header(inner)
        if core and not with_cores:
            result.left_out.append({"name": rel, "bytes": size, "why": "core dump (process memory): add --with-cores"})
            continue
        if role == layout.ENVIRONMENT and not with_env:
            result.left_out.append({"name": rel, "bytes": size, "why": "process environments: add --with-env"})
            continue
        if core:
            members.append((rel, None))                    # streamed from disk: a core may be gigabytes
            result.included.append({"name": rel, "bytes": size, "redacted": 0, "checked": False})
            continue
        if size > MAX_CHECKED:
            result.left_out.append({"name": rel, "bytes": size, "why": f"larger than {MAX_CHECKED >> 20} MiB: "
                                                                        "too large to check for secrets"})
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
        got = clean(rel, data)
        if got.why:
            result.left_out.append({"name": rel, "bytes": size, "why": got.why})
            continue
        members.append((rel, got.data))
        result.included.append({"name": rel, "bytes": len(got.data), "redacted": got.changed, "checked": True})
    if not members and not result.left_out:            # an empty folder: an empty archive would look like a pack
        raise PackError(f"{bundle}: an empty folder: nothing to pack")
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
            # what it is, before any resolve(): a link that loops makes resolve() raise
            if stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode):
                result.left_out.append({"name": rel, "bytes": 0, "why": "not a regular file (a link, pipe or device)"})
                continue
            if p.resolve() in skip:
                continue
            yield p, rel


@dataclass
class Cleaned:
    data: bytes = b""
    changed: int = 0               # values or lines redacted
    why: str = ""                  # set: the file stays out, and this says why


def clean(rel: str, data: bytes) -> Cleaned:
    """The file redacted again, whatever its encoding or compression; or why it cannot go in.
    Nothing goes in unread: a text is decoded (UTF-8, UTF-16 with its byte-order mark), a
    compressed file decompressed (within a bound) and judged as what it holds, an archive or a
    database refused or rewritten, a binary checked for secret-shaped strings."""
    kind = COMPRESSORS.get(data[:6]) or COMPRESSORS.get(data[:3]) or COMPRESSORS.get(data[:2])
    if kind is not None:
        name, module = kind
        try:
            raw = _decompress(module, data)
        except (OSError, EOFError, ValueError) as exc:
            return Cleaned(why=f"{name} data that cannot be decompressed ({exc}): it cannot be checked for secrets")
        if raw is None:
            return Cleaned(why=f"{name} data of more than {MAX_CHECKED >> 20} MiB: too large to check for secrets")
        inner = clean(rel[: -len(name) - 1] if rel.endswith("." + name) else rel, raw)
        if inner.why:
            return Cleaned(why=f"{name}-compressed: {inner.why}")
        if not inner.changed:
            return Cleaned(data, 0)
        return Cleaned(module.compress(inner.data), inner.changed)
    if _is_archive(data):
        return Cleaned(why="an archive (an earlier pack, or files packed together): its members are not checked "
                           "one by one; pack the bundle they came from instead")
    if data.startswith(SQLITE_MAGIC):
        return _database(data)
    text, encoding = _decode(data)
    if text is None:
        # Binary (a trace, a code object): it cannot be rewritten, only refused where it shows a secret.
        shown = "\n".join(m.decode("latin-1") for m in PRINTABLE_RUN.findall(data))
        if redaction.text(shown) != shown:
            return Cleaned(why="binary file holding a secret-shaped value: it cannot be redacted")
        return Cleaned(data, 0)
    if rel.endswith(".json"):
        try:
            doc = json.loads(text)
        except (ValueError, RecursionError):
            doc = None
        if doc is not None:
            counter = [0]
            out = _json(doc, counter)
            return Cleaned((json.dumps(out, indent=2) + "\n").encode(encoding) if counter[0] else data, counter[0])
    # The whole text at once: a secret may span lines (a PEM private key); line count is kept.
    red = redaction.text(text)
    if red == text:
        return Cleaned(data, 0)
    changed = sum(a != b for a, b in zip(text.split("\n"), red.split("\n")))
    return Cleaned(red.encode(encoding, "surrogateescape" if encoding == "utf-8" else "strict"), max(changed, 1))


# What a file starts with -> (its usual suffix, the module that inflates it): the standard library's.
COMPRESSORS = {b"\x1f\x8b": ("gz", gzip), b"\xfd7zXZ\x00": ("xz", lzma), b"BZh": ("bz2", bz2)}
SQLITE_MAGIC = b"SQLite format 3\x00"
MAX_CHECKED = 256 << 20          # bytes of one file (decompressed) that pack reads to check it
PRINTABLE_RUN = re.compile(rb"[\t\x20-\x7e]{6,}")


def _inner_head(head: bytes, fh) -> bytes:
    """The first bytes a compressed file holds (a `core.gz` is a core)."""
    kind = COMPRESSORS.get(head[:6]) or COMPRESSORS.get(head[:3]) or COMPRESSORS.get(head[:2])
    if kind is None:
        return b""
    fh.seek(0)
    try:
        with kind[1].open(fh) as z:
            return z.read(64)
    except (OSError, EOFError, ValueError):
        return b""


def _decompress(module, data: bytes) -> bytes | None:
    """The whole of it, or None past MAX_CHECKED (a bomb never inflates beyond the bound)."""
    out = bytearray()
    with module.open(io.BytesIO(data)) as z:
        while chunk := z.read(1 << 20):
            out += chunk
            if len(out) > MAX_CHECKED:
                return None
    return bytes(out)


def _is_archive(data: bytes) -> bool:
    return data[257:262] == b"ustar" or data[:4] in (b"PK\x03\x04", b"PK\x05\x06") or data[:4] == b"7z\xbc\xaf" \
        or data[:6] == b"Rar!\x1a\x07"


def _decode(data: bytes) -> tuple[str | None, str]:
    """(text, its encoding) or (None, "") for what is not text."""
    for bom, enc in ((b"\xff\xfe", "utf-16"), (b"\xfe\xff", "utf-16")):
        if data.startswith(bom):
            try:
                return data.decode(enc), enc
            except UnicodeDecodeError:
                return None, ""
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    # UTF-16 without a mark (a Windows tool's log): ASCII text with a zero in every other byte
    if len(data) >= 4 and len(data) % 2 == 0:
        even, odd = data[0::2], data[1::2]
        for enc, zeros in (("utf-16-le", odd), ("utf-16-be", even)):
            if zeros.count(0) > 0.9 * len(zeros):
                try:
                    return data.decode(enc), enc
                except UnicodeDecodeError:
                    pass
    return None, ""


def _database(data: bytes) -> Cleaned:
    """A SQLite database (rocpd's): a copy with every text value redacted as free text (its process
    table holds command lines and environments); refused where a binary value shows a secret."""
    with scratch_dir("faultkit-pack-") as tmp:
        src = Path(tmp) / "in.db"
        write_private(src, data)
        changed = 0
        try:
            db = sqlite3.connect(src)
            db.execute("PRAGMA trusted_schema = OFF")
            tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                              "AND name NOT LIKE 'sqlite_%'")]
            for t in tables:
                q = '"' + t.replace('"', '""') + '"'
                cols = [r[1] for r in db.execute(f"PRAGMA table_info({q})")]
                for rowid, *values in db.execute(f"SELECT rowid, * FROM {q}").fetchall():
                    new = []
                    for v in values:
                        if isinstance(v, str):
                            r = redaction.text(v)
                            changed += r != v
                            new.append(r)
                        elif isinstance(v, bytes):
                            shown = "\n".join(m.decode("latin-1") for m in PRINTABLE_RUN.findall(v))
                            if redaction.text(shown) != shown:
                                return Cleaned(why=f"a database whose table {t} holds a binary value with a "
                                                   "secret-shaped string: it cannot be redacted")
                            new.append(v)
                        else:
                            new.append(v)
                    if new != list(values):
                        sets = ", ".join('"' + c.replace('"', '""') + '" = ?' for c in cols)
                        db.execute(f"UPDATE {q} SET {sets} WHERE rowid = ?", (*new, rowid))
            db.commit()
            if changed:
                db.execute("VACUUM")          # the old values must not stay in free pages
            db.close()
        except sqlite3.Error as exc:
            return Cleaned(why=f"a database that cannot be read to be redacted ({exc})")
        return Cleaned(src.read_bytes() if changed else data, changed)


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
        out = PrivateFile(output, binary=True)          # atomic, 0600: the archive appears whole or not at all
    except OSError as exc:
        raise PackError(f"{output}: cannot write there ({exc.strerror or exc})")
    with out, tarfile.open(fileobj=out.fh, mode="w:gz") as tar:
        now = time.time()
        # every folder its own entry, 0700 like the bundle's (without one, tar makes it with the
        # umask's mode on extraction: agent/ came out 0755)
        folders = {root} | {f"{root}/{p}" for rel, _ in members for p in map(str, PurePosixPath(rel).parents) if p != "."}
        for d in sorted(folders):
            info = tarfile.TarInfo(d)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o700, now
            tar.addfile(info)
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


def _add(tar: tarfile.TarFile, name: str, data: bytes, mtime: float) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o600, mtime
    tar.addfile(info, io.BytesIO(data))
