"""Every trace output under the given files and folders, each by its reader, into one Trace."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..model import Problem

if TYPE_CHECKING:     # the trace model and its readers import pandas: loaded only when there are traces
    from ..trace_model import Trace


def trace_files(paths: list[str | os.PathLike]) -> list[Path]:
    out = []
    for p in map(Path, paths):
        out += sorted(x for x in p.rglob("*") if x.is_file()) if p.is_dir() else [p]
    return out


def read_trace_paths(paths: list[str | os.PathLike], since_ns: int | None = None,
                     until_ns: int | None = None) -> Trace:
    """Read every rocprofv3 output under the given files and folders. The pid of each output
    comes from its name (`<pid>_kernel_trace.csv`, `<host>/<pid>_results.db`)."""
    from ..trace_model import Trace
    trace = Trace()
    for f in trace_files(paths):
        try:
            read_trace_file(f, trace, since_ns, until_ns)
        except Exception as exc:  # noqa: BLE001 - a reader bug must not cost the other files
            trace.problems.append(Problem(str(f), f"internal reader error ({exc!r}); this file is left out",
                                          internal=True))     # a reader's bug: the never-raise tests see it
    try:
        return trace.finish()
    except Exception as exc:  # noqa: BLE001
        trace.problems.append(Problem("<trace>", f"internal reader error ({exc!r}) joining the tables", internal=True))
        return trace


def trace_end_ns(paths: list[str | os.PathLike]) -> int | None:
    from .rocprof import last_end_ns
    ends = [last_end_ns(f) for f in trace_files(paths) if f.name.endswith(("kernel_trace.csv", "api_trace.csv"))]
    ends = [e for e in ends if e is not None]
    return max(ends) if ends else None


def read_trace_file(f: Path, trace: Trace, since_ns: int | None = None, until_ns: int | None = None) -> None:
    from .rocprof import read_csv, read_json, read_rocpd
    from .torch_trace import looks_like_torch_trace, read_torch_trace
    if f.suffix == ".csv":
        if not f.name.endswith("_stats.csv") and "counter_collection" not in f.name:
            read_csv(f, trace, since_ns=since_ns, until_ns=until_ns)
    elif f.name.endswith("_results.db") or f.suffix == ".db":
        read_rocpd(f, trace)
    elif f.name.endswith("_results.json"):
        read_json(f, trace)
    elif f.suffix == ".json":
        try:
            with open(f, "rb") as fh:
                head = fh.read(4096)
        except OSError as exc:
            trace.problems.append(Problem(str(f), f"unreadable ({exc.strerror or exc})"))
            return
        if looks_like_torch_trace(head):
            read_torch_trace(f, trace)
        else:
            trace.problems.append(Problem(str(f), "JSON that is neither a PyTorch profiler trace (no traceEvents) "
                                                  "nor rocprofv3's *_results.json: not read"))
    elif f.suffix == ".dat":
        trace.problems.append(Problem(str(f), "rocprofv3 buffer residue: finalization never ran, so this "
                                              "run's trace was not written (undocumented binary format, not read)"))
