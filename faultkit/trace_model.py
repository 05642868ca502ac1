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
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in SCHEMAS[table].items()})


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
                setattr(self, table, df.sort_values("start", kind="stable").reset_index(drop=True))
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
        if dtype == I64 and s.dtype == np.int64:
            out[col] = s.to_numpy()
        elif dtype == I64:
            if s.dtype == object:
                s = pd.to_numeric(s.astype(str).str.replace('"', "", regex=False).str.strip(), errors="coerce")
            out[col] = s.fillna(MISSING).astype(np.int64).to_numpy()
        elif isinstance(s.dtype, pd.CategoricalDtype):
            out[col] = s.reset_index(drop=True)
        else:
            out[col] = s.to_numpy(dtype=object)
    return pd.DataFrame(out, copy=False)       # columns as they are: no copy into 2-D blocks


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
    trace.dispatches = d.assign(agent_node=node)
