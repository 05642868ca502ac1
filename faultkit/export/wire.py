"""Protocol-buffer wire format, decoded in bulk: the fields of many messages at once, with numpy.

Decoding a million small messages through Python objects costs microseconds each; here every
message of a batch advances by one field per step (tag, then value), so the work is a few numpy
operations per field position, whatever the number of messages. The caller's schema names the
fields it reads (number and wire type); any other field is stepped over and marks its message, so
the caller can hand that message to a full decoder. Anything malformed raises `Malformed`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

VARINT, I64, LEN, I32 = 0, 1, 2, 5


class Malformed(ValueError):
    pass


def varints(buf: np.ndarray, pos: np.ndarray, limit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The varints starting at `pos` (each must end by `limit`): values and the positions after."""
    if not len(pos):
        return np.zeros(0, np.uint64), pos
    if int(pos.max()) >= len(buf):
        raise Malformed("a field runs past its message")
    b = buf[pos]
    more = np.flatnonzero(b >= 0x80)
    val = (b & 0x7F).astype(np.uint64) if len(more) else b.astype(np.uint64)
    after = pos + 1
    shift = 7
    while len(more):
        if shift > 63:
            raise Malformed("a varint longer than ten bytes")
        q = after[more]
        if int(q.max()) >= len(buf):
            raise Malformed("a varint runs past its message")
        b = buf[q]
        val[more] |= (b & 0x7F).astype(np.uint64) << np.uint64(shift)
        after[more] = q + 1
        more = more[b >= 0x80]
        shift += 7
    if (after > limit).any():
        raise Malformed("a varint runs past its message")
    return val, after


@dataclass
class Field:
    """How a schema reads one field: its wire type, whether it may occur more than once, and
    whether its values are wanted (a field no rule reads is only stepped over)."""
    wire: int
    repeated: bool = False
    read: bool = True


@dataclass
class Decoded:
    """What `decode` read from n messages. `odd[i]`: message i holds a field the schema does not
    name (or names with another wire type), or a singular field more than once. Singular fields:
    `value[f]` (varint or fixed; 0 when absent), `has[f]`, and `lo[f]`/`hi[f]` for a
    length-delimited one. Repeated fields: `rows[f]` = (owner, value, lo, hi), step by step (every
    message's first occurrence, then every second one...), so one message's rows keep their order."""
    odd: np.ndarray
    value: dict[int, np.ndarray]
    has: dict[int, np.ndarray]
    lo: dict[int, np.ndarray]
    hi: dict[int, np.ndarray]
    rows: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]


_VALID_WIRE = np.zeros(8, bool)
_VALID_WIRE[[VARINT, I64, LEN, I32]] = True
_TAGS = 1 << 14                    # tags of field numbers below 2048: those a schema may name


def decode(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, schema: dict[int, Field]) -> Decoded:
    """The fields `schema` names of the messages buf[starts[i]:ends[i]]; every other field is
    stepped over (its wire format checked) and marks its message odd."""
    n = len(starts)
    kinds = list(schema.items())
    lut = np.full(_TAGS, -1, np.int16)
    for k, (number, f) in enumerate(kinds):
        lut[number << 3 | f.wire] = k
    single = [(number, f) for number, f in kinds if not f.repeated and f.read]
    out = Decoded(np.zeros(n, bool), {f: np.zeros(n, np.uint64) for f, _ in single},
                  {f: np.zeros(n, bool) for f, _ in single}, {}, {}, {})
    for number, f in single:
        if f.wire == LEN:
            out.lo[number], out.hi[number] = np.zeros(n, np.int64), np.zeros(n, np.int64)
    found: dict[int, list] = {number: [] for number, f in kinds if f.repeated and f.read}
    pos = np.asarray(starts, np.int64).copy()
    ends = np.asarray(ends, np.int64)
    active = np.flatnonzero(pos < ends)
    while len(active):
        every = len(active) == n              # no gathers while every message still has fields
        p, e = (pos, ends) if every else (pos[active], ends[active])
        first = buf[p]
        if first[0] < 0x80 and (first == first[0]).all():
            # the same one-byte tag in every message here (the usual case: same-shaped messages)
            tag, after, same = np.uint64(first[0]), p + 1, True
            wire = np.full(1, int(first[0]) & 7, np.int8)
        else:
            tag, after = varints(buf, p, e)
            wire, same = (tag & np.uint64(7)).astype(np.int8), False
        if not _VALID_WIRE[wire].all() or (tag >> np.uint64(3) == 0).any():
            raise Malformed("a group, an unknown wire type or field number 0")
        value = np.zeros(len(p), np.uint64)
        lo, hi = after, after.copy()
        for wt in ((int(wire[0]),) if same else (VARINT, I64, LEN, I32)):
            w = slice(None) if same else np.flatnonzero(wire == wt)
            at = after[w]
            if not len(at):
                continue
            if wt == VARINT:
                value[w], hi[w] = varints(buf, at, e[w])
            elif wt == LEN:
                size, start = varints(buf, at, e[w])
                if (size > np.uint64(1 << 40)).any():
                    raise Malformed("a length-delimited field longer than a terabyte")
                lo = lo.copy() if lo is after else lo
                lo[w] = start
                hi[w] = start + size.astype(np.int64)
            else:
                size = 8 if wt == I64 else 4
                hi[w] = at + size
                if int(hi[w].max()) > len(buf):
                    raise Malformed("a fixed-size field runs past its message")
                value[w] = buf[at[:, None] + np.arange(size)].copy().view("<u8" if size == 8 else "<u4")[:, 0]
        if (hi > e).any():
            raise Malformed("a field runs past its message")
        kind = lut[np.minimum(tag, _TAGS - 1)] if not same else np.int16(lut[min(int(tag), _TAGS - 1)])
        for k in (np.unique(kind).tolist() if not same else [int(kind)]):
            sel = slice(None) if same else np.flatnonzero(kind == k)
            owners = active[sel]
            if k < 0:
                out.odd[owners] = True
                continue
            number, f = kinds[k]
            if not f.read:
                continue
            if f.repeated:
                found[number].append((owners, value[sel], lo[sel], hi[sel]))
                continue
            again = out.has[number][owners]
            if again.any():
                out.odd[owners[again]] = True
            out.value[number][owners] = value[sel]
            out.has[number][owners] = True
            if f.wire == LEN:
                out.lo[number][owners], out.hi[number][owners] = lo[sel], hi[sel]
        if every:
            pos = hi
        else:
            pos[active] = hi
        active = active[hi < e]
    for number, parts in found.items():
        if not parts:
            z = np.zeros(0, np.int64)
            out.rows[number] = (z, z.astype(np.uint64), z, z)
            continue
        cols = [np.concatenate(c) for c in zip(*parts)]
        out.rows[number] = tuple(cols)
    return out


