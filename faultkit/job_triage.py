"""The triage of one job's bundles (one per node or rank): each bundle triaged on its own, its events
put on its own wall clock, then the job judged as one incident (analyze/job.py).

A set of inputs is a job when two or more capture bundles carry the same job id in their manifests'
`launch` record (or `--job` says so); anything else is triaged as before.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from . import layout
from ._signals import capture_exit_status
from .codes import CONSEQUENCE_XIDS
from .ingest.schema import read_manifest, record_pids
from .manifest import Manifest

if TYPE_CHECKING:
    from .analyze.job import JobVerdict, NodeEvidence
# The job's analysis (analyze.job, ingest.markers, launch_env) is imported where two or more bundles
# are read: `triage` asks job_of about every input, and a text triage's start-up does without them
# (issue #35; tests/test_startup.py).

LOG_READ_LIMIT = 64 << 20          # markers are looked for in the first 64 MiB of each output log
_XID = re.compile(r"^xid-(\d+)$")


@dataclass
class JobReport:
    """A job's verdict across its nodes' bundles, for the job report."""
    verdict: JobVerdict
    nodes: list[NodeEvidence]
    incidents: dict[str, object]        # node -> its bundle's Incident
    problems: list[str]


def _manifest(path: str) -> Manifest | None:
    return read_manifest(Path(path) / layout.MANIFEST)[0]


def job_of(paths: list[str], job: str | None = None) -> tuple[str | None, list[str]] | None:
    """(job id, its bundles) where the inputs are two or more bundles of one job; else None."""
    bundles = [(p, _manifest(p)) for p in paths if Path(p).is_dir()]
    bundles = [(p, m) for p, m in bundles if m is not None]
    if len(bundles) < 2:
        return None
    from .launch_env import Launch
    if job is not None:
        chosen = [p for p, m in bundles if Launch.from_json(m.launch).job in (job, None)]
        return (job, chosen) if len(chosen) >= 2 else None
    ids: dict[str, list[str]] = {}
    for p, m in bundles:
        j = Launch.from_json(m.launch).job
        if j:
            ids.setdefault(j, []).append(p)
    groups = [(j, ps) for j, ps in ids.items() if len(ps) >= 2]
    return groups[0] if len(groups) == 1 and sum(len(ps) for _, ps in groups) == len(paths) else None


def _wall_of_line(inc, file: str | None, line: int | None) -> float | None:
    at = inc.log_clock.arrival(file, line) if inc.log_clock is not None else None
    return at[1] / 1e9 if at else None


def _wall_of_monotonic(inc, seconds: float | None) -> float | None:
    clock = inc.log_clock
    boot = clock.of_monotonic(seconds) if clock is not None else None
    a = clock.anchors if clock is not None else None
    if boot is None or a is None or a.wall is None or a.boottime_ns is None:
        return None
    return a.wall + (boot - a.boottime_ns) / 1e9


def captured_pids(path: str) -> set[int] | None:
    """The processes this bundle's capture recorded (environ.json); None where it has no record."""
    try:
        procs = json.loads((Path(path) / layout.ENVIRON).read_text(errors="replace"))
    except (OSError, ValueError, RecursionError):
        return None
    return record_pids(procs) if isinstance(procs, list) else None


