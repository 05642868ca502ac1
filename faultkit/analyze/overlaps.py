"""Work that ran at the same time in the window before the fault.

Kernels on different queues or streams, and copies beside kernels, that overlap in time are how
races between producer and consumer show up; with AMD_SERIALIZE_KERNEL / AMD_SERIALIZE_COPY /
HIP_LAUNCH_BLOCKING / CUDA_LAUNCH_BLOCKING in effect there should be none. One sweep over the
intervals sorted by start, with a heap of the ones still running: O(n log n + pairs), not n².
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np

from ..trace_model import Trace

SERIALIZE = {"AMD_SERIALIZE_KERNEL": "kernel", "AMD_SERIALIZE_COPY": "copy", "HIP_LAUNCH_BLOCKING": "both",
             "CUDA_LAUNCH_BLOCKING": "both"}
KEEP_PAIRS = 200


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


def find_overlaps(trace: Trace, lo: int | None, hi: int | None, suspects: set[tuple[int, int]] = frozenset()
                  ) -> Overlaps:
    """`suspects`: (pid, correlation_id) of work to report pairs for first."""
    d, c = trace.dispatches, trace.copies
    if lo is not None:
        d, c = d[d["end"] >= lo], c[c["end"] >= lo]
    if hi is not None:
        d, c = d[d["start"] <= hi], c[c["start"] <= hi]
    n_k, n_c = len(d), len(c)
    start = np.concatenate([d["start"].to_numpy(), c["start"].to_numpy()])
    end = np.concatenate([d["end"].to_numpy(), c["end"].to_numpy()])
    is_copy = np.concatenate([np.zeros(n_k, bool), np.ones(n_c, bool)])
    pid = np.concatenate([d["pid"].to_numpy(), c["pid"].to_numpy()])
    lane_q = np.concatenate([d["stream"].where(d["stream"] >= 0, d["queue"] + (1 << 40)).to_numpy(),
                             c["stream"].to_numpy()])
    agent = np.concatenate([d["agent_node"].to_numpy(), c["dst_node"].to_numpy()])
    corr = np.concatenate([d["correlation_id"].to_numpy(), c["correlation_id"].to_numpy()])
    # names are looked up for the few pairs reported: arrays, not a Python list of every record
    names = np.concatenate([d["kernel"].astype(str).to_numpy(dtype=object),
                            ("copy " + c["direction"].astype(str)).to_numpy(dtype=object)])
    out = Overlaps(lo, hi)
    order = np.argsort(start, kind="stable")
    # Only clusters of intervals that chain into each other can hold pairs: find them with a
    # running maximum of ends and sweep those alone (most of a busy trace is back-to-back work).
    s_sorted, e_sorted = start[order], end[order]
    reach = np.maximum.accumulate(e_sorted) if len(order) else e_sorted
    new_cluster = np.ones(len(order), dtype=bool)
    new_cluster[1:] = s_sorted[1:] >= reach[:-1]
    cluster_id = np.cumsum(new_cluster)
    sizes = np.bincount(cluster_id)
    busy = order[sizes[cluster_id] > 1]
    active: list[tuple[int, int]] = []          # (end, index)
    keep_suspect, keep_other = [], []
    for i in busy.tolist():
        s = start[i]
        while active and active[0][0] <= s:
            heapq.heappop(active)
        for e, j in active:
            both_copy = is_copy[i] and is_copy[j]
            if both_copy:
                continue
            if not is_copy[i] and not is_copy[j]:
                if pid[i] == pid[j] and lane_q[i] == lane_q[j] and agent[i] == agent[j]:
                    continue        # same queue: the hardware serializes it (or it is the same stream)
                out.kernel_kernel += 1
                kind = "kernel-kernel"
            else:
                out.copy_kernel += 1
                kind = "copy-kernel"
            pair = {"kind": kind, "a": names[j], "b": names[i], "a_start": int(start[j]), "a_end": int(e),
                    "b_start": int(s), "b_end": int(end[i]), "overlap_ns": int(min(e, end[i]) - s),
                    "pids": sorted({int(pid[i]), int(pid[j])})}
            if (int(pid[i]), int(corr[i])) in suspects or (int(pid[j]), int(corr[j])) in suspects:
                if len(keep_suspect) < KEEP_PAIRS:
                    keep_suspect.append(pair)
            else:
                keep_other.append(pair)
                if len(keep_other) > 4 * KEEP_PAIRS:
                    keep_other = keep_other[-KEEP_PAIRS:]
        heapq.heappush(active, (int(end[i]), i))
    out.pairs = keep_suspect + keep_other[-(KEEP_PAIRS - len(keep_suspect)):] if KEEP_PAIRS > len(keep_suspect) \
        else keep_suspect
    return out


def serialization_check(overlaps: Overlaps, env: dict[str, str], where: str) -> dict | None:
    """If a serializing variable was set, every remaining overlap of its kind says it did not take
    effect for that work (a stale server, a launcher that dropped it, a library that ignores it)."""
    on = {k: v for k, v in env.items() if k in SERIALIZE and v not in ("", "0")}
    if not on:
        return None
    kernels = any(SERIALIZE[k] in ("kernel", "both") for k in on)
    copies = any(SERIALIZE[k] in ("copy", "both") for k in on)
    remaining = (overlaps.kernel_kernel if kernels else 0) + (overlaps.copy_kernel if copies or kernels else 0)
    verdict = ("no overlaps remain: consistent with serialized execution" if remaining == 0 else
               f"{remaining} overlap(s) remain although {', '.join(f'{k}={v}' for k, v in on.items())} was set: the "
               f"setting did not take effect for that work (check that it reached the GPU processes; a server "
               f"started earlier keeps its old environment)")
    return {"variables": on, "from": where, "overlaps_remaining": remaining, "effective": remaining == 0,
            "verdict": verdict}