SPLIT_IN_C = 256 << 20


def frames(data: bytes, number: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """The byte ranges of the length-delimited fields `number` of one message that holds many of
    them (a Trace's packets). The positions depend on each other, so they cannot be found in bulk:
    protobuf's C parser splits the message as a list of byte strings (a schema made here), whose
    lengths give the positions when nothing else is in the message; otherwise one pass in Python.
    A message over SPLIT_IN_C bytes is split in Python too: the parser would hold a copy of it."""
    if len(data) > SPLIT_IN_C:
        return _frames_slowly(data, number)
    try:
        parts = _framing(number).FromString(data).part
    except Exception:  # noqa: BLE001 - protobuf's DecodeError and others
        raise Malformed("not a message of length-delimited fields") from None
    sizes = np.fromiter(map(len, parts), np.int64, len(parts))
    tag = _varint_sizes(np.array([number << 3 | LEN]))[0]
    ends = np.cumsum(tag + _varint_sizes(sizes) + sizes)
    if (ends[-1] if len(ends) else 0) == len(data):      # canonical lengths and nothing else
        return ends - sizes, ends
    return _frames_slowly(data, number)


def _varint_sizes(v: np.ndarray) -> np.ndarray:
    size = np.ones(len(v), np.int64)
    top = int(v.max()) if len(v) else 0
    for k in range(1, 10):
        if top < 1 << (7 * k):
            break
        size += v >= (1 << (7 * k))
    return size


_FRAMINGS: dict[int, type] = {}


def _framing(number: int) -> type:
    """A message type whose field `number` is `repeated bytes` (made once per number)."""
    if number not in _FRAMINGS:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
        fdp = descriptor_pb2.FileDescriptorProto(name=f"faultkit_framing_{number}.proto", package="faultkit")
        msg = fdp.message_type.add(name=f"Framing{number}")
        msg.field.add(name="part", number=number, type=descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
                      label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED)
        pool = descriptor_pool.DescriptorPool()
        pool.Add(fdp)
        _FRAMINGS[number] = message_factory.GetMessageClass(pool.FindMessageTypeByName(f"faultkit.Framing{number}"))
    return _FRAMINGS[number]


def _varint_rest(data: bytes, p: int, first: int) -> tuple[int, int]:
    """A varint whose first byte (`first`, already read) says more follow from `p`."""
    value, shift = first & 0x7F, 7
    while True:
        b = data[p]
        p += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, p
        shift += 7
        if shift > 63:
            raise Malformed("a varint longer than ten bytes")


def _frames_slowly(data: bytes, number: int) -> tuple[np.ndarray, np.ndarray]:
    """The same, for a message with other fields among them: one pass in Python."""
    starts, ends, _, problem = _scan(data, number)
    if problem:
        raise Malformed(problem)
    return np.array(starts, np.int64), np.array(ends, np.int64)


def whole_prefix(data: bytes) -> int:
    """How many leading bytes of `data` are whole fields of one message (a cut file's readable part)."""
    return _scan(data, 1)[2]


def _scan(data: bytes, number: int) -> tuple[list[int], list[int], int, str | None]:
    """The ranges of the length-delimited fields `number`, the end of the last whole field, and why
    the scan stopped before the end (None when it did not)."""
    starts: list[int] = []
    ends: list[int] = []
    p = whole = 0
    n = len(data)
    want = (number << 3) | LEN
    try:
        while p < n:
            tag = data[p]
            p += 1
            if tag >= 0x80:
                tag, p = _varint_rest(data, p, tag)
            wt = tag & 7
            if tag >> 3 == 0:
                return starts, ends, whole, "field number 0"
            if wt == VARINT:
                q = p
                while data[p] >= 0x80:
                    p += 1
                if p - q >= 10:
                    return starts, ends, whole, "a varint longer than ten bytes"
                p += 1
            elif wt == I64 or wt == I32:
                p += 8 if wt == I64 else 4
            elif wt != LEN:
                return starts, ends, whole, "a group or an unknown wire type"
            else:
                size = data[p]
                p += 1
                if size >= 0x80:
                    size, p = _varint_rest(data, p, size)
                if tag == want and p + size <= n:
                    starts.append(p)
                    ends.append(p + size)
                p += size
            if p > n:
                break
            whole = p
    except IndexError:
        pass
    except Malformed as exc:
        return starts, ends, whole, str(exc)
    return starts, ends, whole, None if whole == n else "the message ends inside a field"
