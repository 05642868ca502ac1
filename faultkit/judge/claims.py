"""A claim: one piece of evidence's say about which kernel faulted, typed.

An analysis does not decide how sure anyone may be; it says what its evidence is (the basis: kind,
producer and the producer's version), the highest level that basis could ever support (its
ceiling), how strong it is against other claims (its strength, from the basis table below), and
the identities it carries (pid, GPU, queue, page, engine, time) so the judge can corroborate it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from .levels import CANDIDATES, CERTAIN, LIKELY, RANK, Level


# What a kind of evidence is: its ceiling, its strength, and its tier. A claim is contested only
# by claims of its own tier or a higher one: a debugger that watched the wave outranks any log,
# a log that names a kernel outranks a trace's inference, and a snapshot of a hung GPU speaks
# only where nothing faulted. `needs`: identities the claim must carry wherever the incident
# carries them before it may rise above a candidate (unknown is not agreement).
#   kind                     ceiling    strength tier        needs
BASES: dict[str, tuple[Level, float, str, tuple[str, ...]]] = {
    "sanitizer":             (CERTAIN,   1.0,  "observed", ()),
    # racecheck, initcheck, synccheck: a bug a tool watched in a kernel that it did not end
    "sanitizer-finding":     (LIKELY,    0.85, "observed", ()),
    "core-stop":             (CERTAIN,   1.0,  "observed", ()),
    "debugger-stop":         (CERTAIN,   1.0,  "observed", ()),
    "debugger-stop-inexact": (LIKELY,    0.9,  "observed", ()),
    "driver-exception":      (CERTAIN,   1.0,  "observed", ()),
    "debug-agent-wave":      (LIKELY,    0.9,  "reported", ()),
    # a device-side assert: the function that asserted (the kernel, or a device function in it)
    "device-assert":         (LIKELY,    0.8,  "reported", ()),
    # the fault placed in a device function, no entry point visible (a sanitizer report cut in its
    # device frames, an assert in a lambda or a library helper): said, never a kernel
    "device-function":       (CANDIDATES, 0.5,  "reported", ()),
    # compute-sanitizer's `[clone K(...)] f(...)` with K's own frame not shown: nvcc compiles a noinline
    # device function into each kernel that calls it, directly or not, and names the copy `$K$f`
    # (nm of a cubin, nvcc 13.0); a name in a bracket, not a frame the tool walked: a candidate
    "cloned-into":           (CANDIDATES, 0.45, "reported", ()),
    "rocclr-memory-fault":   (CANDIDATES, 0.7,  "reported", ()),
    "queue-callback":        (CANDIDATES, 0.65, "reported", ()),
    "hang-analysis-pending": (CANDIDATES, 0.6,  "reported", ()),
    "hang-analysis":         (CANDIDATES, 0.5,  "reported", ()),
    "dispatch-log":          (CANDIDATES, 0.5,  "reported", ()),
    "library-log":           (CANDIDATES, 0.45, "reported", ()),
    # compilation and library-selection lines name kernels built or chosen, not run
    "hint":                  (CANDIDATES, 0.3,  "reported", ()),
    # kernels named away from the fault (analyze/mention_claims.py, ingest/kernel_mentions.py): launched
    # (cuda-gdb `info cuda kernels`, a profiler's kernel rows), dispatched (a kernel trace, the dispatch
    # log's earlier dispatches), disassembled (GPU code a debugger dumped), built (a compiler's entry
    # function), tuned (an autotuner's), named in the text (a person's words beside a fault). Their tier,
    # "mentioned", contests no other claim and crowds out no snapshot: a fault must tie them.
    "launched":              (CANDIDATES, 0.35, "mentioned", ()),
    "dispatched":            (CANDIDATES, 0.3,  "mentioned", ()),
    "disassembled":          (CANDIDATES, 0.3,  "mentioned", ()),
    "built":                 (CANDIDATES, 0.2,  "mentioned", ()),
    "tuned":                 (CANDIDATES, 0.2,  "mentioned", ()),
    "named-in-text":         (CANDIDATES, 0.4,  "mentioned", ()),
    "trace-running":         (LIKELY,    0.6,  "inferred", ("node",)),
    "trace-launch":          (LIKELY,    0.55, "inferred", ("node",)),
    "trace-dispatch-gap":    (LIKELY,    0.5,  "inferred", ("node",)),
    "trace-copy":            (LIKELY,    0.5,  "inferred", ("node",)),
    "trace-other":           (LIKELY,    0.4,  "inferred", ("node",)),
    "running-at-dump":       (LIKELY,    0.6,  "snapshot", ()),
    # a kernel on the GPU of a process whose host stacks show it stuck in a GPU wait across two
    # samples (analyze/hang.py): it outranks the snapshots of other processes' GPUs
    "hang-stuck-kernel":     (LIKELY,    0.7,  "reported", ()),
    # claims that name no kernel: what the verdict says where no kernel can be named
    "host-stop":             (CANDIDATES, 0.0,  "observed", ()),
    "unopened-core":         (CANDIDATES, 0.0,  "observed", ()),
    # where the fault address lies: the agent's map of the faulting process, the trace's allocations
    "address-owner":         (CANDIDATES, 0.0, "observed", ()),
    "trace-address":         (CANDIDATES, 0.0, "inferred", ()),
    "hang-stacks":           (CANDIDATES, 0.0,  "observed", ()),   # idle or busy: the stacks' words (no kernel)
    # a hang the stacks show, no kernel named: a thread stuck on the GPU or in a collective across
    # the samples, or a rank behind the others, is a likely hang; a host lock held through them or a
    # dead worker the rest waits for is one explanation among others
    "hang-stuck":            (LIKELY,    0.0,  "observed", ()),
    "hang-blocked":          (CANDIDATES, 0.0, "observed", ()),
    # a collective's watchdog timeout (analyze/watchdog_claims.py): who waits in which collective; no kernel
    "watchdog-timeout":      (CANDIDATES, 0.0, "reported", ()),
}
TIERS = {"mentioned": -1, "snapshot": 0, "inferred": 1, "reported": 2, "observed": 3}


@dataclass(frozen=True)
class Basis:
    """What kind of evidence a claim rests on and which producer printed it."""
    kind: str                   # a key of BASES
    producer: str               # the tool or runtime that printed the evidence (ROCclr, rocgdb, rocprofv3 ...)
    version: str | None = None  # the producer's version where the evidence or the bundle says it

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "producer": self.producer, "version": self.version}


@dataclass
class Identities:
    """What a claim says about where the fault was; None is unknown, never a match."""
    pid: int | None = None
    node: int | None = None        # KFD node (ROCr's node-N, a trace's agent node)
    gpu: str | None = None         # PCI address or device as the producer printed it
    queue: str | None = None
    stream: int | None = None
    page: int | None = None        # address >> 12
    engine: str | None = None      # shader | copy | ...
    time_ns: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


@dataclass
class Claim:
    """One piece of evidence naming a kernel (or none), with its place: what the judgment weighs."""
    kernel: str | None             # the kernel named (None: the claim names none)
    basis: Basis
    why: str                       # the evidence in words, with its place
    ids: Identities = field(default_factory=Identities)
    origin: str | None = None      # file:line of the evidence
    ceiling: str = ""              # from BASES unless the producer's version or the evidence lowers it
    strength: float = -1.0         # from BASES unless the analysis measured one
    named: bool = True             # False: `kernel` is a description ("kernel launched by thread 7 ...")
    # A kernel is the launched entry point: True where the evidence shows it (a launch frame, a
    # dispatch row, a kernel symbol, the outermost device frame); None where the name may be a
    # device function called by the kernel. Only an entry point can be certain.
    entry: bool | None = True
    contradiction: str | None = None   # the report contradicts itself: how
    went_on: str | None = None         # the program went on after this report: the evidence that says so
    ceiling_note: str | None = None    # why the basis's ceiling was lowered where it was (e.g. an old producer)
    alias: str | None = None           # an unnamed claim's likely name, from indirect evidence (said as such)
    headline: str | None = None        # the claim in one sentence, said first where it narrows the search most
    # the device function the fault was in, where the evidence names one apart from the kernel (a
    # sanitizer's `at` line under the kernel's frame, or the only function shown: see `in_device_function`)
    device_function: str | None = None
    # Filled by the judge:
    id: str | None = None              # "<basis kind>-<n>": what candidates point at
    level: str | None = None           # the level this claim was allowed (<= ceiling)
    limits: list[str] = field(default_factory=list)   # why it was not allowed more
    notes: list[str] = field(default_factory=list)    # what corroboration said
    plausible: bool | None = None      # corroboration left it standing (no identity disagreed, needs met)

    def __post_init__(self) -> None:
        ceiling, strength, _, _ = BASES[self.basis.kind]
        self.ceiling = self.ceiling or ceiling
        if self.strength < 0:
            self.strength = strength

    @property
    def tier(self) -> str:
        return BASES[self.basis.kind][2]

    @property
    def needs(self) -> tuple[str, ...]:
        return BASES[self.basis.kind][3]

    @property
    def text(self) -> str:
        """The claim's why with what corroboration said of it."""
        return "; ".join([self.why, *self.notes])

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "kernel": self.kernel, "named": self.named, "basis": self.basis.to_json(), "ceiling": self.ceiling,
                "level": self.level, "strength": round(self.strength, 3), "entry_point": self.entry,
                "device_function": self.device_function,
                "identities": self.ids.to_json(), "origin": self.origin, "why": self.why, "notes": self.notes,
                "limits": self.limits, "plausible": self.plausible}


def in_device_function(function: str, producer: str, why: str, ids: Identities | None = None,
                       origin: str | None = None, **kw: Any) -> Claim:
    """The fault placed in a device function where no entry point is visible: said, never a kernel.
    One wording for every producer (sanitizer reports, asserts, debugger stops)."""
    return Claim(f"device function {function} (a helper of an unnamed kernel)", Basis("device-function", producer),
                 why, ids or Identities(), origin, named=False, entry=False, device_function=function, **kw)
