"""The trace model: five tables with fixed schemas that every trace reader fills.

Traces have millions of rows, so the records are columns (pandas DataFrames with exactly the
columns in SCHEMAS), not objects. rocprofv3 (CSV, JSON, rocpd) and PyTorch profiler readers fill
a `Trace`; the analyses and the timeline read it and never import a reader.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .model import Problem

I64 = "int64"
SCHEMAS: dict[str, dict[str, str]] = {
    "dispatches": {"pid": I64, "agent": "object", "agent_node": I64, "queue": I64, "stream": I64, "thread": I64,
                   "dispatch_id": I64, "kernel_id": I64, "kernel": "object", "correlation_id": I64, "start": I64,
                   "end": I64, "grid_x": I64, "grid_y": I64, "grid_z": I64, "wg_x": I64, "wg_y": I64, "wg_z": I64,
                   "lds": I64, "scratch": I64, "vgpr": I64, "sgpr": I64},
    "copies": {"pid": I64, "direction": "object", "src_agent": "object", "dst_agent": "object", "dst_node": I64,
               "stream": I64, "correlation_id": I64, "start": I64, "end": I64, "bytes": I64},
    "allocations": {"pid": I64, "operation": "object", "agent": "object", "address": I64, "size": I64,
                    "correlation_id": I64, "start": I64, "end": I64},
    "api": {"pid": I64, "thread": I64, "domain": "object", "function": "object", "correlation_id": I64,
            "start": I64, "end": I64},
    "agents": {"pid": I64, "node_id": I64, "logical_id": I64, "type": "object", "name": "object", "gfx": "object"},
}
MISSING = -1

AGENT_LABEL = re.compile(r"^(?:(Agent|GPU|CPU|UNK) )?(\d+)$")


def empty(table: str) -> pd.DataFrame:
    # zero-length arrays, not typed Series: the same frame (columns, dtypes, RangeIndex) at a sixth of
    # the cost; every Trace starts with five of them (a small trace's triage made ~10 per read)
    return pd.DataFrame({c: np.empty(0, dtype=t) for c, t in SCHEMAS[table].items()})


@dataclass
class Trace:
    """Everything read from one or more rocprofv3 (or PyTorch profiler) outputs."""
    dispatches: pd.DataFrame = field(default_factory=lambda: empty("dispatches"))
    copies: pd.DataFrame = field(default_factory=lambda: empty("copies"))
    allocations: pd.DataFrame = field(default_factory=lambda: empty("allocations"))
    api: pd.DataFrame = field(default_factory=lambda: empty("api"))
    agents: pd.DataFrame = field(default_factory=lambda: empty("agents"))
    files: list[dict] = field(default_factory=list)      # path, table, rows, format, version hint, state
    problems: list[Problem] = field(default_factory=list)
    clock: str = "boottime-ns"

    def add(self, table: str, df: pd.DataFrame) -> None:
        if len(df):
            setattr(self, table, pd.concat([getattr(self, table), df], ignore_index=True)
                    if len(getattr(self, table)) else df)

    def finish(self) -> "Trace":
        for table in ("dispatches", "copies", "allocations", "api"):
            df = getattr(self, table)
            if len(df):
                # a record that ends before it starts, or at a negative time, is damage: the
                # analyses and the timeline would draw it across the whole trace
                bad = (df["start"].to_numpy() < 0) | (df["end"].to_numpy() < df["start"].to_numpy())
                if bad.any():
                    self.problems.append(Problem("<trace>", f"{int(bad.sum())} {table} record(s) whose times are out "
                                                            f"of range (negative, or ending before they start) left out"))
                    df = df[~bad]
                start = df["start"].to_numpy()
                if len(start) > 1 and (start[1:] < start[:-1]).any():
                    df = df.sort_values("start", kind="stable")
                # already in order (most traces): no sort, which copied every column of millions of rows
                setattr(self, table, df.reset_index(drop=True) if not isinstance(df.index, pd.RangeIndex)
                        or df.index.start != 0 or df.index.step != 1 else df)
        resolve_agents(self)
        return self

    @property
    def empty(self) -> bool:
        return not any(len(getattr(self, t)) for t in ("dispatches", "copies", "allocations", "api"))


def conform(df: pd.DataFrame, table: str) -> pd.DataFrame:
    """Exactly the schema's columns and dtypes; absent ones filled with MISSING / None."""
    out = {}
    n = len(df)
    for col, dtype in SCHEMAS[table].items():
        if col not in df:
            out[col] = np.full(n, MISSING, dtype=np.int64) if dtype == I64 else np.full(n, None, dtype=object)
            continue
        s = df[col]
        if dtype == I64:
            out[col] = int64_cells(s)
        elif isinstance(s.dtype, pd.CategoricalDtype):
            out[col] = s.reset_index(drop=True)
        else:
            out[col] = text_cells(s)
    return pd.DataFrame(out, copy=False)       # columns as they are: no copy into 2-D blocks


