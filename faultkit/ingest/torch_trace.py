"""Read the PyTorch profiler's Chrome-trace JSON (Kineto) into the same tables as rocprofv3.

Kineto writes `traceEvents`: complete events (`ph: "X"`, `ts`/`dur` in microseconds) with
categories `kernel`, `gpu_memcpy`, `gpu_memset` on the GPU side and `cuda_runtime`/`cuda_driver`
(or `hip_runtime`) launch calls on the host side, joined by `args.correlation`; `[memory]` instant
events carry allocations (`Bytes` > 0) and frees (`Bytes` < 0) with `Addr`. Its clock is the wall
clock (microseconds since the epoch, `baseTimeNanoseconds` added where the file gives it). A fault
usually keeps the file from being written at all (the profiler's exit synchronizes and raises),
so a missing or cut file is expected and said plainly.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..model import Problem
from ..trace_model import MISSING, Trace, conform
from .rocprof import load_json

RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "hip_runtime", "hip_driver", "runtime"}


def looks_like_torch_trace(head: bytes) -> bool:
    return b'"traceEvents"' in head and (b'"schemaVersion"' in head or b'"deviceProperties"' in head
                                        or b'"traceName"' in head or b'"displayTimeUnit"' in head
                                        or b'"ph"' in head)


def read_torch_trace(path: Path, trace: Trace) -> None:
    name = str(path)
    doc = load_json(path, trace, "a PyTorch profiler trace; after a GPU fault the profiler usually never writes it")
    if doc is None:
        return
    try:
        base = _i(doc.get("baseTimeNanoseconds", 0) or 0) if isinstance(doc, dict) else 0
    except (ValueError, TypeError, OverflowError):
        base = 0
        trace.problems.append(Problem(name, "baseTimeNanoseconds is not a number: times read as given"))
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else []
    if not isinstance(events, list):
        trace.problems.append(Problem(name, f"traceEvents is {type(events).__name__}, not a list: no events read"))
        events = []
    kern, copies, api, allocs = [], [], [], []

    def ns(us) -> int:
        return _i(round(float(us) * 1000)) + base
    skipped = 0
    for ev in events:
        if not isinstance(ev, dict):
            continue
        try:
            _event(ev, ns, kern, copies, api, allocs)
        except (ValueError, TypeError, OverflowError, IndexError, KeyError, AttributeError):
            skipped += 1              # a field of the wrong type: this event only
    if skipped:
        trace.problems.append(Problem(name, f"{skipped} trace event(s) with unreadable fields skipped"))
    for table, rows in (("dispatches", kern), ("copies", copies), ("api", api), ("allocations", allocs)):
        trace.add(table, conform(pd.DataFrame(rows), table))
    trace.clock = "wall-ns"
    trace.files.append({"path": name, "table": "all", "rows": len(kern), "format": "pytorch-profiler",
                        "state": "complete"})


def _name(ev: dict) -> str:
    name = ev.get("name")
    return name if isinstance(name, str) and name else "(unnamed in the trace)"


def _event(ev: dict, ns, kern: list, copies: list, api: list, allocs: list) -> None:
    cat, args = str(ev.get("cat", "")).lower(), ev.get("args", {}) or {}
    if ev.get("ph") == "X" and "ts" in ev:
        start = ns(ev["ts"])
        end = start + _i(round(float(ev.get("dur", 0)) * 1000))
        corr = _i(args.get("correlation", MISSING))
        if cat == "kernel":
            grid, block = args.get("grid", [MISSING] * 3), args.get("block", [MISSING] * 3)
            dev = _i(args.get("device", ev.get("pid", MISSING)))
            kern.append({"pid": _i(args.get("pid", MISSING)), "agent": str(dev), "agent_node": dev,
                         "queue": MISSING, "stream": _i(args.get("stream", ev.get("tid", MISSING))),
                         "kernel": _name(ev), "correlation_id": corr, "start": start, "end": end,
                         "grid_x": grid[0], "grid_y": grid[1], "grid_z": grid[2],
                         "wg_x": block[0], "wg_y": block[1], "wg_z": block[2],
                         "lds": _i(args.get("shared memory", MISSING)),
                         "vgpr": _i(args.get("registers per thread", MISSING))})
        elif cat in ("gpu_memcpy", "gpu_memset"):
            dev = _i(args.get("device", ev.get("pid", MISSING)))
            copies.append({"pid": _i(args.get("pid", MISSING)), "direction": _name(ev), "dst_agent": str(dev),
                           "dst_node": dev, "stream": _i(args.get("stream", ev.get("tid", MISSING))),
                           "correlation_id": corr, "start": start, "end": end,
                           "bytes": _i(args.get("bytes", MISSING))})
        elif cat in RUNTIME_CATS:
            api.append({"pid": _i(ev.get("pid", MISSING)), "thread": _i(ev.get("tid", MISSING)),
                        "domain": cat, "function": _name(ev), "correlation_id": corr,
                        "start": start, "end": end})
    elif ev.get("name") == "[memory]" and "Addr" in args:
        nbytes = _i(args.get("Bytes", 0))
        allocs.append({"pid": _i(ev.get("pid", MISSING)), "operation": "ALLOCATE" if nbytes > 0 else "FREE",
                       "agent": str(args.get("Device Id", "")), "address": _i(args["Addr"]), "size": abs(nbytes),
                       "correlation_id": MISSING, "start": ns(ev.get("ts", 0)), "end": ns(ev.get("ts", 0))})


def _i(value) -> int:
    """An int64, or ValueError: a trace value outside it is damage, not a number to carry on."""
    n = int(value)
    if not -(1 << 63) <= n < (1 << 63):
        raise ValueError(f"{n} is outside int64")
    return n
