"""`faultkit watch`: a node agent. It follows the kernel log (and any server logs named), and on each GPU
fault or hang sign opens an incident: a folder in the spool with the log lines around it, the faulting
processes' records from /proc, the cores they left, its triage report and a manifest; then it emits
the incident (Prometheus, OpenTelemetry, the registry).

Bounded by design: a storm of fault lines makes one incident with a count (an incident stays open while
signs keep coming, until `quiet_s` without one or `max_open_s` in all), an incident keeps at most
`max_lines` lines (the rest are counted), and the sources are read in chunks. What is a sign is the
parsers' business: a batch of lines is a sign where the kernel-log or runtime-log parser finds a fault
or a hang event in it, so the agent and `triage` never disagree on what a fault is.
"""

from __future__ import annotations

import collections
import hashlib
import io
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import layout, redact
from ..private_files import private_dir, write_evidence
from ..ingest import prefilter
from ..ingest.kernel_log import parse_kernel_log
from ..ingest.runtime_log import parse_runtime_log
from .emit import Metrics, OtelLogs, private_json
from .hardware import judge_incident
from .record import Context, IncidentRecord, records_from_report
from .sources import FileSource, KmsgSource, load_cursors, save_cursors

INCIDENT_SCHEMA = "faultkit.incident/1"
# Kernel-log events that are hang or hardware signs (the parser's own kinds); faults and Xids always are.
SIGN_EVENTS = frozenset({"ring-timeout", "gpu-reset", "ring-reset", "vram-lost", "ras", "mes", "sq-intr", "core-dump"})
_CORE_NAME = re.compile(r"^(?:gpucore|core)[._-]?(\d+)")
KMSG = "kmsg"


@dataclass
class WatchOptions:
    node: str
    spool: Path
    kernel_log: str = KMSG                  # "kmsg" (/dev/kmsg) or a file that a syslog daemon writes
    logs: tuple[str, ...] = ()              # server logs to follow too
    core_dirs: tuple[str, ...] = ()         # where the runtimes drop cores (ROCm: the working directory)
    quiet_s: float = 5.0
    max_open_s: float = 60.0
    context_lines: int = 200
    max_lines: int = 5000
    poll_s: float = 0.5
    from_start: bool = False                # a file's first start: read it whole (else from its end)
    metrics_port: int | None = None
    metrics_addr: str = "127.0.0.1"
    textfile: str | None = None
    otlp_endpoint: str | None = None
    otel_exporter: object = None            # tests: the SDK's in-memory exporter
    registry_db: str | None = None
    triage: bool = True


@dataclass
class Open:
    opened: float
    first_line: str
    last_sign: float
    lines: dict[str, list[bytes]] = field(default_factory=dict)
    signs: int = 0
    dropped: int = 0
    pids: set = field(default_factory=set)
    kinds: collections.Counter = field(default_factory=collections.Counter)
    gpus: set = field(default_factory=set)


def signs_in(name: str, lines: list[bytes], kernel: bool) -> tuple[int, set, collections.Counter, set]:
    """Signs in a batch: how many, the pids and GPUs they name, and their kinds. Only the lines near
    a parser's words are parsed (the prefilter's excerpt, as triage reads a big log): a batch of
    quiet lines costs one pass of one pattern, not the parsers' (about 1 s a MB)."""
    pids, kinds, gpus = set(), collections.Counter(), set()
    text = prefilter.scan(io.BytesIO(b"\n".join(lines)), name).data
    if not text:
        return 0, pids, kinds, gpus
    if kernel:
        log = parse_kernel_log(text, name)
        for f in log.faults:
            kinds["page-fault"] += 1
            pids.add(f.pid)
            gpus.add(f.pci)
        for x in log.xids:
            kinds[f"xid-{x.xid}"] += 1
            pids.add(getattr(x, "pid", None))
            gpus.add(x.pci)
        for e in log.events:
            if e.kind in SIGN_EVENTS:
                kinds[e.kind] += 1
                gpus.add(e.pci)
                pids.add((e.fields or {}).get("pid"))
    else:
        log = parse_runtime_log(text, name)
        for f in log.faults:
            kinds[f.kind] += 1
            pids.add(getattr(f, "pid", None))
    pids.discard(None)
    gpus.discard(None)
    return sum(kinds.values()), pids, kinds, gpus


