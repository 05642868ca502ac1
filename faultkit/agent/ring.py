"""The agent's crash-safe ring file: the one owner of its format, for the writers and the reader.

A ring is a file mapped MAP_SHARED into the target: every store lands in the kernel's page cache at
once, so whatever was written before an abort(), a SIGKILL or the CUDA driver's abort is in the file
afterwards (not after a power loss). The file is allocated in full before it is mapped (a store into
a hole of a mapped file on a full disk is a SIGBUS that would kill the target), so it is bounded and
never grows: the oldest records are overwritten.

Layout (little-endian):
  header, HEADER_BYTES: magic, version, record size, capacity, head (the last claimed sequence
  number, informative), pid, clock anchors (CLOCK_MONOTONIC, wall, CLOCK_BOOTTIME, ns), producer
  name, a CRC-32 of the fixed fields.
  records, RECORD_BYTES each: seq (1-based; 0 = never written), crc32, kind, device, time
  (CLOCK_MONOTONIC ns), address, size, stream, site, thread id, extra (a poison record's byte).
Record `seq` lives in slot (seq - 1) % capacity. Its CRC-32 covers every byte of the record but the
CRC field: a record torn by a writer's death (or a slot half-overwritten by the next lap) fails it
and is dropped, never misread. Writers never wait: a slot is claimed by incrementing a counter
(an atomic add in C++, `next()` of an itertools.count under the GIL in Python).

This module is loaded by file path into the target's interpreter (it must not import faultkit or
anything outside the standard library) and imported normally by the bundle's reader.
"""

from __future__ import annotations

import itertools
import mmap
import os
import struct
import threading
import time
import zlib

MAGIC = b"FKRING1\x00"
VERSION = 1
HEADER_BYTES = 4096
RECORD_BYTES = 64
HEADER = struct.Struct("<8sIIQQqQQQ32s")      # magic ver recsz capacity head pid mono wall boot producer
HEADER_CRC_AT = HEADER.size                   # u32 after the fixed fields
HEAD_AT = 24                                  # offset of `head` (excluded from the header's CRC: it moves)
RECORD = struct.Struct("<QIHhQQQQIIQ")         # seq crc kind device t addr size stream site tid extra
assert RECORD.size == RECORD_BYTES

# Record kinds: the allocator's actions (PyTorch's TraceEntry order), then the agent's own.
ALLOC, FREE_REQUESTED, FREE_COMPLETED, SEGMENT_ALLOC, SEGMENT_FREE, SEGMENT_MAP, SEGMENT_UNMAP, SNAPSHOT, OOM = range(1, 10)
LAUNCH = 16            # a kernel launch seen by a host-side hook (Triton's launcher)
MARK = 17              # the agent's own marker (started, attached)
POISON = 18            # poison.cpp filled a freed block (address, size, stream; extra: the poison byte)
KIND_NAMES = {ALLOC: "alloc", FREE_REQUESTED: "free_requested", FREE_COMPLETED: "free_completed",
              SEGMENT_ALLOC: "segment_alloc", SEGMENT_FREE: "segment_free", SEGMENT_MAP: "segment_map",
              SEGMENT_UNMAP: "segment_unmap", SNAPSHOT: "snapshot", OOM: "oom", LAUNCH: "launch", MARK: "mark", POISON: "poison"}

MAX_RING_BYTES = 64 << 20          # the bound per ring file
SITE_NONE = 0                      # no Python frame (a thread outside Python, or none asked for)
SITE_FULL = 0xFFFFFFFF             # the site table was full


def crc_of(record: bytes) -> int:
    """CRC-32 (zlib's) of a record with its CRC field left out."""
    return zlib.crc32(record[12:], zlib.crc32(record[:8])) & 0xFFFFFFFF


def header_crc(head: bytes) -> int:
    return zlib.crc32(head[HEAD_AT + 8:HEADER.size], zlib.crc32(head[:HEAD_AT])) & 0xFFFFFFFF


def capacity_for(nbytes: int) -> int:
    return max(1, (min(nbytes, MAX_RING_BYTES) - HEADER_BYTES) // RECORD_BYTES)


def create(path: str, nbytes: int, producer: str) -> int:
    """Make a ring file of at most `nbytes` (allocated on disk in full, so that stores into it can
    never fault), trying smaller sizes when the disk or a file-size limit refuses. Returns its
    capacity in records; raises OSError when not even the smallest fits (nothing is left behind)."""
    last: OSError | None = None
    size = min(nbytes, MAX_RING_BYTES)
    while size >= HEADER_BYTES + 16 * RECORD_BYTES:
        cap = capacity_for(size)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o600)
        except OSError as exc:
            raise exc
        try:
            total = HEADER_BYTES + cap * RECORD_BYTES
            os.posix_fallocate(fd, 0, total)
            os.pwrite(fd, _header(cap, producer), 0)
            return cap
        except OSError as exc:            # ENOSPC, EFBIG (RLIMIT_FSIZE: Python ignores SIGXFSZ)
            last = exc
            try:
                os.ftruncate(fd, 0)
            except OSError:
                pass
        finally:
            os.close(fd)
        size //= 8
    try:
        os.unlink(path)
    except OSError:
        pass
    raise last or OSError("ring too small")


