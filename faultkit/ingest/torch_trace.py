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
    base = int(doc.get("baseTimeNanoseconds", 0) or 0) if isinstance(doc, dict) else 0
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else []
    kern, copies, api, allocs = [], [], [], []

    def ns(us) -> int:
        return int(round(float(us) * 1000)) + base
    for ev in events:
        if not isinstance(ev, dict):
            continue
        cat, args = str(ev.get("cat", "")).lower(), ev.get("args", {}) or {}
        if ev.get("ph") == "X" and "ts" in ev:
            start = ns(ev["ts"])
            end = start + int(round(float(ev.get("dur", 0)) * 1000))
            corr = int(args.get("correlation", MISSING))
            if cat == "kernel":
                grid, block = args.get("grid", [MISSING] * 3), args.get("block", [MISSING] * 3)
                dev = int(args.get("device", ev.get("pid", MISSING)))
                kern.append({"pid": int(args.get("pid", MISSING)), "agent": str(dev), "agent_node": dev,
                             "queue": MISSING, "stream": int(args.get("stream", ev.get("tid", MISSING))),
                             "kernel": ev.get("name"), "correlation_id": corr, "start": start, "end": end,
                             "grid_x": grid[0], "grid_y": grid[1], "grid_z": grid[2],
                             "wg_x": block[0], "wg_y": block[1], "wg_z": block[2],
                             "lds": int(args.get("shared memory", MISSING)),
                             "vgpr": int(args.get("registers per thread", MISSING))})
            elif cat in ("gpu_memcpy", "gpu_memset"):
                dev = int(args.get("device", ev.get("pid", MISSING)))
                copies.append({"pid": int(args.get("pid", MISSING)), "direction": ev.get("name"), "dst_agent": str(dev),
                               "dst_node": dev, "stream": int(args.get("stream", ev.get("tid", MISSING))),
                               "correlation_id": corr, "start": start, "end": end,
                               "bytes": int(args.get("bytes", MISSING))})
            elif cat in RUNTIME_CATS:
                api.append({"pid": int(ev.get("pid", MISSING)), "thread": int(ev.get("tid", MISSING)),
                            "domain": cat, "function": ev.get("name"), "correlation_id": corr,
                            "start": start, "end": end})
        elif ev.get("name") == "[memory]" and "Addr" in args:
            nbytes = int(args.get("Bytes", 0))
            allocs.append({"pid": int(ev.get("pid", MISSING)), "operation": "ALLOCATE" if nbytes > 0 else "FREE",
                           "agent": str(args.get("Device Id", "")), "address": int(args["Addr"]), "size": abs(nbytes),
                           "correlation_id": MISSING, "start": ns(ev.get("ts", 0)), "end": ns(ev.get("ts", 0))})
    for table, rows in (("dispatches", kern), ("copies", copies), ("api", api), ("allocations", allocs)):
        trace.add(table, conform(pd.DataFrame(rows), table))
    trace.clock = "wall-ns"
    trace.files.append({"path": name, "table": "all", "rows": len(kern), "format": "pytorch-profiler",
                        "state": "complete"})
