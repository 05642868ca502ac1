"""Incident records for the registry, made from a triage report (`faultkit.triage/1`).

A record is one incident of one report (one faulting process): where it happened (node, GPU, pid),
when, what faulted (kind, status code or Xid, engine), which kernel and how sure, the driver events
in the order they came (the first is the incident's head, the rest its follow-ons), and the
hardware signs the report carries. The signature is what the same bug shares across nodes.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field, fields

from .. import redact
from ..codes import CONSEQUENCE_XIDS
from ..judge.levels import CERTAIN, LIKELY
from ..judge.names import kernel_key
from .hardware import hardware_signs

# A verdict names its kernel only at these levels; below them the top candidate stands in and the
# record says so (`level`), so a signature never claims more than the report did.
NAMED_LEVELS = (CERTAIN, LIKELY)
_UNNAMED = re.compile(r"^kernel launched by thread ")   # a trace placeholder, not a kernel name
_STAMP = re.compile(r"^\[\s*(\d+(?:\.\d+)?)\]")


@dataclass(frozen=True)
class IncidentRecord:
    incident_id: str
    node: str
    seen_at: float                    # seconds since the epoch
    signature: str
    kernel: str | None
    kernel_key: str | None
    level: str
    fault_kind: str | None
    code: str | None
    engine: str | None
    gpu: str | None
    pid: int | None
    job: str | None = None
    runtime: str | None = None        # ROCm or CUDA runtime version, where the bundle recorded it
    driver: str | None = None
    framework: str | None = None
    model: str | None = None
    chain: str = ""                   # driver/runtime events of the incident in time order, ' > ' between
    hardware: str = ""                # hardware signs (xid-79, ras, ...), ',' between
    report: str = ""                  # the report's path or name, for `registry show`

    COLUMNS = ()                      # filled below: the column order of every store

    def __post_init__(self):
        # The one way into the registry (a report from elsewhere, a bundle's manifest, the watch
        # agent's incidents): every text field redacted here, so no intake can forget it.
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, str) and v:
                red = redact.text(v)
                if red != v:
                    object.__setattr__(self, f.name, red)

    def row(self) -> tuple:
        return tuple(getattr(self, c) for c in IncidentRecord.COLUMNS)

    @classmethod
    def from_row(cls, row) -> "IncidentRecord":
        return cls(**dict(zip(cls.COLUMNS, row)))

    def to_json(self) -> dict:
        return asdict(self)


IncidentRecord.COLUMNS = tuple(f.name for f in fields(IncidentRecord))


def signature_of(kernel_key_: str | None, fault_kind: str | None, code: str | None, engine: str | None) -> str:
    """What the same bug shares on every node: the kernel, the kind of fault, its status code or Xid
    and the engine. Versions are kept beside it, not in it: one bug seen under two driver versions is
    one signature whose versions are listed."""
    text = json.dumps([kernel_key_ or "", fault_kind or "", code or "", engine or ""])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class Context:
    """What the report does not say but the bundle or the user does."""
    node: str = "unknown"
    seen_at: float = 0.0
    job: str | None = None
    runtime: str | None = None
    driver: str | None = None
    framework: str | None = None
    model: str | None = None
    report: str = ""
    started: float | None = None      # the capture's start, where a bundle or its report says it
    extra: dict = field(default_factory=dict)


def records_from_report(report: dict, ctx: Context) -> tuple[list[IncidentRecord], list[str]]:
    """One record per incident of the report; problems for what could not be read. A report
    without faults gives no record: the registry holds incidents, not clean runs."""
    problems: list[str] = []
    if not isinstance(report, dict) or not str(report.get("schema", "")).startswith("faultkit.triage/"):
        return [], [f"{ctx.report or 'report'}: not a faultkit triage report (schema faultkit.triage/N)"]
    faults = [f for f in report.get("faults") or [] if isinstance(f, dict)]
    if not faults:
        # no fault, but the kernel log's hardware signs (RAS errors, VRAM lost at a mode-1 reset): a
        # hardware incident, one record per GPU that showed them, for the hardware rule to see
        return _hardware_only(hardware_signs([], report.get("kernel_events") or []), report, ctx), []
    incidents = [i for i in report.get("incidents") or [] if isinstance(i, dict)]
    if not incidents:     # older reports: the whole report is one incident
        incidents = [{"faults": list(range(len(faults))), "verdict": report.get("verdict") or {}}]
    signs = hardware_signs(faults, report.get("kernel_events") or [])
    out = []
    for n, inc in enumerate(incidents):
        idx = [i for i in inc.get("faults") or [] if isinstance(i, int) and 0 <= i < len(faults)]
        mine = [faults[i] for i in idx] or faults
        verdict = inc.get("verdict") if isinstance(inc.get("verdict"), dict) else {}
        level = str(verdict.get("level") or "unknown")
        kernel = _kernel_of(verdict, level)
        key = kernel_key(kernel) if kernel else None
        head = _first(mine)
        gpu = _gpu_of(head, mine)
        fingerprint = _fingerprint(ctx, n, mine)
        out.append(IncidentRecord(
            incident_id=hashlib.sha256(fingerprint.encode()).hexdigest()[:24], node=ctx.node,
            seen_at=ctx.seen_at, signature=signature_of(key, head.get("kind"), _code(head), head.get("engine")),
            kernel=kernel, kernel_key=key, level=level, fault_kind=head.get("kind"), code=_code(head),
            engine=head.get("engine"), gpu=str(gpu) if gpu is not None else None,
            pid=_pid(head, inc), job=ctx.job, runtime=ctx.runtime,
            driver=ctx.driver, framework=ctx.framework, model=ctx.model, chain=" > ".join(_chain(mine)),
            hardware=",".join(sorted(signs.get(str(gpu), set()) | signs.get(None, set()))), report=ctx.report))
    return out, problems


def _fingerprint(ctx: Context, n: int, faults: list[dict]) -> str:
    """What makes an incident itself: the node, the capture's start where known, and its faults as
    the evidence states them (kind, time, pid, GPU, codes), never where the files were read from:
    a bundle and the report written of it, or one report by two paths, are one incident."""
    stated = [{k: v for k, v in f.items() if k != "detail"} for f in faults]
    return json.dumps([ctx.node, ctx.started, n, stated], sort_keys=True, default=str)


def _hardware_only(signs: dict, report: dict, ctx: Context) -> list[IncidentRecord]:
    out: list[IncidentRecord] = []
    if not signs:                      # a clean run: the registry holds incidents only
        return out
    shared = signs.get(None, set())
    gpus = sorted(g for g in signs if g is not None) or [None]
    for gpu in gpus:
        mine = sorted(signs.get(gpu, set()) | shared)
        code = ",".join(mine)
        fingerprint = json.dumps([ctx.node, ctx.started, "hardware", gpu, code, sorted(
            str(e.get("time")) for e in report.get("kernel_events") or [] if isinstance(e, dict))])
        out.append(IncidentRecord(
            incident_id=hashlib.sha256(fingerprint.encode()).hexdigest()[:24], node=ctx.node, seen_at=ctx.seen_at,
            signature=signature_of(None, "hardware", code, None), kernel=None, kernel_key=None, level="unknown",
            fault_kind="hardware", code=code, engine=None, gpu=gpu, pid=None, job=ctx.job, runtime=ctx.runtime,
            driver=ctx.driver, framework=ctx.framework, model=ctx.model, chain=" > ".join(mine), hardware=code,
            report=ctx.report))
    return out


def _pid(head: dict, incident: dict) -> int | None:
    """The head's pid, else the incident's (an Xid 13 line names no process; its group does)."""
    pids = [p for p in [head.get("pid"), *(incident.get("pids") or [])] if isinstance(p, int) and not isinstance(p, bool)]
    return pids[0] if pids else None


def _kernel_of(verdict: dict, level: str) -> str | None:
    if level in NAMED_LEVELS and verdict.get("kernel"):
        return str(verdict["kernel"])
    for c in verdict.get("candidates") or []:
        name = c.get("kernel") if isinstance(c, dict) else None
        if name and not _UNNAMED.match(str(name)):
            return str(name)
    return None


def _code(fault: dict) -> str | None:
    """The status code (HSA, CUDA); an Xid's number is already its kind (`xid-31`)."""
    return str(fault["code"]) if fault.get("code") else None


