"""What the runtime logs claim about the faulting kernel (the judge decides how sure that is).

Runtime logs alone can at most make a kernel `likely` (a debug-agent wave stopped in it); names
printed by ROCclr, dispatch logs and library hints are candidates (their ceilings live in
judge.claims.BASES). A Python frame is never a claim. The CUDA driver's own exception report,
printed while it writes a core, names the excepting warp's frame #0.
"""

from __future__ import annotations

from ..judge.claims import Basis, Claim, Identities
from ..model import RuntimeLog
from .faults import driver_place

FAULT_REASONS = {"MEMORY_VIOLATION", "ADDRESS_ERROR", "APERTURE_VIOLATION", "ILLEGAL_INSTRUCTION",
                 "ASSERT_TRAP", "TRAP", "FP_DIVIDE_BY_0", "FP_INVALID_OPERATION", "INT_DIVIDE_BY_0",
                 "FP_OVERFLOW", "ECC_ERROR", "FATAL_HALT"}


def _kernel_ids(pid: int | None = None, **kw) -> Identities:
    return Identities(pid=pid, engine="shader", **kw)


def log_claims(runtime: RuntimeLog, rocm_version: str | None = None) -> list[Claim]:
    """`rocm_version`: the runtime's version where the bundle's facts give it."""
    out: list[Claim] = []
    waves: dict[tuple[str, int | None], list] = {}
    for w in runtime.waves:
        if w.kernel and set(w.reasons) & FAULT_REASONS:
            waves.setdefault((w.kernel, w.pid), []).append(w)
    for (kernel, pid), ws in waves.items():
        reasons = sorted({r for w in ws for r in w.reasons})
        imprecise = "MEMORY_VIOLATION" in reasons
        out.append(Claim(kernel, Basis("debug-agent-wave", "rocm-debug-agent", rocm_version),
                         f"rocm-debug-agent: {len(ws)} wave(s) stopped in this kernel with {'/'.join(reasons)} "
                         f"({ws[0].origin})", _kernel_ids(pid), str(ws[0].origin),
                         ceiling_note="no debugger confirmed the stop with precise memory on"
                         + ("; without precise memory the PC may be past the faulting instruction" if imprecise
                            else "")))
    for f in runtime.faults:
        if not f.kernel:
            continue
        page = f.address >> 12 if f.address else None
        if f.kind == "memory-fault-error":
            out.append(Claim(f.kernel, Basis("rocclr-memory-fault", "ROCclr", rocm_version),
                             f"ROCclr 'Memory Fault Error' names it on GPU index {f.gpu_index} ({f.origin}); "
                             f"ROCclr walks every queue, so it is not proof", _kernel_ids(f.pid, page=page),
                             str(f.origin)))
        else:
            out.append(Claim(f.kernel, Basis("queue-callback", "ROCclr", rocm_version),
                             f"the queue-callback line names it ({f.origin})",
                             _kernel_ids(f.pid, page=page, queue=f.queue), str(f.origin)))
    named = _names_of_objects(runtime)
    seen_objects: set[str] = set()
    for d in runtime.dispatches:
        if d.source != "hang-analysis":
            continue
        # a kernel object handle is never a kernel name: where another block names the same object,
        # that name stands for it (one claim, not a second 'kernel' ranked beside it)
        name = d.kernel or named.get(d.kernel_obj or "") or (f"kernel_obj={d.kernel_obj}" if d.kernel_obj else None)
        if not name:
            continue
        if not d.kernel and d.kernel_obj in named:
            if d.kernel_obj in seen_objects or any(x.kernel == name for x in runtime.dispatches
                                                   if x.source == "hang-analysis"):
                continue            # the named block's own claim covers this handle
        seen_objects.add(d.kernel_obj or "")
        pending = d.rptr is not None and d.wptr is not None and d.rptr < d.wptr
        out.append(Claim(name, Basis("hang-analysis-pending" if pending else "hang-analysis", "ROCclr", rocm_version),
                         "ROCclr hang analysis: the packet at the read pointer of "
                         + (f"HWq {d.hw_queue}" if d.hw_queue else "a queue (the block's head is not in the log)")
                         + (f" (rptr={d.rptr} < wptr={d.wptr}: in flight)" if pending else "") + f" ({d.origin})",
                         _kernel_ids(d.pid), str(d.origin)))
    last = _last_dispatch(runtime)
    if last is not None:
        out.append(last)
    library = [d for d in runtime.dispatches if d.source == "library-log"]
    if library and library[-1].kernel:
        d = library[-1]
        out.append(Claim(d.kernel, Basis("library-log", d.library or "library"),
                         f"{d.library} logged running it last before the end of the log ({d.origin})",
                         _kernel_ids(d.pid), str(d.origin)))
    for h in runtime.hints:
        out.append(Claim(h.kernel, Basis("hint", h.kind), f"{h.kind} line names it just before the fault "
                                                           f"({h.origin}): a hint only", _kernel_ids(), str(h.origin)))
    return out


