"""The names inside a capture bundle, and what each one is: the one place that knows them.

`faultkit capture` writes these names and `bundle.py` reads them back; both import them from
here, so a file is never evidence in a folder and history in the tarball of the same bundle.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from .agent import files as agent_files

BUNDLE_SCHEMA = "faultkit.bundle/1"
MANIFEST = "manifest.json"
MANIFEST_TMP = "manifest.json.tmp"
ENVIRON = "environ.json"                 # every process's command line and real environment
KERNEL_BEFORE = "kernel-before.log"      # the boot's kernel log up to the start: history, never evidence
KERNEL_FOLLOW = "kernel.log"             # kernel lines that arrived during the capture
KERNEL_AFTER = "kernel-after.log"        # a snapshot at the end: used only where the follower caught nothing
SERVER = "server"                        # the target's output: server.log (raw) and server.times.tsv
TIMES_SUFFIX = ".times.tsv"              # first line of a block, wall, CLOCK_MONOTONIC, CLOCK_BOOTTIME of its arrival
DEBUGGER = "debugger.txt"                # launch mode; attach mode writes debugger-<pid>.txt
ROCPROF_DIR = "rocprofv3"
AGENT_DIR = agent_files.DIR             # the in-process agent's files, per process (faultkit/agent/files.py)
BUNDLE_ENV = "FAULTKIT_BUNDLE"           # in every captured process's environment: the bundle it writes to
CORES_DIR = "cores"                      # GPU (and CPU) core dumps and their debugger transcripts
STACKS_DIR = "stacks"                    # host stacks of the live processes at a hang: the tools' output, and
STACK_SAMPLES = "samples-{tag}.json"     # the records of each sampling round (read back by triage)
COLLECTIVES_DIR = "collectives"          # PyTorch's flight-recorder dumps, one per rank
FLIGHT_RECORD_PREFIX = "nccl_trace_rank_"   # TORCH_NCCL_DEBUG_INFO_TEMP_FILE's file name: torch appends the rank
FACT_TOOLS = ("rocminfo", "rocm-smi", "amd-smi", "nvidia-smi", "lspci")   # system facts: <tool>.txt
FACT_FILES = frozenset(f"{t}.txt" for t in FACT_TOOLS)
# A trial folder of `faultkit trials` / `amplify` (trials/runner.py) is written with capture's names
# above (server.log and its .times.tsv, kernel.log, environ.json, cores/, agent/) and no manifest:
# its record of the run, with the clocks at its start, is result.json.
TRIAL_RESULT = "result.json"
TRIAL_RESULT_SCHEMA = "faultkit.trials.result/1"
PACK_MANIFEST = "pack-manifest.json"     # `faultkit pack`: what the shareable copy left out, and why
LOCK = ".lock"                           # held while a capture writes the bundle; removed at its end
RESERVE = ".reserve"                     # disk kept for the capture's final manifest; removed at its end

# Rendered reports and pictures are outputs, not evidence: reading one back would count its faults twice.
OUTPUT_SUFFIXES = frozenset({".pftrace", ".png", ".jpg", ".so", ".o", ".pyc", ".md", ".html"})
TRACE_SUFFIXES = frozenset({".csv", ".db", ".dat"})


def fact_file(tool: str) -> str:
    return f"{tool}.txt"


def log_of(name: str) -> str:
    return name + ".log"


def times_of(name: str) -> str:
    return name + TIMES_SUFFIX


def debugger_transcript(pid: int | None = None) -> str:
    return DEBUGGER if pid is None else f"debugger-{pid}.txt"


def log_for_times(times_name: str) -> str:
    """`server.times.tsv` stamps the lines of `server.log`."""
    return times_name[: -len(TIMES_SUFFIX)] + ".log"


# What a file of a bundle is, from its path relative to the bundle's root.
MANIFEST_ROLE = "manifest"
EVIDENCE = "evidence"          # a log or transcript: parsed for faults
TRACE = "trace"                # tracer output: tables, read by the trace readers only
STAMPS = "stamps"              # arrival stamps of a log's lines
ENVIRONMENT = "environment"    # process records
HISTORY = "history"            # the kernel log from before the capture
KERNEL_SNAPSHOT = "kernel-after"
FACTS = "facts"
OUTPUT = "output"              # something faultkit or the user rendered: never read
CORE = "core"                  # a core dump (by name; its content decides what it is)
AGENT = "agent"                # the in-process agent's ring, sites, stacks and header files
HANG = "hang"                  # stack samples and flight records: read by the hang analysis only


def written_by_capture(rels) -> bool:
    """Whether a folder's files are a capture's by their names alone (kernel-before.log,
    environ.json, a `.times.tsv` at its top): what a bundle whose manifest is damaged is read as."""
    top = {r for r in rels if "/" not in r.replace("\\", "/").lstrip("./")}
    return KERNEL_BEFORE in top or ENVIRON in top or any(r.endswith(TIMES_SUFFIX) for r in top)


def classify(rel: str, captured: bool) -> str:
    """`captured`: the folder has a faultkit manifest, so capture's own files are known by name.
    A folder a user assembled by hand has none of them: every file there is read for what it is."""
    p = PurePosixPath(rel.replace("\\", "/").lstrip("./") or rel)
    name, top = p.name, len(p.parts) == 1
    if name.startswith(".") or p.suffix in OUTPUT_SUFFIXES or name == MANIFEST_TMP:
        return OUTPUT
    if name == MANIFEST and top:
        return MANIFEST_ROLE
    if agent_files.split(name) is not None and (len(p.parts) == 1 or p.parts[-2] == AGENT_DIR):
        return AGENT              # by name (a user may pass the agent's folder alone)
    if captured and len(p.parts) > 1 and p.parts[0] == AGENT_DIR:
        return OUTPUT             # a header being replaced when the process died (`.tmp`)
    if name == PACK_MANIFEST and top:
        return OUTPUT             # faultkit's own list of a packed copy: no evidence in it
    if captured and p.parts and p.parts[0] == ROCPROF_DIR:
        return TRACE
    if captured and p.parts and p.parts[0] == CORES_DIR and name.endswith(".merged"):
        return OUTPUT             # what roccoremerge made of a GPU core and a host core: opened already
    if captured and p.parts and p.parts[0] == CORES_DIR and not name.endswith(".txt"):
        return CORE
    if captured and len(p.parts) > 1 and p.parts[0] in (STACKS_DIR, COLLECTIVES_DIR):
        return HANG
    if captured and top:
        if name == KERNEL_BEFORE:
            return HISTORY
        if name == KERNEL_AFTER:
            return KERNEL_SNAPSHOT
        if name == ENVIRON:
            return ENVIRONMENT
        if name in FACT_FILES:
            return FACTS
        if name.endswith(TIMES_SUFFIX):
            return STAMPS
    if p.suffix in TRACE_SUFFIXES or name.endswith("_results.json"):
        return TRACE
    return EVIDENCE