def _header(capacity: int, producer: str) -> bytes:
    fixed = HEADER.pack(MAGIC, VERSION, RECORD_BYTES, capacity, 0, os.getpid(), time.monotonic_ns(),
                        time.time_ns(), _boottime_ns(), producer.encode()[:32])
    return fixed + struct.pack("<I", header_crc(fixed))


def _boottime_ns() -> int:
    try:
        return time.clock_gettime_ns(time.CLOCK_BOOTTIME)
    except (AttributeError, OSError):
        return 0


class Writer:
    """Python's writer of a ring file (the C++ tracker has its own, of the same format)."""

    def __init__(self, path: str, nbytes: int, producer: str):
        self.capacity = create(path, nbytes, producer)
        fd = os.open(path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
        try:
            self.map = mmap.mmap(fd, HEADER_BYTES + self.capacity * RECORD_BYTES, mmap.MAP_SHARED,
                                 mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        self.path = path
        self._seq = itertools.count(1)

    def write(self, kind: int, addr: int = 0, size: int = 0, stream: int = 0, site: int = 0, device: int = -1,
              extra: int = 0, t_ns: int | None = None) -> int:
        seq = next(self._seq)                      # atomic under the GIL: no two writers share a slot
        body = RECORD.pack(seq, 0, kind, device, time.monotonic_ns() if t_ns is None else t_ns,
                           addr & 0xFFFFFFFFFFFFFFFF, size & 0xFFFFFFFFFFFFFFFF, stream & 0xFFFFFFFFFFFFFFFF,
                           site & 0xFFFFFFFF, threading.get_native_id() & 0xFFFFFFFF, extra & 0xFFFFFFFFFFFFFFFF)
        rec = body[:8] + struct.pack("<I", crc_of(body)) + body[12:]
        at = HEADER_BYTES + ((seq - 1) % self.capacity) * RECORD_BYTES
        self.map[at:at + RECORD_BYTES] = rec
        struct.pack_into("<Q", self.map, HEAD_AT, seq)
        return seq


# ---------------- reading ----------------

def read_header(data: bytes) -> tuple[dict | None, str | None]:
    """The header's fields, or why the file is not a ring."""
    if len(data) < HEADER.size + 4:
        return None, f"{len(data)} bytes: shorter than a ring header"
    if data[:8] != MAGIC:
        return None, "not a faultkit ring (bad magic)"
    fixed = data[:HEADER.size]
    magic, ver, recsz, cap, head, pid, mono, wall, boot, producer = HEADER.unpack(fixed)
    (crc,) = struct.unpack_from("<I", data, HEADER_CRC_AT)
    if crc != header_crc(fixed):
        return None, "the ring header's checksum does not match: header damaged"
    if ver != VERSION or recsz != RECORD_BYTES:
        return None, f"ring version {ver} with {recsz}-byte records: not readable by this faultkit"
    return {"capacity": cap, "head": head, "pid": pid, "monotonic_ns": mono, "wall_ns": wall, "boottime_ns": boot,
            "producer": producer.rstrip(b"\x00").decode(errors="replace")}, None


def read_records(data: bytes, capacity: int) -> tuple[list[tuple], int]:
    """Every whole record in sequence order, as RECORD tuples; and how many slots held a torn or
    misplaced record (dropped). Slots never written (all zero) are neither."""
    out = []
    torn = 0
    n = min(capacity, max(0, (len(data) - HEADER_BYTES) // RECORD_BYTES))
    for i in range(n):
        at = HEADER_BYTES + i * RECORD_BYTES
        rec = data[at:at + RECORD_BYTES]
        seq, crc = struct.unpack_from("<QI", rec)
        if seq == 0 and crc == 0 and not any(rec):
            continue
        if crc != crc_of(rec) or seq == 0 or (seq - 1) % capacity != i:
            torn += 1
            continue
        out.append(RECORD.unpack(rec))
    out.sort(key=lambda r: r[0])
    return out, torn


def cut(data: bytes) -> tuple[bytes, int, int]:
    """The ring with what bears on a reading of it and nothing else: its header and every whole
    record, each in its own slot, the slots never written after the last record left off. A ring is
    allocated in full (64 MiB on the H200) and mostly never written; the cut reads back as the same
    ring (read_records reads a short file as far as it goes; the header, its capacity and clock
    anchors are unchanged, so every record keeps its slot and its time). A torn record is zeroed (the
    reader would drop it anyway). Returns the bytes, the records kept and the torn ones dropped;
    raises ValueError on a file that is not a ring."""
    head, problem = read_header(data)
    if head is None:
        raise ValueError(problem or "not a ring")
    cap = head["capacity"]
    recs, torn = read_records(data, cap)
    slots = [(r[0] - 1) % cap for r in recs]
    out = bytearray(data[:HEADER_BYTES]) + bytearray((max(slots) + 1 if slots else 0) * RECORD_BYTES)
    for i in slots:
        at = HEADER_BYTES + i * RECORD_BYTES
        out[at:at + RECORD_BYTES] = data[at:at + RECORD_BYTES]
    return bytes(out), len(recs), torn
