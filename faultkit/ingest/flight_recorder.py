"""PyTorch's flight recorder dumps and watchdog lines -> each rank's collectives.

The flight recorder (`TORCH_NCCL_TRACE_BUFFER_SIZE` > 0) keeps the last collectives of every rank
and writes them on a timeout to `TORCH_NCCL_DEBUG_INFO_TEMP_FILE<rank>` (default
/tmp/nccl_trace_rank_<rank>): a pickle of plain dicts and lists made by torch's C++ pickler
(torch/csrc/distributed/c10d/FlightRecorder.hpp: `version`, `pg_config`, `entries`, each entry
with `collective_seq_id`, `p2p_seq_id`, `is_p2p`, `profiling_name`, `state`, `process_group`).
The rank is the number the file name ends with, as torch's own analyzer reads it
(torch/distributed/flight_recorder/components/loader.py).

A pickle can run code: this reader never imports a class it is asked for. It accepts the few
list builders torch's pickler names for typed lists (read as plain lists) and refuses anything
else, with a message.
"""

from __future__ import annotations

import io
import json
import pickle
import re

from dataclasses import replace

from ..hang_model import CollectiveEntry, RankCollectives, StackFrame, WatchdogWords
from ..limits import fits_int, short_text, small_int
from .runtime_log import COLLECTIVE_TIMEOUT, DUMP_SIGNAL, WATCHDOG_WORK, WORKER_TAG, pg_name

# torch::jit::Pickler writes typed lists through these (pushSpecializedList); each is a list.
TORCH_LIST_BUILDERS = frozenset({"build_intlist", "build_doublelist", "build_boollist", "build_tensorlist",
                                 "build_complexlist"})
RANK_SUFFIX = re.compile(r"(?<!\d)(\d{1,9})$")
MAX_DUMP_BYTES = 512 << 20


class _Refused(Exception):
    pass


def _as_list(*args):
    return list(args[0]) if len(args) == 1 and isinstance(args[0], (list, tuple)) else list(args)


def _restore_type_tag(value, _type_str=None):
    return value


# What unpickling or decoding damaged bytes raises (pickle's machine: a bad opcode, a cut stream, a
# memo or stack index out of range, a wrong argument type); anything else is a bug of this reader.
DAMAGED = (pickle.UnpicklingError, EOFError, ValueError, KeyError, IndexError, TypeError, AttributeError,
           UnicodeDecodeError, OverflowError, RecursionError, MemoryError)


class SafeUnpickler(pickle.Unpickler):
    """Plain data only: the torch list builders become `list`, anything else is refused."""

    def find_class(self, module: str, name: str):
        if module == "torch.jit._pickle" and name in TORCH_LIST_BUILDERS:
            return _as_list
        if module == "torch.jit._pickle" and name == "restore_type_tag":
            return _restore_type_tag
        if module in ("collections", "builtins") and name == "OrderedDict":
            return dict
        raise _Refused(f"{module}.{name}")

    def persistent_load(self, pid):          # tensors by reference: not in a flight record
        raise _Refused(f"persistent id {pid!r}")


def looks_like_flight_record(head: bytes) -> bool:
    """A pickle (protocol 2+) or torch's JSON dump (`_dump_fr_trace_json`) that names the flight
    recorder's keys in its first bytes (`version` and `pg_config` come first in the pickle,
    `comm_lib_version` and `entries` in the JSON)."""
    if head[:1] == b"\x80":
        return b"pg_config" in head or b"entries" in head
    return head.lstrip()[:1] == b"{" and (b'"entries"' in head or b'"comm_lib_version"' in head
                                          or b'"pg_config"' in head)


def parse_flight_record(data: bytes, name: str) -> RankCollectives:
    m = RANK_SUFFIX.search(name.rsplit("/", 1)[-1])
    out = RankCollectives(rank=int(m.group(1)) if m else None, source=name)
    if out.rank is None:
        out.problems.append(f"{name}: the file name does not end with the rank (torch writes <prefix><rank>)")
    if len(data) > MAX_DUMP_BYTES:
        out.problems.append(f"{name}: {len(data):,} bytes, more than a flight record holds; not read")
        return out
    try:
        dump = json.loads(data) if data.lstrip()[:1] == b"{" else SafeUnpickler(io.BytesIO(data)).load()
    except _Refused as exc:
        out.problems.append(f"{name}: not read: the pickle asks for {exc} (only plain data is read from a flight "
                            f"record, never code)")
        return out
    except DAMAGED as exc:                   # what pickle and json raise on damaged bytes: a message, not a crash
        out.problems.append(f"{name}: not a readable flight record ({type(exc).__name__}: {exc})")
        return out
    except Exception as exc:                 # noqa: BLE001 - the reader's own bug: kept apart, never a traceback
        out.internal.append(f"{name}: internal reader error ({exc!r}); the record is left out")
        return out
    if not isinstance(dump, dict):
        out.problems.append(f"{name}: a pickle, but not a flight record (no dict at its top)")
        return out
    out.version = short_text(dump.get("version"), 64)
    if out.version is None and dump.get("version") is not None:
        out.problems.append(f"{name}: `version` is {_kind(dump.get('version'))}, not text (left out)")
    entries = dump.get("entries")
    if not isinstance(entries, list):
        out.problems.append(f"{name}: no `entries` list (version {out.version})")
        return out
    untyped: dict[str, list] = {}      # text field -> [entries where it is not text, the first one's type]
    for k, e in enumerate(entries, 1):
        entry = _entry(e)
        if entry is not None:
            out.entries.append(entry)
            # a text field of another type (a hostile or damaged dump): said, its value never str()'d
            for f in TEXT_FIELDS:
                if _named(e, f) is not None and _text_of(e, f) is None:
                    untyped.setdefault(f, [0, k, _kind(_named(e, f))])[0] += 1
        else:
            out.problems.append(f"{name}: an entry without its sequence number or state was skipped")
    out.problems += [f"{name}: `{f}` is not text in {n} entr{'y' if n == 1 else 'ies'} (entry {k}: {kind}); "
                     f"read as '?'" for f, (n, k, kind) in untyped.items()]
    return out