def _seconds(fault: dict) -> float | None:
    m = _STAMP.match(str(fault.get("time") or ""))
    return float(m.group(1)) if m else None


def _ordered(faults: list[dict]) -> list[dict]:
    """Time order where the stamps say it (kernel-log seconds), input order otherwise (stable)."""
    keyed = [(_seconds(f), i, f) for i, f in enumerate(faults)]
    if all(k[0] is not None for k in keyed):
        keyed.sort(key=lambda k: (k[0], k[1]))
    return [k[2] for k in keyed]


def _first(faults: list[dict]) -> dict:
    """The incident's head: the earliest fault that is a cause, not a consequence (an Xid 43 'GPU
    stopped processing' follows the fault that caused it), and a device-side finding before the
    host's report of it (compute-sanitizer's invalid write, not the error 719 the host saw after)."""
    ordered = _ordered(faults)
    causes = [f for f in ordered if (f.get("detail") or {}).get("xid") not in FOLLOW_ON_XIDS]
    device = [f for f in causes if f.get("kind") not in HOST_REPORTED_KINDS]
    return (device or causes or ordered)[0]


# What the host reports of a device error after the fact (a runtime's error string, a CUDA error
# at the next synchronizing call): the finding it reports, where there is one, heads the incident.
HOST_REPORTED_KINDS = frozenset({"gpu-runtime-error", "cuda-error"})


def _gpu_of(head: dict, faults: list[dict]):
    """The GPU as the machine names it: the kernel log's PCI address where the incident has one (a
    runtime's GPU index or HSA node is local to its process), else the head's."""
    return next((f.get("gpu") for f in faults if f.get("source") == "kernel-log" and f.get("gpu")), head.get("gpu"))


# Xids that report the end of work another event caused: the Xid table's consequence column (codes.XIDS).
FOLLOW_ON_XIDS = CONSEQUENCE_XIDS


def _chain(faults: list[dict]) -> list[str]:
    chain: list[str] = []
    for f in _ordered(faults):
        kind = str(f.get("kind") or "?")
        if not chain or chain[-1] != kind:
            chain.append(kind)
    return chain