def node_evidence(path: str, inc) -> tuple[NodeEvidence, list[str]]:
    """A bundle's events on its node's wall clock. On a machine shared by several ranks (or jobs) the
    kernel log holds every process's lines: only the captured processes' are this node's evidence."""
    from .analyze.job import CONSEQUENCE_KINDS, NodeEvent, NodeEvidence
    from .ingest.markers import OWN_TIMEOUT, PEER_LOSS, markers_in
    from .launch_env import Launch
    m = inc.capture or Manifest(schema=None)
    mine = captured_pids(path)
    foreign = lambda pid: mine is not None and isinstance(pid, int) and pid not in mine  # noqa: E731
    launch = Launch.from_json(m.launch)
    system = m.system or {}
    name = launch.host or system.get("host") or Path(path).name
    node = NodeEvidence(name=str(name), bundle=path, rank=launch.rank if launch.rank is not None else launch.node_rank,
                        start_wall_s=m.start.wall if m.start else None,
                        boot_id=system.get("boot_id") if isinstance(system.get("boot_id"), str) else None)
    if m.start and m.start.wall is not None and m.start.monotonic_ns is not None:
        node.start_wall_minus_monotonic_s = m.start.wall - m.start.monotonic_ns / 1e9
    if inc.verdict is not None:
        node.verdict_level, node.verdict_kernel = inc.verdict.level, inc.verdict.kernel
    problems = []
    kernel_stamps = {str(v.origin): v.stamp for v in list(inc.kernel.faults) + list(inc.kernel.xids)}
    for f in inc.faults:
        if f.origin is None or foreign(f.pid):
            continue
        stamp = kernel_stamps.get(str(f.origin))
        wall = (_wall_of_monotonic(inc, stamp.seconds) if stamp is not None and stamp.clock == "monotonic"
                else _wall_of_line(inc, f.origin.file, f.origin.line))
        if wall is None:
            continue
        xid = _XID.match(f.kind)
        cause = f.kind not in CONSEQUENCE_KINDS and not (xid and int(xid.group(1)) in CONSEQUENCE_XIDS)
        node.events.append(NodeEvent(wall, f.kind, cause, f.meaning or f.kind, str(f.origin)))
    for e in inc.kernel_events:
        if e.kind == "host-segfault" and e.stamp is not None and e.stamp.clock == "monotonic" \
                and not foreign((e.fields or {}).get("pid")):
            wall = _wall_of_monotonic(inc, e.stamp.seconds)
            if wall is not None:
                node.events.append(NodeEvent(wall, "host-segfault", True, e.text[:200], str(e.origin)))
    for r in inc.report_points:
        wall = _wall_of_line(inc, r.origin.file, r.origin.line)
        if wall is None:
            continue
        loss = bool(PEER_LOSS.search(r.exception or ""))
        timeout = not loss and bool(OWN_TIMEOUT.search(r.exception or ""))
        kind = "peer-loss" if loss else "collective-timeout" if timeout else r.kind
        node.events.append(NodeEvent(wall, kind, not (loss or timeout), (r.exception or r.frame or r.kind)[:200],
                                     str(r.origin)))
    for log in (inc.log_clock.stamps if inc.log_clock is not None else {}):
        try:
            with open(log, "rb") as fh:
                text = fh.read(LOG_READ_LIMIT).decode(errors="replace")
        except OSError as exc:
            problems.append(f"{log}: {exc.strerror}")
            continue
        marks, losses = markers_in(text, log)
        for mk in marks:
            wall = _wall_of_line(inc, log, mk.origin.line)
            if wall is not None:
                node.markers.setdefault(mk.key, wall)
        seen = {e.origin for e in node.events}
        for pl in losses:
            wall = _wall_of_line(inc, log, pl.origin.line)
            if wall is not None and str(pl.origin) not in seen:
                node.events.append(NodeEvent(wall, pl.kind, False, pl.text, str(pl.origin)))
    end = m.end.wall if m.end else None
    status = capture_exit_status(m)
    if status > 128 and m.ended_by not in ("interrupted", "timeout", "hang") \
            and end is not None and not any(e.cause for e in node.events):
        # a death by signal with nothing earlier to show it (the kernel rate-limits its segfault
        # lines): the capture saw it at its end. After this rank's own collective timed out (or lost
        # its peer) the death is that timeout's consequence (a watchdog's abort), not a cause.
        after = next((e for e in sorted(node.events, key=lambda e: e.wall_s)
                      if e.kind in CONSEQUENCE_KINDS and e.wall_s <= end), None)
        node.events.append(NodeEvent(float(end), f"killed by signal {status - 128}", after is None,
                                     str(m.exit or f"exit {status}")
                                     + (f", after its own {after.kind} ({after.origin})" if after else ""),
                                     f"{path}/{layout.MANIFEST}"))
    return node, problems


def triage_job(job: str | None, paths: list[str], triage_one) -> JobReport:
    from .analyze.job import decide
    nodes, incidents, problems = [], {}, []
    for p in paths:
        inc = triage_one(p)
        node, probs = node_evidence(p, inc)
        if node.name in incidents:                  # two bundles of one host: tell them apart
            node.name = f"{node.name}:{Path(p).name}"
        nodes.append(node)
        incidents[node.name] = inc
        problems += probs
    nodes.sort(key=lambda n: (n.rank if n.rank is not None else 1 << 30, n.name))
    return JobReport(decide(job, nodes), nodes, incidents, problems)
