"""How many bytes one triage (or one `timeline --check`) may read, hold, inflate and spill.

One owner for every size bound, so a gzip bomb, a 1 GB log, a core in an archive and a Perfetto
batch that inflates to gigabytes are all stopped by the same numbers. A bound that is reached is
said as a problem, and what was read before it is kept.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from typing import BinaryIO

MiB, GiB = 1 << 20, 1 << 30
CHUNK = 1 * MiB          # one read from a file, pipe or decompressor: never a buffer sized by the input

# Logs: read whole up to WHOLE; past it through the prefilter (ingest.prefilter), which holds only
# the lines near an anchor. Time is what a huge log costs, so the reading bounds are wide.
WHOLE = 16 * MiB
MEMBER = 8 * GiB         # bytes read from one file, member or stream (after decompression)
TOTAL = 32 * GiB         # from all inputs of one triage together
HOLD = 256 * MiB         # log text held between collection and parsing (archive members, stdin)
CORE = 16 * GiB          # one core or trace spilled out of an archive ...
DISK_MARGIN = 1 * GiB    # ... and never closer than this to a full disk
INFLATE = 128 * MiB      # one compressed Perfetto packet batch, inflated (faultkit writes 1 MiB ones)
INFLATED = 4 * GiB       # all batches of one trace together, inflated
CHECK_FILE = 2 * GiB     # a trace read by `timeline --check` (checked in memory)
JSON_DEPTH = 200         # nesting accepted in a JSON input (Python's parser recurses)


class Budget:
    """What is left of one triage's bounds; each reader asks before it reads more."""

    def __init__(self, total: int = TOTAL, member: int = MEMBER, hold: int = HOLD, core: int = CORE):
        self.total, self.member, self.hold, self.core = total, member, hold, core
        self.read = 0            # bytes read from all inputs
        self.held = 0            # log text held for later parsing

    def for_member(self) -> int:
        """How much one more file or member may yield."""
        return max(0, min(self.member, self.total - self.read))

    def spill_cap(self, folder: str) -> int:
        """How much one file copied out of an archive may take: the core bound and free disk."""
        try:
            free = shutil.disk_usage(folder).free - DISK_MARGIN
        except OSError:
            free = 0
        return max(0, min(self.core, free, self.total - self.read))


class Capped:
    """A stream that yields at most `cap` bytes of another and says whether there was more.
    Reads go through in CHUNK-sized pieces; `read()` without a size never means 'all of it'."""

    def __init__(self, raw: BinaryIO, cap: int, budget: Budget | None = None):
        self.raw, self.cap, self.budget = raw, cap, budget
        self.got = 0
        self.over = False        # the cap was reached with bytes left

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            n = CHUNK
        room = self.cap - self.got
        if room <= 0:
            if not self.over and self.raw.read(1):
                self.over = True
            return b""
        data = self.raw.read(min(n, room, CHUNK * 16))
        self.got += len(data)
        if self.budget is not None:
            self.budget.read += len(data)
        return data

    def readall(self) -> bytes:
        parts = []
        while chunk := self.read(CHUNK):
            parts.append(chunk)
        self.read(1)             # notice a cap reached exactly
        return b"".join(parts)


def copy_capped(src: BinaryIO, dest: str, cap: int) -> tuple[int, bool]:
    """Copy at most `cap` bytes to a new private file; (bytes written, whether the source had more)."""
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    got = 0
    with os.fdopen(fd, "wb") as w:
        while got < cap:
            chunk = src.read(min(CHUNK, cap - got))
            if not chunk:
                return got, False
            w.write(chunk)
            got += len(chunk)
    return got, bool(src.read(1))


@dataclass
class Inflated:
    """Decompressed bytes up to a bound, and whether the bound cut them."""
    data: bytes
    over: bool               # the bound was reached: `data` is the first `limit` bytes


def inflate(blob: bytes, limit: int = INFLATE, wbits: int = 15) -> Inflated:
    """zlib/gzip-inflate at most `limit` bytes (a Perfetto `compressed_packets` batch, ...).
    Raises zlib.error on damaged input, like zlib.decompress."""
    import zlib
    d = zlib.decompressobj(wbits)
    out = d.decompress(blob, limit)
    over = bool(d.unconsumed_tail) or (len(out) >= limit and not d.eof)
    return Inflated(out, over)


# Numbers read from evidence: a count, a pid, a sequence number fits 64 bits. A longer run of digits
# is hostile or damaged: Python refuses to convert more than 4,300 digits (ValueError), and a huge
# int reaches JSON output only to fail there. Readers take numbers through these.
INT_DIGITS = 19
INT_MAX = (1 << 63) - 1


def small_int(text: str | bytes | None, base: int = 10) -> int | None:
    """`text` as an int when it fits 64 bits; None when it is longer, empty or not a number."""
    if text is None:
        return None
    s = text.strip()
    if not s or len(s) > (INT_DIGITS if base == 10 else 18):
        return None
    try:
        n = int(s, base)
    except ValueError:
        return None
    return n if -INT_MAX - 1 <= n <= INT_MAX or (base == 16 and n < 1 << 64) else None


def fits_int(v) -> bool:
    """An int (not a bool) that fits a signed 64-bit column (a pid, a count, a sequence number): what a
    field of a typed record may hold."""
    return isinstance(v, int) and not isinstance(v, bool) and -INT_MAX - 1 <= v <= INT_MAX


MAX_FIELD = 4096         # characters of one string field from a structured input (a name, a state)


def short_text(v, limit: int = MAX_FIELD) -> str | None:
    """A string field as a bounded string; a number as its digits (when it fits); any other type
    None. Never `str()` of a container: a pickle's shared references make that gigabytes."""
    if isinstance(v, str):
        return v[:limit]
    if isinstance(v, bool):
        return str(v)
    if fits_int(v):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    return None
