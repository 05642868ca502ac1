"""The names inside a capture bundle, and what each one is: the one place that knows them.

`faultkit capture` writes these names and `bundle.py` reads them back; both import them from
here, so a file is never evidence in a folder and history in the tarball of the same bundle.
"""

from __future__ import annotations

from pathlib import PurePosixPath

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
BUNDLE_ENV = "FAULTKIT_BUNDLE"           # in every captured process's environment: the bundle it writes to
CORES_DIR = "cores"                      # GPU (and CPU) core dumps and their debugger transcripts
FACT_TOOLS = ("rocminfo", "rocm-smi", "amd-smi", "nvidia-smi", "lspci")   # system facts: <tool>.txt
FACT_FILES = frozenset(f"{t}.txt" for t in FACT_TOOLS)

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


def classify(rel: str, captured: bool) -> str:
    """`captured`: the folder has a faultkit manifest, so capture's own files are known by name.
    A folder a user assembled by hand has none of them: every file there is read for what it is."""
    p = PurePosixPath(rel.replace("\\", "/").lstrip("./") or rel)
    name, top = p.name, len(p.parts) == 1
    if name.startswith(".") or p.suffix in OUTPUT_SUFFIXES or name == MANIFEST_TMP:
        return OUTPUT
    if name == MANIFEST and top:
        return MANIFEST_ROLE
    if captured and p.parts and p.parts[0] == ROCPROF_DIR:
        return TRACE
    if captured and p.parts and p.parts[0] == CORES_DIR and name.endswith(".merged"):
        return OUTPUT             # what roccoremerge made of a GPU core and a host core: opened already
    if captured and p.parts and p.parts[0] == CORES_DIR and not name.endswith(".txt"):
        return CORE
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