INT64_MIN, INT64_END = -(1 << 63), 1 << 63


def int64_cells(s: pd.Series) -> np.ndarray:
    """A column as int64: a cell that is not an integer in int64's range (text, a float, inf, a
    number >= 2**63, a list) reads as MISSING rather than stopping the read."""
    if s.dtype == np.int64:
        return s.to_numpy()
    if s.dtype == object or not (pd.api.types.is_numeric_dtype(s) or pd.api.types.is_bool_dtype(s)):
        s = pd.to_numeric(_as_text(s).str.replace('"', "", regex=False).str.strip(), errors="coerce")
    a = s.to_numpy()
    if a.dtype.kind == "b":
        return a.astype(np.int64)
    if a.dtype.kind == "i":
        return a.astype(np.int64)
    out = np.full(len(a), MISSING, dtype=np.int64)
    if a.dtype.kind == "u":
        ok = a < np.uint64(INT64_END)
        out[ok] = a[ok].astype(np.int64)
        return out
    a = a.astype(np.float64)
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(a) & (a >= INT64_MIN) & (a < INT64_END) & (a == np.floor(a))
    out[ok] = a[ok].astype(np.int64)
    return out


def _as_text(s: pd.Series) -> pd.Series:
    """str of each cell; bytes (a BLOB from SQLite) decoded, never raising on bad UTF-8."""
    if pd.api.types.infer_dtype(s, skipna=True) in ("string", "empty", "integer", "floating", "mixed-integer-float"):
        return s.astype(str)
    return s.map(lambda v: v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v))


def labels(s: pd.Series) -> pd.Series:
    """An agent column as the text labels the tables use."""
    return _as_text(s)


def text_cells(s: pd.Series) -> np.ndarray:
    """A column of names as str or None (a BLOB name from SQLite, a number where a name belongs)."""
    a = s.to_numpy(dtype=object)
    if pd.api.types.infer_dtype(a, skipna=True) not in ("string", "empty"):
        a = np.array([v if v is None or isinstance(v, str) else v.decode("utf-8", "replace")
                      if isinstance(v, bytes) else None if isinstance(v, float) and v != v else str(v)
                      for v in a], dtype=object)
    return a


def resolve_agents(trace: Trace) -> None:
    """`Memory access fault by GPU node-N` names the KFD node (agent_info Node_Id). 6.x CSVs print
    that node id; 7.x prints `Agent N` with N the logical index unless run with `-A absolute`."""
    d = trace.dispatches
    if not len(d):
        return
    logical_to_node = {}
    if len(trace.agents):
        logical_to_node = dict(zip(trace.agents["logical_id"], trace.agents["node_id"]))
    node = d["agent_node"].to_numpy().copy()
    labels = d["agent"].astype("category")
    codes = labels.cat.codes.to_numpy()
    per_label, logical_seen = [], False
    for label in labels.cat.categories:
        m = AGENT_LABEL.match(str(label))
        if not m:
            per_label.append(MISSING)
        elif len(m.group(2)) > 18:
            per_label.append(MISSING)            # not an id int64 can hold (a damaged cell)
        elif m.group(1):          # 7.x 'Agent N': a logical index
            logical_seen = True
            per_label.append(int(logical_to_node.get(int(m.group(2)), MISSING)))
        else:                     # 6.x: the KFD node id itself
            per_label.append(int(m.group(2)))
    lookup = np.array(per_label + [MISSING], dtype=np.int64)
    unknown = node == MISSING
    node[unknown] = lookup[codes[unknown]]          # code -1 (NaN) lands on the trailing MISSING
    if logical_seen and not logical_to_node:
        trace.problems.append(Problem("<trace>", "7.x 'Agent N' ids are logical indexes and no agent_info was "
                                                 "found to map them to KFD node ids; GPU node-N matching is off"))
    if (node != d["agent_node"].to_numpy()).any():
        d = d.copy(deep=False)            # one column replaced; assign() copied every column
        d["agent_node"] = node
        trace.dispatches = d