TEXT_FIELDS = ("profiling_name", "process_group")


def _kind(v) -> str:
    """A value's type in words, for a message (never its text: see _entry)."""
    return {list: "a list", tuple: "a list", dict: "a dict", bytes: "bytes"}.get(type(v), f"a {type(v).__name__}")


def _named(e: dict, f: str):
    """The value of a text field; of `process_group`, its name ((name, description) in the
    versions that have it)."""
    v = e.get(f)
    return v[0] if f == "process_group" and isinstance(v, (list, tuple)) and v else v


def _text_of(e: dict, f: str) -> str | None:
    return short_text(_named(e, f), 200)


def _entry(e) -> CollectiveEntry | None:
    if not isinstance(e, dict):
        return None
    p2p = bool(e.get("is_p2p"))
    seq = e.get("p2p_seq_id" if p2p else "collective_seq_id")
    state = e.get("state")
    # every field typed and bounded before use: never str() of a container (shared references
    # in a pickle make a few KB of it gigabytes of text), never an int past 64 bits
    if not fits_int(seq) or not isinstance(state, str):
        return None
    # the process group's name where the version has one; the numeric pg_id in older ones
    pg_name = _text_of(e, "process_group") if e.get("process_group") is not None else short_text(e.get("pg_id", "?"), 200)
    return CollectiveEntry(pg=pg_name or "?", seq=seq, op=_text_of(e, "profiling_name") or "?",
                           state=state[:64], p2p=p2p)


# What a rank's watchdog prints after its timeout line (ProcessGroupNCCL.cpp, 2.4+): the dump it asks
# for (runtime_log.DUMP_SIGNAL), and the collective's Python call as its flight recorder kept it
# (WorkNCCL::printTraceback: `Stack trace of the failed collective: ` then `#K function from file:line`
# lines), or that it kept none.
FAILED_CALL = re.compile(r"Stack trace of the failed collective: *\n(?P<frames>(?:#\d+ [^\n]*\n?)+)")
CALL_FRAME = re.compile(r"^#\d+ (?P<func>\S+) from (?P<file>.+?):(?P<line>\d+)\s*$", re.M)
RECORDER_OFF = "Stack trace of the failed collective not found"


def watchdog_collectives(text: str, name: str) -> list[RankCollectives]:
    """PyTorch's watchdog lines: `[Rank 3] Watchdog caught collective operation timeout:
    WorkNCCL(SeqNum=721, OpType=ALLREDUCE, ...) ran for 600000 milliseconds`: the rank, the
    collective it was still in when its watchdog gave up, and what the watchdog printed beside it.
    Lines that name no rank (the failed collective's stack) are a rank's only where one rank timed out."""
    out: dict[int, RankCollectives] = {}
    for m in COLLECTIVE_TIMEOUT.finditer(text):
        rank, seq = small_int(m.group("rank")), small_int(m.group("seq"))
        if rank is None or seq is None:          # a number past 64 bits: damaged or hostile, not a rank
            continue
        rc = out.setdefault(rank, RankCollectives(rank=rank, source=name, timed_out=True))
        rc.entries.append(CollectiveEntry(pg="?", seq=seq, op=m.group("op").lower(), state="started",
                                          numel_in=small_int(m.group("numel_in")),
                                          numel_out=small_int(m.group("numel_out")),
                                          timeout_ms=small_int(m.group("timeout")), ran_ms=small_int(m.group("ms"))))
        if rc.watchdog is None:
            start = text.rfind("\n", 0, m.start()) + 1
            tag = WORKER_TAG.match(text, start)
            line = text.count("\n", 0, m.start()) + 1
            if getattr(text, "stretches", None):       # an excerpt's lines keep the file's numbers
                line = text.line_no(line - 1)[0]
            rc.watchdog = WatchdogWords(f"{name}:{line}", pid=small_int(tag.group("pid")) if tag else None)
    for rc in out.values():
        _watchdog_words(rc, text, alone=len(out) == 1)
    return list(out.values())


def _watchdog_words(rc: RankCollectives, text: str, alone: bool) -> None:
    """The rank's own lines about its timed-out collective (its number in their prefix), and, where
    it is the only rank, the lines without one."""
    seq = rc.entries[0].seq
    w = rc.watchdog
    fields: dict = {}
    for m in WATCHDOG_WORK.finditer(text):
        if small_int(m.group("rank")) in (rc.rank, None) and small_int(m.group("work")) == seq:
            fields.update(process_group=pg_name(m), last_enqueued=small_int(m.group("enq")),
                          last_completed=small_int(m.group("done")))
            break
    for m in DUMP_SIGNAL.finditer(text):
        if small_int(m.group("rank")) in (rc.rank, None):
            fields["dump_from"] = m.group("whom")
            fields.setdefault("process_group", pg_name(m))
            break
    if alone:
        fields["recorder_off"] = RECORDER_OFF in text
        m = FAILED_CALL.search(text)
        if m:
            fields["call"] = [StackFrame(f["func"], f["file"].strip(), small_int(f["line"]))
                              for f in CALL_FRAME.finditer(m.group("frames"))]
    rc.watchdog = replace(w, **{k: v for k, v in fields.items() if v is not None})
