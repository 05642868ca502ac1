"""What goes into the registry: a triage report (JSON) as it is, or a bundle/log triaged here, with
the context the bundle's manifest records (host, job, start time, runtime versions)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from .. import layout
from ..ingest.schema import read_manifest
from ..manifest import Manifest
from ..launch_env import Launch, launch_of
from ..limits import HOLD, MAX_FIELD, fits_int
from .record import Context, IncidentRecord, records_from_report

_CUDA_DRIVER = re.compile(r"Driver Version\s*:\s*(\S+)")
_CUDA_RUNTIME = re.compile(r"CUDA Version\s*:\s*(\S+)")


def report_of(path: str) -> tuple[dict | None, list[str]]:
    """A `faultkit.triage/1` JSON file is taken as it is; anything else is triaged here."""
    p = Path(path)
    if p.is_file() and p.suffix == ".json":
        try:
            if p.stat().st_size > HOLD:           # parsed whole: a 1 GB "report" took 2 GB of memory
                return None, [f"{path}: {p.stat().st_size:,} bytes, over {HOLD >> 20} MiB: not read as a report"]
            data = json.loads(p.read_text(errors="replace"))
        except (OSError, ValueError, RecursionError) as exc:
            return None, [f"{path}: not readable as JSON: {exc}"]
        if isinstance(data, dict) and isinstance(data.get("schema"), str) and \
                data["schema"].startswith("faultkit.triage/"):
            return typed_report(data)
        if p.name == layout.MANIFEST:
            path = str(p.parent)
    from ..export.report import to_json
    from ..triage import TriageOptions, triage
    inc = triage([path], TriageOptions(open_cores=False))
    return to_json(inc), [str(m) + ": no such file, or not readable" for m in inc.missing]


MAX_FAULTS = 10_000
# The report's parts that registry records are made of, and the type each must have (docs/report-json.md);
# a scalar part may be a string, a number that fits 64 bits, a bool or null.
SHAPES = {"detail": "dict", "verdict": "dict", "faults": "list", "pids": "list", "candidates": "list",
          "pid": "int", "kind": "scalar", "code": "scalar", "engine": "scalar", "gpu": "scalar", "time": "scalar",
          "kernel": "scalar", "level": "scalar", "origin": "scalar", "xid": "scalar", "pci": "scalar"}


def typed_report(data: dict) -> tuple[dict, list[str]]:
    """A report from elsewhere, at the registry's boundary: the parts the records are made of, each of
    the type the triage report gives it (docs/report-json.md), bounded; what is not is dropped and said
    (`faults: 5`, `detail: 5`, a pid past 64 bits were internal errors)."""
    problems: list[str] = []

    def listed(v, what: str) -> list[dict]:
        if v is None:
            return []
        if not isinstance(v, list):
            problems.append(f"`{what}` is not a list: not read")
            return []
        kept = [x for x in v[:MAX_FAULTS] if isinstance(x, dict)]
        if len(kept) != len(v):
            problems.append(f"`{what}`: {len(v) - len(kept)} entr(ies) not an object or past {MAX_FAULTS:,}: not read")
        return kept

    def scalars(d: dict) -> dict:
        out = {}
        for k, v in list(d.items())[:256]:
            want = SHAPES.get(k)
            if want == "dict":
                ok = isinstance(v, dict)
                v = scalars(v) if ok else None
            elif want == "list":
                ok = isinstance(v, list)
                v = [x if not isinstance(x, dict) else scalars(x) for x in v[:MAX_FAULTS]
                     if isinstance(x, (str, dict)) or fits_int(x)] if ok else None
            elif want == "int":
                ok = fits_int(v) or v is None
            elif isinstance(v, str):
                ok, v = True, v[:MAX_FIELD]
            else:
                ok = v is None or isinstance(v, (bool, float)) or fits_int(v)
                if not ok and want is None:
                    continue                   # a part the records are not made of: left as it is, unread
            if ok:
                out[k] = v
            else:
                problems.append(f"`{k}` of the type {type(d[k]).__name__} or too large: not read")
        return out

    out = {"schema": data["schema"][:64]}
    out["faults"] = [scalars(f) for f in listed(data.get("faults"), "faults")]
    out["incidents"] = [scalars(i) for i in listed(data.get("incidents"), "incidents")]
    out["kernel_events"] = [scalars(e) for e in listed(data.get("kernel_events"), "kernel_events")]
    out["verdict"] = scalars(data["verdict"]) if isinstance(data.get("verdict"), dict) else {}
    cap = data.get("capture") if isinstance(data.get("capture"), dict) else {}
    out["capture"] = {"host": _str(cap.get("host")), "job": _str(cap.get("job")),
                      "start": cap["start"] if isinstance(cap.get("start"), (int, float)) and not
                      isinstance(cap.get("start"), bool) and 0 < cap["start"] < 1e11 else None}
    if data.get("verdict") is not None and not isinstance(data["verdict"], dict):
        problems.append(f"`verdict` of the type {type(data['verdict']).__name__}: not read")
    return out, sorted(set(problems))


def context_of(path: str, node: str | None, job: str | None, seen_at: float | None,
               report: dict | None = None) -> Context:
    """The bundle's manifest, where there is one, fills what the user did not give; a report away
    from its bundle, the capture's own record in it (`capture.host`, `start`, `job`), so a report
    and its bundle are filed alike."""
    p = Path(path)
    folder = p if p.is_dir() else p.parent
    manifest = _manifest(folder / layout.MANIFEST)
    system = manifest.system or {}
    told = (report or {}).get("capture") or {} if manifest.schema is None else {}
    ctx = Context(report=str(path))
    ctx.node = node or _str(system.get("host")) or _str(manifest.extra.get("host")) or told.get("host") or "unknown"
    ctx.job = job or Launch.from_json(manifest.launch).job or told.get("job") or _job_from_env(folder)
    wall = manifest.start.wall if manifest.start else told.get("start")
    ctx.started = float(wall) if isinstance(wall, (int, float)) and 0 < wall < 1e11 else None
    ctx.seen_at = seen_at if seen_at is not None else _start(manifest, p) if ctx.started is None else ctx.started
    ctx.runtime = _str(system.get("rocm_version"))
    smi = _read(folder / layout.fact_file("nvidia-smi"))
    if smi:
        if m := _CUDA_DRIVER.search(smi):
            ctx.driver = m.group(1)
        if m := _CUDA_RUNTIME.search(smi):
            ctx.runtime = ctx.runtime or f"CUDA {m.group(1)}"
    if ctx.driver is None and _str(system.get("kernel")):
        ctx.driver = f"linux {system['kernel']}"
    command = " ".join(manifest.command) if isinstance(manifest.command, list) else ""
    for fw in ("sglang", "vllm", "torch"):
        if fw in command:
            ctx.framework = fw
            break
    if m := re.search(r"--model(?:-path)?[= ](\S+)", command):
        ctx.model = m.group(1)
    return ctx


def intake(path: str, node: str | None = None, job: str | None = None,
           seen_at: float | None = None) -> tuple[list[IncidentRecord], list[str]]:
    report, problems = report_of(path)
    if report is None:
        return [], problems
    records, more = records_from_report(report, context_of(path, node, job, seen_at, report))
    return records, problems + more


def _manifest(path: Path) -> Manifest:
    return read_manifest(path)[0] or Manifest(schema=None)


def _job_from_env(folder: Path) -> str | None:
    try:
        procs = json.loads((folder / layout.ENVIRON).read_text(errors="replace"))
    except (OSError, ValueError, RecursionError):
        return None
    for proc in procs if isinstance(procs, list) else []:
        env = proc.get("env") if isinstance(proc, dict) and isinstance(proc.get("env"), dict) else {}
        job = launch_of({str(k): str(v) for k, v in env.items()}).job
        if job:
            return job
    return None


def _start(manifest: Manifest, path: Path) -> float:
    wall = manifest.start.wall if manifest.start else None
    if wall is not None and 0 < wall < 1e11:
        return float(wall)
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")[:1_000_000]
    except OSError:
        return ""


def _str(v) -> str | None:
    return str(v)[:MAX_FIELD] if (isinstance(v, (str, float)) or fits_int(v)) and str(v) else None
