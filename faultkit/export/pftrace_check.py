"""Check a trace faultkit wrote (or any Perfetto trace) the way the UI will read it.

A Perfetto trace is checked in bulk (`pftrace_check_bulk`) and, when that finds anything wrong or
anything it does not read, packet by packet (`pftrace_check_exact`), which names each error.
"""

from __future__ import annotations

import os
import stat

from .. import limits
from .pftrace_check_bulk import check_bulk
from .pftrace_check_exact import CheckResult, check_exact
from .wire import whole_prefix

__all__ = ["CheckResult", "check_trace", "check_json_trace", "read_trace_file", "Unreadable"]


class Unreadable(Exception):
    """A path `timeline --check` does not read, and why (one line for the user)."""


def read_trace_file(path: str) -> bytes:
    """The trace's bytes, under the same rules as triage's inputs: a regular file (not a device,
    a pipe or a kernel interface), at most limits.CHECK_FILE bytes, read in chunks."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise Unreadable(f"{path}: unreadable ({exc.strerror or exc})") from None
    if not stat.S_ISREG(st.st_mode):
        what = "a pipe" if stat.S_ISFIFO(st.st_mode) else "a device or socket"
        raise Unreadable(f"{path}: {what}, not a trace file: save the trace to a file and check that")
    if path.startswith(("/proc/", "/sys/")):
        raise Unreadable(f"{path}: a kernel interface file, not a trace")
    if st.st_size > limits.CHECK_FILE:
        raise Unreadable(f"{path}: {st.st_size:,} bytes, over the {limits.CHECK_FILE:,} a check reads")
    try:
        with open(path, "rb") as fh:
            data = limits.Capped(fh, limits.CHECK_FILE).readall()
    except OSError as exc:
        raise Unreadable(f"{path}: unreadable ({exc.strerror or exc})") from None
    return data


def check_trace(data: bytes, keep_names: bool = True, progress=None) -> CheckResult:
    """The bulk path answers for a valid trace; the packet-by-packet path names the errors of an
    invalid one (in packet order) and reads whatever the bulk path does not decode. A trace that
    does not decode is checked up to its last whole packet, where it has one."""
    res = check_bulk(data, keep_names, progress)
    if res is not None:
        return res
    if progress is not None:
        progress.stage("checking packet by packet", "packets")
    res = check_exact(data, keep_names, progress)
    if not res.packets and res.errors and res.errors[0].startswith("not a decodable"):
        # a trace cut while it was written (the writer crashed or was killed): check what is whole
        whole = whole_prefix(data)
        part = check_trace(data[:whole], keep_names, progress) if 0 < whole < len(data) else None
        if part is not None and part.packets:
            part.errors.insert(0, f"the trace is cut: its last {len(data) - whole:,} bytes are not a whole packet "
                                  f"(a writer that stopped mid-write?); the {part.packets:,} packets before them "
                                  "were checked")
            return part
    return res


def check_json_trace(data: bytes) -> CheckResult:
    """The Chrome trace-event JSON faultkit writes: every event well formed, slices with a duration,
    each flow's end matched by a start."""
    import json
    res = CheckResult()
    try:
        doc = json.loads(data)
    except RecursionError:
        res.errors.append("not a trace: JSON nested too deeply to read")
        return res
    except ValueError as exc:
        res.errors.append(f"not JSON ({exc})")
        return res
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc if isinstance(doc, list) else None
    if not isinstance(events, list):
        res.errors.append("no traceEvents list")
        return res
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    res.metadata = {str(k): str(v) for k, v in meta.items()} if isinstance(meta, dict) else {}
    starts, ends, threads = set(), set(), set()
    for i, e in enumerate(events):
        if not isinstance(e, dict) or "ph" not in e:
            res.errors.append(f"event {i}: not an object with 'ph'")
            continue
        ph = e["ph"]
        res.packets += 1
        if not isinstance(ph, str):
            res.errors.append(f"event {i}: 'ph' is {type(ph).__name__}, not a string")
            continue
        pid, tid = e.get("pid"), e.get("tid")
        if not all(v is None or isinstance(v, (int, str)) and not isinstance(v, bool) for v in (pid, tid)):
            res.errors.append(f"event {i} ({ph}): pid and tid must be numbers or strings")
            continue
        if ph == "M":
            threads.add((pid, tid))
            continue
        if not isinstance(e.get("ts"), (int, float)):
            res.errors.append(f"event {i} ({ph}): no numeric ts")
            continue
        if ph == "X":
            res.slices += 1
            if not isinstance(e.get("dur"), (int, float)) or e["dur"] < 0:
                res.errors.append(f"event {i}: slice without a non-negative dur")
        elif ph in ("i", "I"):
            res.instants += 1
        elif ph == "C":
            res.counters += 1
        elif ph in ("s", "f"):
            fid = e.get("id")
            if isinstance(fid, bool) or not isinstance(fid, (int, str)):
                res.errors.append(f"event {i} ({ph}): flow id is {type(fid).__name__}, not a number or string")
                continue
            (starts if ph == "s" else ends).add(fid)
    res.flows = len(starts & ends)
    res.tracks = len(threads)
    for fid in sorted(ends - starts, key=str)[:10]:
        res.errors.append(f"flow {fid}: ends without a start")
    return res