def _names_of_objects(runtime: RuntimeLog) -> dict[str, str]:
    """kernel_obj handle -> the kernel name a dispatch of the same object gives (one name only: an
    object two names claim is left unnamed)."""
    names: dict[str, set[str]] = {}
    for d in runtime.dispatches:
        if d.kernel_obj and d.kernel:
            names.setdefault(d.kernel_obj, set()).add(d.kernel)
    return {obj: next(iter(ks)) for obj, ks in names.items() if len(ks) == 1}


def driver_claims(runtime: RuntimeLog) -> list[Claim]:
    """The CUDA driver's own report of the exception it wrote a core for."""
    out: list[Claim] = []
    for d in runtime.driver_exceptions:
        if not d.kernel:
            continue
        # The driver prints the warp's whole stack, #0 innermost: its last frame is the launched
        # kernel, and a #0 above it is a device function inside it.
        kernel = d.frames[-1] if d.frames else d.kernel
        inner = f"; frame #0 is {d.kernel}, a device function it called" if kernel != d.kernel else ""
        headline = (f"the CUDA driver's own exception report while writing the GPU core dump: {d.exception} "
                    f"({driver_place(d)}, PC 0x{d.pc or 0:x})")
        out.append(Claim(kernel, Basis("driver-exception", "CUDA driver"),
                         headline + "; the excepting warp's stack "
                         + (f"ends in this kernel{inner}" if len(d.frames) > 1 else "frame #0 is this kernel")
                         + f" ({d.origin})", _kernel_ids(d.pid), str(d.origin),
                         entry=True if d.frames else None, headline=headline))
    return out


def _last_dispatch(runtime: RuntimeLog) -> Claim | None:
    """The last dispatch of the AMD_LOG_LEVEL log, on the aborting queue where the runtime names one."""
    logged = [d for d in runtime.dispatches if d.source in ("aql-packet", "shader-name")]
    # A queue ROCclr found idle at the abort had finished every packet: its dispatches did not fault.
    idle = {n.fields["queue"] for n in runtime.notes if n.kind == "queue-state" and n.fields["state"] == "idle"}
    idle_note = ""
    if idle and any(d.hw_queue in idle for d in logged):
        logged = [d for d in logged if d.hw_queue not in idle]
        idle_note = (f"; the dispatches on {', '.join(sorted(idle))} are left out: ROCclr found "
                     + ("that queue idle" if len(idle) == 1 else "those queues idle"))
    # The queue the runtime says aborted selects the dispatches: the last one on another queue is not
    # a suspect for this fault.
    aborting = {f.queue for f in runtime.faults if f.queue}
    on_queue = [d for d in logged if d.hw_queue in aborting]
    queue_note = ""
    if on_queue:
        logged, queue_note = on_queue, f" on the aborting queue {on_queue[-1].hw_queue}"
    elif aborting and any(d.hw_queue for d in logged):
        logged = []                # every logged dispatch ran on another queue than the one that aborted
    if not logged:
        return None
    last = logged[-1]
    name = (last.kernel if last.source == "shader-name" or last.kernel
            else _names_of_objects(runtime).get(last.kernel_obj or "") or f"kernel_obj={last.kernel_obj}")
    if not name:
        return None
    return Claim(name, Basis("dispatch-log", "ROCclr"),
                 f"last dispatch{queue_note} in the AMD_LOG_LEVEL dispatch log before the end of the log "
                 f"({last.origin}){idle_note}"
                 + ("; resolve kernel_obj against the code object's .kd symbols" if name.startswith("kernel_obj")
                    else ""), _kernel_ids(last.pid), str(last.origin))