class Watcher:
    def __init__(self, opts: WatchOptions, clock=time.time):
        self.opts = opts
        self.clock = clock
        self.problems: list[str] = []
        try:
            private_dir(opts.spool)
        except OSError as exc:         # read-only, full: incidents are still found, counted, sent, printed
            self.problems.append(f"{opts.spool}: the spool is not usable ({exc.strerror or exc}): incidents are "
                                 f"counted and sent, not kept")
        self.cursor_file = str(opts.spool / ".cursors.json")
        cursors, damaged = load_cursors(self.cursor_file)
        self.problems += [damaged] if damaged else []
        self.sources: dict[str, object] = {}
        if opts.kernel_log:
            key = f"kernel:{opts.kernel_log}"
            self.sources[key] = (KmsgSource(cursor=cursors.get(key), from_end=not opts.from_start) if opts.kernel_log == KMSG else
                                 FileSource(opts.kernel_log, cursors.get(key), from_end=not opts.from_start))
        for p in opts.logs:
            self.sources[f"log:{p}"] = FileSource(p, cursors.get(f"log:{p}"), from_end=not opts.from_start)
        self.context = {k: collections.deque(maxlen=opts.context_lines) for k in self.sources}
        self.open: Open | None = None
        self.closed: list[dict] = []
        self.metrics = Metrics(opts.node)
        self.otel = (OtelLogs(opts.node, opts.otlp_endpoint, opts.otel_exporter)
                     if opts.otlp_endpoint or opts.otel_exporter is not None else None)
        if opts.registry_db:                   # opened once now so a wrong --db is said at the start
            from .store import open_store
            open_store(opts.registry_db).close()
        self.server = self.metrics.serve(opts.metrics_port, opts.metrics_addr) if opts.metrics_port is not None else None
        # Each source's file name in an incident folder: two logs of one base name stay two files.
        self.file_names = evidence_names(self.sources)

    # one pass over every source
    def step(self, stop=None) -> int:
        """One pass; `stop()` true between two sources ends it early (SIGTERM never waits for all)."""
        now, read, healthy = self.clock(), 0, True
        self.behind = False
        for key, src in self.sources.items():
            if stop is not None and stop():
                break
            lines = src.read()
            self.behind |= getattr(src, "behind", False)
            if src.error:
                healthy = False
                self._problem(src.error, key)
            for note in getattr(src, "notes", ()):      # what a rotation cost, where it cost anything
                self._problem(note, key)
            if not lines:
                continue
            read += len(lines)
            try:
                n, pids, kinds, gpus = signs_in(key, lines, key.startswith("kernel:"))
            except Exception as exc:       # noqa: BLE001 - a line never stops the agent, nor loses the batch
                self._problem(f"{key}: a batch of {len(lines)} line(s) could not be parsed ({type(exc).__name__}); "
                              f"kept as evidence", key)
                n, pids, kinds, gpus = 0, set(), collections.Counter(), set()
            if n:
                self._sign(key, lines, n, pids, kinds, gpus, now)
            elif self.open is not None:
                self._keep(key, lines)
            self.context[key].extend(lines)
        self.metrics.lines.labels(self.opts.node).inc(read)
        self.metrics.up.labels(self.opts.node).set(1 if healthy else 0)
        if self.open and (now - self.open.last_sign >= self.opts.quiet_s or now - self.open.opened >= self.opts.max_open_s):
            self._close()
        self._save_state()
        return read

    def _save_state(self) -> None:
        """The cursors and the textfile. A full disk or a read-only spool is said and the agent goes
        on (the lines read stay read; after a restart they are read again, never lost)."""
        self._saved(self.cursor_file, lambda: save_cursors(self.cursor_file, {k: s.cursor for k, s in
                                                                             self.sources.items()}))
        if self.opts.textfile:
            self._saved(self.opts.textfile, lambda: self.metrics.write_textfile(self.opts.textfile))

    def _saved(self, what, write) -> bool:
        try:
            write()
            return True
        except OSError as exc:
            self._problem(f"{what}: not written ({exc.strerror or exc}); the agent goes on", "spool")
            return False

    def _problem(self, why: str, key: str) -> None:
        if why not in self.problems:
            self.problems = (self.problems + [why])[-100:]        # bounded: an agent runs for months
            self.metrics.errors.labels(self.opts.node, key).inc()

    def _sign(self, key, lines, n, pids, kinds, gpus, now) -> None:
        self.metrics.signs.labels(self.opts.node).inc(n)
        if self.open is None:
            first = next((ln for ln in lines if ln.strip()), b"").decode(errors="replace")
            self.open = Open(opened=now, first_line=first, last_sign=now)
            for k, ctx in self.context.items():      # the lines before the first sign, from every source
                self.open.lines[k] = list(ctx)
        o = self.open
        o.signs += n
        o.last_sign = now
        o.pids |= pids
        o.kinds.update(kinds)
        o.gpus |= gpus
        self._keep(key, lines)

    def _keep(self, key, lines) -> None:
        o = self.open
        kept = o.lines.setdefault(key, [])
        room = max(self.opts.max_lines - sum(len(v) for v in o.lines.values()), 0)
        kept += lines[:room]
        if len(lines) > room:
            o.dropped += len(lines) - room
            self.metrics.dropped.labels(self.opts.node).inc(len(lines) - room)

    def flush(self) -> None:
        """Close what is open (at exit, or in a one-shot check)."""
        if self.open is not None:
            self._close()
        self._save_state()

    def _close(self) -> None:
        o, self.open = self.open, None
        ident = hashlib.sha256(f"{self.opts.node}\n{o.opened}\n{o.first_line}".encode()).hexdigest()[:12]
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(o.opened))
        folder = self.opts.spool / f"{stamp}-{ident}"
        if folder.exists():                         # already written by an earlier run: never twice
            return
        evidence = []

        def write_lines() -> None:
            private_dir(folder)
            for key, lines in o.lines.items():
                path = folder / self.file_names[key]
                write_evidence(path, b"\n".join(lines) + b"\n")      # log lines: redacted on the way
                evidence.append(str(path))
        # A spool that cannot take the incident (full, read-only): it is still counted, sent and said.
        written = self._saved(folder, write_lines)
        if not written:
            try:
                folder.rmdir()              # empty: a later run may write this incident's id again
            except OSError:
                pass
        processes = [process_record(pid) for pid in sorted(o.pids)]
        summary = {"schema": INCIDENT_SCHEMA, "id": f"{stamp}-{ident}", "node": self.opts.node, "opened": o.opened,
                   "closed": self.clock(), "signs": o.signs, "kinds": dict(o.kinds), "gpus": sorted(o.gpus),
                   "pids": sorted(o.pids), "lines_dropped": o.dropped, "first": redact.text(o.first_line[:500]),
                   "processes": processes, "cores": cores_of(o.pids, self.opts.core_dirs, o.opened),
                   "capture_bundles": sorted({p["bundle"] for p in processes if p.get("bundle")}),
                   # the registry reads a bundle's host and start from these two keys
                   "system": {"host": self.opts.node}, "start": {"wall": o.opened}}
        if not written:
            summary["not_written"] = f"the spool could not take {folder}"
        report, records = None, []
        if self.opts.triage and written:
            from ..export.report import to_json
            from ..triage import TriageOptions, triage
            try:
                report = to_json(triage(evidence, TriageOptions(open_cores=False)))
                self._saved(folder / "report.json", lambda: private_json(folder / "report.json", report))
                records, _ = records_from_report(report, Context(node=self.opts.node, seen_at=o.opened,
                                                                 report=str(folder / "report.json")))
            except Exception as exc:   # noqa: BLE001 - the incident and its lines are kept whatever triage says
                summary["triage_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
                self._problem(f"incident {stamp}-{ident}: triage failed ({type(exc).__name__}); its lines are kept "
                              f"in {folder}", "triage")
                report, records = None, []
        suspect = suspicion_of(records, o, self.opts.node)
        head = records[0] if records else None
        summary.update(signature=head.signature if head else "", kernel=head.kernel if head else None,
                       level=head.level if head else "unknown", suspect=suspect)
        summary["line"] = one_line(summary)
        if written:
            self._saved(folder / layout.MANIFEST, lambda: private_json(folder / layout.MANIFEST, summary))
        kind = next(iter(o.kinds.most_common(1)), ("unknown", 0))[0]
        self.metrics.incident(head, kind, next(iter(sorted(o.gpus)), None), suspect)
        if self.otel:
            self.otel.incident(summary)
        if opts_db := self.opts.registry_db:
            if records:
                self._add(opts_db, records, folder)
        self.closed.append(summary)

    def _add(self, db: str, records, folder) -> None:
        """Into the registry, opened for this add only: a DuckDB file takes one writer, and a
        registry held open for the agent's life would block every reader (and every other agent)."""
        from .store import RegistryError, open_store
        try:
            store = open_store(db)
            try:
                store.add(records)
            finally:
                store.close()
        except RegistryError as exc:        # the incident is in the spool; the registry can take it later
            self._problem(f"{exc}; the incident stays in {folder} (faultkit registry add {folder}/report.json)",
                          "registry")

    def close(self) -> None:
        self.flush()
        for s in self.sources.values():
            s.close()
        if self.otel:
            self.otel.close()
        if self.server is not None:
            self.server[0].shutdown()


def evidence_names(sources: dict) -> dict[str, str]:
    """The file each source's lines go to in an incident folder: the kernel log's fixed name, a
    server log's base name; a base name that two logs share gets the rest of its path in its name."""
    names: dict[str, str] = {}
    for key in sources:
        if key.startswith("kernel:"):
            names[key] = layout.KERNEL_FOLLOW
    logs = [k for k in sources if not k.startswith("kernel:")]
    bases = collections.Counter(Path(k[4:]).name for k in logs)
    taken = set(names.values())
    for k in logs:
        base = Path(k[4:]).name or "log"
        name = f"{base}.log" if bases[base] == 1 else \
            re.sub(r"[^A-Za-z0-9._-]+", "_", k[4:].strip("/")) + ".log"
        while name in taken or name.startswith("."):
            name = "_" + name
        taken.add(name)
        names[k] = name
    return names


def suspicion_of(records: list[IncidentRecord], o: Open, node: str = "") -> str:
    """The registry's rule on this one incident (fleet.hardware.judge_incident): one decision, one
    word. Many nodes' patterns (a software bug) are the registry's to see."""
    return judge_incident(node, records, sorted(o.gpus), list(o.kinds)).kind


def one_line(s: dict) -> str:
    what = ", ".join(f"{k} x{n}" if n > 1 else k for k, n in sorted(s["kinds"].items()))
    kernel = f"; kernel {s['kernel']} ({s['level']})" if s.get("kernel") else ""
    gpus = f" on {', '.join(s['gpus'])}" if s["gpus"] else ""
    pids = f", pid {', '.join(map(str, s['pids']))}" if s["pids"] else ""
    return f"faultkit: {s['node']}: GPU incident: {what}{gpus}{pids}{kernel}; suspect {s['suspect']}"[:400]


def process_record(pid: int) -> dict:
    """What /proc still says of a faulting process: its command line and environment (secrets
    redacted), and the capture bundle it runs under, if any. A process that is gone says so."""
    rec: dict = {"pid": pid}
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            rec["cmdline"] = redact.argv([a.decode(errors="replace") for a in fh.read().split(b"\0") if a])
        with open(f"/proc/{pid}/environ", "rb") as fh:
            env = dict(kv.decode(errors="replace").partition("=")[::2] for kv in fh.read().split(b"\0") if b"=" in kv)
        rec["bundle"] = env.get(layout.BUNDLE_ENV)
        rec["env"] = redact.env(env)
    except FileNotFoundError:
        rec["state"] = "exited before it could be read"
    except OSError as exc:
        rec["state"] = f"not readable: {exc.strerror}"
    return rec


def cores_of(pids: set, folders: tuple[str, ...], since: float) -> list[dict]:
    """Cores the runtimes dropped for these processes (`gpucore.<pid>`, `core.<pid>`), listed, not
    copied: a core can be the size of the GPU's memory."""
    out = []
    for d in folders:
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        for e in entries:
            m = _CORE_NAME.match(e.name)
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if m and int(m.group(1)) in pids and st.st_mtime >= since - 60:
                out.append({"path": e.path, "size": st.st_size, "pid": int(m.group(1))})
    return out


ONCE_STEPS = 8          # 16 MB a source: what one check of a health-check mode may read


def run(opts: WatchOptions, once: bool = False, stop=None) -> Watcher:
    w = Watcher(opts)
    steps = 0
    try:
        while True:
            w.step(stop)
            steps += 1
            # A one-pass check (npd, slurm) reads at most ONCE_STEPS of a backlog; the next run goes on.
            if (once and (not w.behind or steps >= ONCE_STEPS)) or (stop is not None and stop()):
                break
            if not w.behind:                # a source with more waiting is read on at once
                time.sleep(opts.poll_s)
    finally:
        w.close()
    return w
