"""Work that ran at the same time on one GPU of one process in the window before the fault.

Kernels on different queues or streams of one device, and copies beside kernels, that overlap in
time are how races between producer and consumer show up; with AMD_SERIALIZE_KERNEL /
AMD_SERIALIZE_COPY / HIP_LAUNCH_BLOCKING / CUDA_LAUNCH_BLOCKING in effect there should be none.
Serialization is per process and per device: two processes, or two GPUs, always run at the same
time, and no variable could stop it, so their overlaps are not counted.

Counting is O(n log n) whatever the overlap: within one set of intervals sorted by start, the
number of earlier intervals still running when interval i starts is i minus the number that
ended by then (a binary search over the sorted ends). Pairs are listed only for the few rows
the report shows, each found with one vectorised pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..trace_model import MISSING, Trace

SERIALIZE = {"AMD_SERIALIZE_KERNEL": "kernel", "AMD_SERIALIZE_COPY": "copy", "HIP_LAUNCH_BLOCKING": "both",
             "CUDA_LAUNCH_BLOCKING": "both"}
KEEP_PAIRS = 200
PAIRS_PER_ROW = 20           # partners listed for one row (the count has them all)


@dataclass
class Overlaps:
    window_start: int | None
    window_end: int | None
    kernel_kernel: int = 0
    copy_kernel: int = 0
    pairs: list[dict] = field(default_factory=list)        # kept: involving suspects first, then the latest
    serialization: dict | None = None

    def to_json(self) -> dict:
        return {"window_start": self.window_start, "window_end": self.window_end, "kernel_kernel": self.kernel_kernel,
                "copy_kernel": self.copy_kernel, "pairs": self.pairs, "serialization": self.serialization}


def _text(s: pd.Series) -> np.ndarray:
    """`s.astype(str)` as an object array, for a categorical column through its few categories
    (the per-row conversion of a 1M-row column to Arrow strings took seconds)."""
    if isinstance(s.dtype, pd.CategoricalDtype):
        table = np.array([str(c) for c in s.cat.categories] + ["nan"], dtype=object)
        return table[s.cat.codes.to_numpy()]                # code -1 (missing) takes the last: "nan"
    return s.astype(str).to_numpy(dtype=object)


def _device(node: pd.Series, label: pd.Series) -> np.ndarray:
    """Per row: "node N" where agent_info maps it, else the tracer's label ("" where it has none);
    each string made once per distinct (node, label), not per row."""
    nodes = node.to_numpy().astype(np.int64)
    labels = _text(label)
    labels[label.isna().to_numpy()] = ""
    if not len(nodes):
        return labels
    lab_codes, lab_uniques = pd.factorize(labels)
    if nodes.min() < MISSING or int(nodes.max()) >= (1 << 62) // (len(lab_uniques) + 1):
        out = np.where(nodes != MISSING, np.char.add("node ", nodes.astype(str)), labels)   # unusual ids
        return out.astype(object)
    inverse, uniques = pd.factorize((nodes + 1) * (len(lab_uniques) + 1) + lab_codes + 1)
    first = np.zeros(len(uniques), dtype=np.int64)
    first[inverse[::-1]] = np.arange(len(inverse))[::-1]
    table = np.array([f"node {nodes[i]}" if nodes[i] != MISSING else labels[i] for i in first.tolist()], dtype=object)
    return table[inverse]


def running_before(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """For intervals already sorted by start (all of positive length): how many earlier ones each
    starts inside. A later one cannot have ended before it starts, so the ends that are <= its start
    all belong to earlier ones."""
    ended = np.searchsorted(np.sort(end), start, side="right")
    return np.arange(len(start)) - ended


def _sets(keys: np.ndarray, members: np.ndarray):
    """Indices (in sorted order) of each distinct key among `members`."""
    if not len(members):
        return
    k = keys[members]
    order = np.argsort(k, kind="stable")
    bounds = np.flatnonzero(np.diff(k[order])) + 1
    for part in np.split(order, bounds):
        yield members[part]


def find_overlaps(trace: Trace, lo: int | None, hi: int | None, suspects: set[tuple[int, int]] = frozenset()
                  ) -> Overlaps:
    """`suspects`: (pid, correlation_id) of work to report pairs for first."""
    d, c = trace.dispatches, trace.copies
    if lo is not None:
        d, c = d[d["end"] >= lo], c[c["end"] >= lo]
    if hi is not None:
        d, c = d[d["start"] <= hi], c[c["start"] <= hi]
    n_k, n_c = len(d), len(c)
    start = np.concatenate([d["start"].to_numpy(), c["start"].to_numpy()]).astype(np.int64)
    end = np.concatenate([d["end"].to_numpy(), c["end"].to_numpy()]).astype(np.int64)
    is_copy = np.concatenate([np.zeros(n_k, bool), np.ones(n_c, bool)])
    pid = np.concatenate([d["pid"].to_numpy(), c["pid"].to_numpy()]).astype(np.int64)
    lane = np.concatenate([d["stream"].where(d["stream"] >= 0, d["queue"] + (1 << 40)).to_numpy(),
                           c["stream"].to_numpy()]).astype(np.int64)
    # A device is its KFD node where agent_info maps it, else the tracer's own agent label.
    agent = np.concatenate([_device(d["agent_node"], d["agent"]), _device(c["dst_node"], c["dst_agent"])])
    corr = np.concatenate([d["correlation_id"].to_numpy(), c["correlation_id"].to_numpy()]).astype(np.int64)
    kernel_col, direction_col = d["kernel"], c["direction"]

    def name_of(j: int) -> str:              # only the pairs reported need names
        return str(kernel_col.iat[j]) if j < n_k else "copy " + str(direction_col.iat[j - n_k])
    # rocprofv3 often leaves a copy's destination agent unresolved: where the process ran its
    # kernels on one GPU only, that is the copy's device; otherwise it stays apart (unknown).
    # A copy's agent label the same process's kernels carry names the same device.
    unmapped = np.flatnonzero(c["dst_node"].to_numpy() == MISSING)
    if len(unmapped):
        k_labels = _text(d["agent"])
        # the last row of each (pid, label) decides, as a dict built over every row would
        last = pd.DataFrame({"pid": pid[:n_k], "label": k_labels}).drop_duplicates(keep="last").index.to_numpy()
        known = dict(zip(zip(pid[last].tolist(), k_labels[last].tolist()), agent[last].tolist()))
        c_labels = _text(c["dst_agent"])
        for i in unmapped.tolist():
            agent[n_k + i] = known.get((int(pid[n_k + i]), c_labels[i]), agent[n_k + i])
    unknown = agent == ""
    for p in np.unique(pid[is_copy & unknown]).tolist():
        used = np.unique(agent[(pid == p) & ~is_copy & ~unknown])
        if len(used) == 1:
            agent[(pid == p) & is_copy & unknown] = used[0]
    out = Overlaps(lo, hi)
    # One order for everything: by start, ties by position, so "earlier" means the same in every subset.
    order = (np.arange(len(start)) if len(start) < 2 or (start[1:] >= start[:-1]).all()   # the tables' own order
             else np.lexsort((np.arange(len(start)), start)))
    order = order[end[order] > start[order]]          # a zero-length record overlaps nothing
    rank = np.empty(len(start), dtype=np.int64)
    rank[order] = np.arange(len(order))
    # One device of one process: (pid, agent) as one key.
    device = np.zeros(0, np.int64)
    if len(start):
        agent_codes, agent_uniques = pd.factorize(agent)
        pid_codes = pd.factorize(pid)[0]
        device = pd.factorize(pid_codes.astype(np.int64) * (len(agent_uniques) + 1) + agent_codes)[0].astype(np.int64)
    valid = np.zeros(len(start), dtype=np.int64)      # per record: earlier partners it overlaps
    for members in _sets(device, order):
        members = members[np.argsort(rank[members], kind="stable")]
        every = running_before(start[members], end[members])
        kernels = members[~is_copy[members]]
        copies = members[is_copy[members]]
        same_lane = np.zeros(len(start), dtype=np.int64)
        for lane_members in _sets(lane, kernels):
            lane_members = lane_members[np.argsort(rank[lane_members], kind="stable")]
            same_lane[lane_members] = running_before(start[lane_members], end[lane_members])
        copy_copy = np.zeros(len(start), dtype=np.int64)
        copy_copy[copies] = running_before(start[copies], end[copies])
        kk = np.zeros(len(start), dtype=np.int64)
        kk[kernels] = running_before(start[kernels], end[kernels])
        valid[members] = every - same_lane[members] - copy_copy[members]
        out.kernel_kernel += int((kk[kernels] - same_lane[kernels]).sum())
        out.copy_kernel += int((every - kk[members] - copy_copy[members]).sum())

    def pairs_of(i: int) -> list[dict]:
        earlier = order[:rank[i]]
        mask = (device[earlier] == device[i]) & (end[earlier] > start[i])
        mask &= ~(is_copy[earlier] & is_copy[i])
        if not is_copy[i]:
            mask &= is_copy[earlier] | (lane[earlier] != lane[i])
        found, seen = [], set()
        for j in earlier[mask][::-1][:8 * PAIRS_PER_ROW].tolist():     # the latest partners: enough to list
            kind = "copy-kernel" if is_copy[i] or is_copy[j] else "kernel-kernel"
            pair = {"kind": kind, "a": name_of(j), "b": name_of(i), "a_start": int(start[j]), "a_end": int(end[j]),
                    "b_start": int(start[i]), "b_end": int(end[i]),
                    "overlap_ns": int(min(end[j], end[i]) - start[i]), "pids": [int(pid[i])]}
            key = tuple(v for k, v in pair.items() if k != "pids")
            if key in seen:
                continue              # duplicated rows make one row
            seen.add(key)
            found.append(pair)
            if len(found) >= PAIRS_PER_ROW:
                break
        return found

    kept: list[dict] = []
    keys: set = set()

    def keep(rows) -> None:
        # each row costs one pass over its device's earlier records: look at a bounded number
        for n, i in enumerate(rows):
            if n >= 2 * KEEP_PAIRS:
                return
            for p in pairs_of(int(i)):
                key = (p["kind"], p["a"], p["b"], p["a_start"], p["b_start"])
                if key not in keys and len(kept) < KEEP_PAIRS:
                    keys.add(key)
                    kept.append(p)
            if len(kept) >= KEEP_PAIRS:
                return

    paired = order[valid[order] > 0]
    if suspects:
        keep(i for i in paired.tolist() if (int(pid[i]), int(corr[i])) in suspects)
    # then the latest: walk back from the last start
    keep(paired[::-1].tolist())
    out.pairs = kept
    return out


def serialization_check(overlaps: Overlaps, env: dict[str, str], where: str) -> dict | None:
    """If a serializing variable was set, every remaining overlap of its kind says it did not take
    effect for that work (a stale server, a launcher that dropped it, a library that ignores it)."""
    on = {k: v for k, v in env.items() if k in SERIALIZE and v not in ("", "0")}
    if not on:
        return None
    kernels = any(SERIALIZE[k] in ("kernel", "both") for k in on)
    copies = any(SERIALIZE[k] in ("copy", "both") for k in on)
    # AMD_SERIALIZE_KERNEL waits around kernel launches only: a copy beside a kernel is serialized by
    # AMD_SERIALIZE_COPY (or a launch-blocking variable), so it counts only where one of those was set
    remaining = (overlaps.kernel_kernel if kernels else 0) + (overlaps.copy_kernel if copies else 0)
    verdict = ("no overlaps remain: consistent with serialized execution" if remaining == 0 else
               f"{remaining} overlap(s) remain although {', '.join(f'{k}={v}' for k, v in on.items())} was set: the "
               f"setting did not take effect for that work (check that it reached the GPU processes; a server "
               f"started earlier keeps its old environment)")
    if not copies and overlaps.copy_kernel:
        verdict += (f"; {overlaps.copy_kernel} copy-kernel overlap(s) not checked: copies are serialized only by "
                    f"AMD_SERIALIZE_COPY")
    return {"variables": on, "from": where, "overlaps_remaining": remaining, "effective": remaining == 0,
            "verdict": verdict}
