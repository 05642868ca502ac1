"""The triage, stage by stage: collect -> parse logs -> fault time -> read the trace window ->
correlate -> (the caller renders the report).

This is the one place that knows the order; the parsers only parse and the analyses only take
records and tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .analyze.debug_stop import resolve_with
from .analyze.fault_time import LogClock, fault_time
from .analyze.allocation_owner import black_box, fault_addresses
from .analyze.faults import collect_faults, other_processes
from .analyze.incident import KEY_EVENTS, Incident
from .analyze.next_steps import suggest
from .analyze.collectives import lagging_ranks
from .analyze.hang import analyse as analyse_hang
from .analyze.running import running_kernels
from .analyze.trace_findings import WINDOW_NS, analyse_traces, gpu_process_env
from .bundle import InputFile, Inputs, collect
from .ingest.core_file import HOST, inspect_core
from .ingest.code_object import code_objects_in
from .ingest.agent_files import parse_agent
from . import sources
from .sources import Setting, TextInput, detect_kinds
from .ingest.flight_recorder import parse_flight_record
from .ingest.schema import record_pids
from .ingest.normalize import normalize
from .ingest.stacks import as_samples, parse_samples
from .ingest.traces import read_trace_paths, trace_end_ns, trace_files
from .judge import judge
from .manifest import Manifest
from .model import HANG_SYMPTOMS, CoreRecord, Problem

FRAMEWORKS = ("sglang", "SGLang", "vllm", "vLLM")      # servers whose own switches next steps may name
AFTER_FAULT_NS = 1_000_000_000      # trace rows kept after the fault: written at completion, they come later


@dataclass(frozen=True)
class TriageOptions:
    env: dict[str, str] | None = None    # variables the user says the run had (else the capture's record)
    window_ns: int = WINDOW_NS           # how far before the fault the analyses look
    read_ns: int | None = None           # how much of a trace to load, if more than the window
    read_all: bool = False               # the whole trace (the timeline's `--window all`)
    debugger: str | None = None          # opens GPU core dumps (default: cuda-gdb / rocgdb on PATH)
    open_cores: bool = True              # run the debugger on cores that have no transcript yet


def triage(paths: list[str], opts: TriageOptions = TriageOptions()) -> Incident:
    with collect(paths) as inputs:     # copies out of archives are deleted when the triage is done
        return inputs.named(build(inputs, opts))


def build(inputs: Inputs, opts: TriageOptions = TriageOptions()) -> Incident:
    inc = Incident(problems=list(inputs.problems), capture=inputs.manifest if inputs.captured else None,
                   missing=list(inputs.missing))
    if inputs.captured or inputs.trial:     # a capture bundle, or a trial folder (its result.json's clocks)
        inc.log_clock = LogClock(inputs.stamps, inputs.manifest.start if inputs.manifest else inputs.anchors)
    transcripts = _open_cores(inputs, inc, opts)
    kinds_seen, objects, logs = _parse_files(inputs.files + transcripts, inc)
    inc.running = running_kernels([(c, logs[c.transcript]) for c in inc.cores if c.transcript in logs])
    _hang(inputs, inc)
    for finding in inc.stops:
        resolve_with(finding, objects, inc.debugger.code_objects)
    inc.problems.extend(inc.runtime.problems)
    inc.problems.extend(inc.kernel.problems)
    inc.problems.extend(inc.debugger.problems)
    inc.faults = collect_faults(inc.runtime, inc.kernel)
    captured = {p["pid"] for p in inputs.environ if isinstance(p.get("pid"), int)} if inputs.captured else set()
    inc.faults, inc.other_faults = other_processes(inc.faults, captured)
    inc.faults += sources.faults(inc)
    _pasted_hang(inc)
    if inputs.traces:
        _read_traces(inputs, inc, opts)
    if inputs.agent:
        _join_black_box(inputs, inc)
    # Every source's claims (in the registry's order, the order ties are broken) go to the judge.
    manifest = inputs.manifest if inputs.captured else Manifest(schema=None)
    system = manifest.system or {}
    rocm = system.get("rocm_version") if isinstance(system.get("rocm_version"), str) else None
    ended_by = manifest.ended_by
    judged = judge(sources.claims(inc, Setting(rocm, ended_by)), inc.faults, ended_by)
    inc.verdict, inc.groups = judged.verdict, judged.incidents
    if inc.traces:
        inc.traces.rank()
    inc.report_points = [r for r in inc.runtime.report_points if not _our_interrupt(r, manifest)]
    inc.kernel_events = [e for e in inc.kernel.events if e.kind in KEY_EVENTS]
    # Kernel events (a host segfault line) stay: a short-lived child of the target can die before the
    # capture lists it, so a pid missing from the record does not prove another job's.
    inc.next_steps = suggest(inc.runtime, inc.kernel, inc.faults, inc.verdict, kinds_seen, inc.stops, inc.cores,
                             {k[len("mentions:"):] for k in kinds_seen if k.startswith("mentions:")},
                             bool(inputs.traces), inc.debugger.events, stacks=inc.hang, captured=inputs.captured,
                             exit_code=manifest.exit_code if inputs.captured else None,
                             kernel_log_readable=manifest.kernel_log.readable
                             if inputs.captured and manifest.kernel_log else None,
                             tree_pids=record_pids(inputs.environ) if inputs.captured else None)
    if not inputs.files and not inputs.traces and not inputs.cores and not inputs.hang:
        inc.problems.append(Problem("<inputs>", "no readable input files"))
    return inc


def _join_black_box(inputs: Inputs, inc: Incident) -> None:
    """The agent's records against the fault's address (the core's focused lane first) and time."""
    log = parse_agent([(f.name, f.data) for f in inputs.agent])
    inc.problems.extend(log.problems)
    pid_of = {c.transcript: c.pid for c in inc.cores if c.transcript}
    lanes = [(s.lane_address, pid_of.get(s.file), s.lane_address_basis or "", s.lane_operand) for s in inc.stops
             if s.lane_address is not None]
    at = fault_time(inc.runtime, inc.kernel, inc.log_clock, None).boottime_ns
    if at is None and inc.log_clock is not None:       # the CUDA driver's exception line, stamped on arrival
        at = min((t for f in inc.faults if f.source == "runtime" and f.origin
                  for t in [inc.log_clock.of_line(f.origin.file, f.origin.line)] if t is not None), default=None)
    inc.black_box = black_box(log, fault_addresses(inc.faults, lanes), at)


def _hang(inputs: Inputs, inc: Incident) -> None:
    """A capture's stack samples (the last round it took) and every rank's flight record."""
    rounds = {}
    for f in inputs.hang:
        name = Path(f.name).name
        if name.startswith("samples-") and name.endswith(".json"):
            samples, interval, problems = parse_samples(f.data.decode(errors="replace"), f.name)
            inc.problems += [Problem(f.name, p) for p in problems]
            if samples:
                rounds[name] = (samples, interval)
        elif Path(f.name).parent.name != "stacks" or not name.endswith((".txt", ".json")):
            rc = parse_flight_record(f.data, f.name)
            said = [p.removeprefix(f"{f.name}: ") for p in rc.problems]     # the problem names the file
            inc.problems += [Problem(f.name, p) for p in said] + [Problem(f.name, p, internal=True)
                                                                  for p in rc.internal]
            inc.collectives.append(rc)
    tags = [c.get("tag") for c in (inputs.manifest.hang_check if inputs.manifest else None) or []
            if isinstance(c, dict)]
    order = [f"samples-{t}.json" for t in tags if f"samples-{t}.json" in rounds] or sorted(rounds)
    lags = lagging_ranks(inc.collectives)
    if order or lags:
        samples, interval = rounds[order[-1]] if order else ([], None)
        inc.hang = analyse_hang(samples, interval, lags, inc.running)


def _pasted_hang(inc: Incident) -> None:
    """Stack dumps and watchdog lines pasted as inputs (no capture's samples): the hang section
    from them, unless a GPU fault or a debugger stop is the story. Saved dumps of one process are
    its samples in the order given."""
    # a collective's timeout is the hang's symptom, not a fault: the stacks still tell the hang
    if inc.hang is not None or inc.stops or any(f.kind not in HANG_SYMPTOMS for f in inc.faults):
        return
    lags = lagging_ranks(inc.collectives)
    if inc.pasted_stacks or lags:
        inc.hang = analyse_hang(as_samples(inc.pasted_stacks), None, lags, inc.running)


def _our_interrupt(point, manifest: Manifest) -> bool:
    """A KeyboardInterrupt traceback of a target that capture itself stopped with SIGINT (at its
    timeout, a hang, the user's Ctrl-C): how the stop looked from inside, not where an error was reported."""
    stopped = manifest.stopped_with or []
    return "SIGINT" in stopped and (point.exception or "").startswith("KeyboardInterrupt")


def _open_cores(inputs: Inputs, inc: Incident, opts: TriageOptions) -> list[InputFile]:
    """Each GPU core is opened in its debugger once: a capture saved the transcript beside it; a
    core from elsewhere is opened now (the transcript stays in memory, the inputs untouched)."""
    recorded = {}
    if inputs.captured:
        for c in inputs.manifest.cores or []:
            recorded[Path(c.path).name] = c
    cores = [(p, inspect_core(p)) for p in inputs.cores]
    present = {Path(p).name for p in inputs.cores}
    for name, c in recorded.items():
        # A bundle passed on without its core files (they can be large) still has their transcripts.
        saved = _saved_transcripts(name, inputs.files)
        if name not in present and saved and c.platform not in (None, HOST):
            inc.cores.append(CoreRecord(c.path, str(c.platform), c.pid, c.size,
                                        c.how_found, c.analysed_with, saved[0], None,
                                        ["the core file is not among the inputs; its transcript is"]))
    hosts = {c.pid: c.path for _, c in cores if c is not None and c.platform == HOST and c.pid is not None}
    made: list[InputFile] = []
    if any(core is not None and core.platform != HOST for _, core in cores):
        # the debugger driver (subprocess, redaction) only where a GPU core is to be opened: a text
        # triage's start-up does without it (issue #35; tests/test_startup.py)
        from .core_debugger import DEFAULT_DEBUGGER, debugger_for, how_to_open, open_core
    for path, core in cores:
        name = Path(path).name
        rec = CoreRecord(path, core.platform if core else "not a core", core.pid if core else None,
                         core.size if core else None, recorded[name].how_found if name in recorded else None)
        inc.cores.append(rec)
        if core is None:
            rec.problems.append("named like a core but not an ELF core file")
            continue
        rec.problems += [p.message for p in core.problems]
        if core.platform == HOST:
            continue
        saved = _saved_transcripts(name, inputs.files)
        if saved:
            rec.analysed_with = (recorded[name].analysed_with if name in recorded else None) or "a debugger (transcript saved)"
            rec.transcript = saved[0]
            continue
        tool = debugger_for(core, opts.debugger) if opts.open_cores else None
        if tool is None:
            rec.open_with = how_to_open(core, host_core=hosts.get(core.pid))
            rec.problems.append(f"not opened: {DEFAULT_DEBUGGER[core.platform]} is not installed here"
                                if opts.open_cores else "not opened (--no-open-cores)")
            continue
        op = open_core(core, tool, host_core=hosts.get(core.pid))
        rec.analysed_with, rec.problems = tool, rec.problems + op.problems
        if op.transcript:
            rec.transcript = f"{path} ({Path(tool).name} -batch)"
            made.append(InputFile(rec.transcript, op.transcript.encode()))
        else:
            rec.open_with = how_to_open(core, host_core=hosts.get(core.pid))
    return made


def _saved_transcripts(core_name: str, files: list[InputFile]) -> list[str]:
    """Transcripts a capture saved beside a core: `<core>.<debugger>.txt`."""
    return [f.name for f in files if Path(f.name).name.startswith(core_name + ".") and f.name.endswith(".txt")]


def _parse_files(files: list[InputFile], inc: Incident) -> tuple[set[str], list, dict]:
    core_transcripts = {c.transcript for c in inc.cores if c.transcript}
    kinds_seen: set[str] = set()
    objects = []
    logs = {}         # per transcript: a core's transcript is judged on its own
    for f in files:
        got = f.log()             # read now, one file at a time (a big log: the prefilter's excerpt)
        inc.problems.extend(got.problems)
        if got.binary is not None:
            found, problems = code_objects_in(got.binary, f.name)
            objects += found
            inc.problems.extend(problems)
            inc.inputs.append({"name": f.name, "kinds": ["code-object"] if found else ["binary"], "bytes": got.size})
            continue
        text, size = normalize(got.text), got.size     # a paste's wrappers off: no parser sees them
        del got
        kinds = detect_kinds(text)
        kinds_seen |= kinds
        kinds_seen |= {f"mentions:{w.lower()}" for w in FRAMEWORKS if w in text}
        inc.inputs.append({"name": f.name, "kinds": sorted(kinds), "bytes": size})
        if getattr(text, "notes", None) is not None:
            inc.inputs[-1]["read_as_pasted"] = text.notes.sentences()
        records = sources.read(inc, TextInput(f.name, text, frozenset(kinds), f.name in core_transcripts))
        if "debugger" in records:
            logs[f.name] = records["debugger"]
    return kinds_seen, objects, logs


def _read_traces(inputs: Inputs, inc: Incident, opts: TriageOptions) -> None:
    files = trace_files(inputs.traces)           # walked once: the end of the trace, then the window
    ft = fault_time(inc.runtime, inc.kernel, inc.log_clock, trace_end_ns(files))
    span = max(opts.window_ns, opts.read_ns or 0)
    bounded = ft.boottime_ns is not None and not opts.read_all
    since = ft.boottime_ns - span if bounded else None
    # Both sides of the window: a fault in the middle of a long trace (one rank died, the others
    # ran on) reads only the window around it, with 1 s after for work that ended later.
    until = ft.boottime_ns + AFTER_FAULT_NS if bounded else None
    trace = read_trace_paths(files, since_ns=since, until_ns=until)
    env, source = opts.env, "--env given to triage"
    if env is None and inputs.captured:
        env, source = gpu_process_env(inputs.environ), "the capture's process environment record"
    inc.traces = analyse_traces(trace, ft, inc.faults, env, source, opts.window_ns)
    inc.problems.extend(trace.problems)
    for t in trace.files:
        inc.inputs.append({"name": t["path"], "kinds": [f"trace:{t.get('table')}"], "rows": t["rows"]})
