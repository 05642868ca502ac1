"""The registry's answers as text or JSON (the edge: no query here)."""

from __future__ import annotations

import time

from ..terminal import clean
from .hardware import Suspicion
from .store import SignatureRow


def _lines(lines: list[str]) -> str:
    """The registry holds what many nodes' evidence said (kernel names, versions, node names): one
    terminal line each, no escape sequence through."""
    return "".join(clean(ln) + "\n" for ln in lines)


def when(t: float | None) -> str:
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t)) + "Z" if t else "?"
    except (OverflowError, OSError, ValueError, TypeError):      # a hostile report's time
        return "?"


def top_text(rows: list[SignatureRow], total: int) -> str:
    if not rows:
        return f"no incidents in the registry ({total})\n"
    lines = [f"{total:,} incident(s); signatures by incidents:", "",
             f"{'signature':<16}  {'incidents':>9}  {'nodes':>5}  {'gpus':>4}  {'last seen':<20}  kernel / fault"]
    for r in rows:
        what = " ".join(x for x in (r.kernel_key or "(no kernel named)", r.fault_kind, r.code, r.engine) if x)
        lines.append(f"{r.signature:<16}  {r.incidents:>9,}  {r.nodes:>5}  {r.gpus:>4}  {when(r.last_seen):<20}  {what}")
    return _lines(lines)


def row_json(r: SignatureRow) -> dict:
    return {"signature": r.signature, "kernel_key": r.kernel_key, "fault_kind": r.fault_kind, "code": r.code,
            "engine": r.engine, "incidents": r.incidents, "nodes": r.nodes, "gpus": r.gpus,
            "first_seen": r.first_seen, "last_seen": r.last_seen}


def show_json(r: SignatureRow, suspicion: Suspicion, histories, versions, chains, incidents) -> dict:
    return {**row_json(r), "suspicion": {"kind": suspicion.kind, "reasons": list(suspicion.reasons),
                                         "drain": list(suspicion.drain)},
            "gpus_touched": [{"node": n, "gpu": g, "signatures": k, "hardware": sorted(hw)} for n, g, k, hw in histories],
            "versions": [dict(zip(("runtime", "driver", "framework", "model"), v)) for v in versions],
            "chains": [{"chain": c, "incidents": k} for c, k in chains],
            "recent_incidents": [i.to_json() for i in incidents]}


def show_text(data: dict) -> str:
    s = data["suspicion"]
    lines = [f"signature {data['signature']}: {data['kernel_key'] or '(no kernel named)'}"
             f" {data['fault_kind'] or ''} {data['code'] or ''} {data['engine'] or ''}".rstrip(),
             f"{data['incidents']:,} incident(s) on {data['nodes']} node(s), {data['gpus']} GPU(s); "
             f"first {when(data['first_seen'])}, last {when(data['last_seen'])}",
             f"suspect: {s['kind']}"] + [f"  - {r}" for r in s["reasons"]]
    if s["drain"]:
        lines.append("drain: " + ", ".join(s["drain"]))
    lines.append("driver/runtime events (first, then follow-ons):")
    lines += [f"  {c['incidents']:>6,} x {c['chain'] or '(none)'}" for c in data["chains"]]
    lines.append("versions: " + ("; ".join(", ".join(x for x in v.values() if x) or "unknown"
                                            for v in data["versions"]) or "unknown"))
    lines.append("GPUs:")
    lines += [f"  {g['node']} {g['gpu']}: {g['signatures']} signature(s)"
              + (f", hardware signs {', '.join(g['hardware'])}" if g["hardware"] else "") for g in data["gpus_touched"]]
    return _lines(lines)
