"""Which kernel faulted, and how sure we are (DESIGN.md's levels).

The level never claims more than the evidence: runtime logs alone can at most make a kernel
`likely` (a debug-agent wave stopped in it); names printed by ROCclr, dispatch logs and
library hints only make `candidates`. A Python frame is never a candidate. A debugger stop on a
GPU wave makes its kernel `certain` when the PC is exact (precise memory confirmed on, cuda-gdb's
exception PC) and `likely` otherwise; a compute-sanitizer report is `certain`.
"""

from __future__ import annotations

from ..model import Candidate, CoreRecord, Fault, RuntimeLog, SanitizerReport, Verdict
from .debug_stop import StopFinding
from .faults import driver_place, is_address_fault
from .kernel_names import kernel_key, same_kernel

FAULT_REASONS = {"MEMORY_VIOLATION", "ADDRESS_ERROR", "APERTURE_VIOLATION", "ILLEGAL_INSTRUCTION",
                 "ASSERT_TRAP", "TRAP", "FP_DIVIDE_BY_0", "FP_INVALID_OPERATION", "INT_DIVIDE_BY_0",
                 "FP_OVERFLOW", "ECC_ERROR", "FATAL_HALT"}


def decide(runtime: RuntimeLog, faults: list[Fault], stops: list[StopFinding] = (),
           sanitizer: list[SanitizerReport] = (), traced: list[tuple[str, float, str, bool]] = (),
           plausible: int = 0) -> Verdict:
    from_logs = _with_trace(_from_logs(runtime, faults), traced, plausible)
    exact: list[Candidate] = []
    for r in sanitizer:
        if r.kernel and not any(same_kernel(c.kernel, r.kernel) for c in exact):
            exact.append(Candidate(r.kernel, 1.0, f"compute-sanitizer: invalid {r.space} {r.access} of {r.size} bytes "
                                                  f"in this kernel at +0x{r.offset or 0:x}"
                                                  + (f" ({r.file}:{r.line})" if r.file else "") + f" ({r.origin})"))
    approx: list[Candidate] = []
    for f in stops:
        if not (f.gpu and f.kernel):
            continue
        pc = f" at PC 0x{f.pc:x}" if f.pc is not None else ""
        core = f.stop.kind == "core" or f.stop.from_core
        text = (f"{'GPU core dump: the excepting' if core else 'debugger stop on a GPU'} "
                f"{'warp' if f.stop.kind == 'cuda-exception' else 'wave'} in this kernel{pc}"
                + (f", {f.coordinates}" if f.coordinates else "") + f"; kernel from {f.kernel_basis}; "
                + (f"PC exact: {f.precise_basis}" if f.precise else
                   "the kernel is certain (the core holds the wave the exception stopped), the instruction is not: "
                   "without precise memory the wave's PC is past the faulting access" if core else
                   f"PC may be past the faulting instruction: {f.precise_basis}") + f" ({f.stop.origin})")
        pool, score = (exact, 1.0) if f.precise or core else (approx, 0.9)
        if not any(same_kernel(c.kernel, f.kernel) for c in pool):
            pool.append(Candidate(f.kernel, score, text))
    for d in runtime.driver_exceptions:
        if not d.kernel:
            continue
        text = (f"the CUDA driver's own exception report while writing the GPU core dump: {d.exception} ({driver_place(d)}, "
                f"PC 0x{d.pc or 0:x}); the excepting warp's stack frame #0 is this kernel ({d.origin})")
        same = next((c for c in exact if same_kernel(c.kernel, d.kernel)), None)
        if same is not None:
            same.why += f"; also {text}"
        else:
            exact.append(Candidate(d.kernel, 1.0, text))
    named = exact or approx
    if not named:
        host = [f for f in stops if not f.gpu]
        if host and from_logs.level == "unknown" and from_logs.kernel is None and not from_logs.candidates:
            h = host[-1]
            where = h.function or "an unknown function"
            return Verdict("unknown", None, f"the debugger stopped a host thread on {h.stop.signal} in {where} "
                                            f"({h.stop.origin}): a CPU crash, not a GPU fault; no GPU wave stopped")
        return from_logs
    others = [c for c in from_logs.candidates if kernel_key(c.kernel) not in {kernel_key(n.kernel) for n in named}]
    for c in others:
        c.why += "; named only by logs, not by the debugger or sanitizer"
    level = "certain" if exact else "likely"
    top = named[0]
    if len(named) > 1:
        why = (f"{len(named)} kernels stopped in a debugger or sanitizer (several processes or waves faulted); "
               f"the first is {top.kernel}: {top.why}")
    else:
        why = top.why
    if not exact:
        why += ". Not 'certain': without precise memory the stop PC can lie after the faulting instruction"
    return Verdict(level, top.kernel, why, named + (approx if exact else []) + others)


def _with_trace(v: Verdict, traced: list[tuple[str, float, str, bool]], plausible: int) -> Verdict:
    """Trace suspects join the log candidates. A trace makes a kernel `likely` only when exactly
    one plausible suspect remains, it is named, and the logs name no other kernel."""
    if not traced:
        return v
    cands = {kernel_key(c.kernel): c for c in v.candidates}
    for name, score, why, _ in traced:
        c = cands.get(kernel_key(name))
        if c is not None:
            c.score = max(c.score, score) + 0.05
            c.why += f"; also {why}"
        else:
            cands[kernel_key(name)] = Candidate(name, score, why)
    ranked = sorted(cands.values(), key=lambda c: -c.score)
    top = ranked[0]
    named = top.kernel not in {name for name, _, _, is_kernel in traced if not is_kernel}
    if v.level in ("certain", "likely"):
        return Verdict(v.level, v.kernel, v.why, ranked)
    if plausible == 1 and named and not [c for c in v.candidates if not same_kernel(c.kernel, top.kernel)]:
        return Verdict("likely", top.kernel, f"the trace leaves one plausible in-flight kernel: {top.why}", ranked)
    why = (f"{len(ranked)} candidate(s) from logs and trace, {plausible} plausible in the trace; the first is ranked "
           f"highest because: {top.why.split(';')[0]}")
    return Verdict("candidates", None, why, ranked)


def _from_logs(runtime: RuntimeLog, faults: list[Fault]) -> Verdict:
    cands: dict[str, Candidate] = {}

    def add(kernel: str | None, score: float, why: str) -> None:
        if not kernel:
            return
        key = kernel_key(kernel)
        c = cands.get(key)
        if c is None:
            cands[key] = Candidate(kernel, score, why)
        elif score > c.score:
            cands[key] = Candidate(kernel, score, f"{why}; also: {c.why}")
        else:
            c.why += f"; also: {why}"

    wave_kernels: dict[str, list] = {}
    for w in runtime.waves:
        if w.kernel and set(w.reasons) & FAULT_REASONS:
            wave_kernels.setdefault(w.kernel, []).append(w)
    for kernel, waves in wave_kernels.items():
        reasons = sorted({r for w in waves for r in w.reasons})
        add(kernel, 0.9, f"rocm-debug-agent: {len(waves)} wave(s) stopped in this kernel with "
                         f"{'/'.join(reasons)} ({waves[0].origin})")
    for f in runtime.faults:
        if f.kernel and f.kind == "memory-fault-error":
            add(f.kernel, 0.7, f"ROCclr 'Memory Fault Error' names it on GPU index {f.gpu_index} ({f.origin}); "
                               f"ROCclr walks every queue, so it is not proof")
        elif f.kernel:
            add(f.kernel, 0.65, f"the queue-callback line names it ({f.origin})")
    in_flight = [d for d in runtime.dispatches if d.source == "hang-analysis"]
    for d in in_flight:
        pending = d.rptr is not None and d.wptr is not None and d.rptr < d.wptr
        add(d.kernel or (f"kernel_obj={d.kernel_obj}" if d.kernel_obj else None), 0.6 if pending else 0.5,
            "ROCclr hang analysis: the packet at the read pointer of "
            + (f"HWq {d.hw_queue}" if d.hw_queue else "a queue (the block's head is not in the log)")
            + (f" (rptr={d.rptr} < wptr={d.wptr}: in flight)" if pending else "") + f" ({d.origin})")
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
    if logged:
        last = logged[-1]
        if last.source == "shader-name" or last.kernel:
            name = last.kernel
        else:
            name = f"kernel_obj={last.kernel_obj}"
        add(name, 0.5, f"last dispatch{queue_note} in the AMD_LOG_LEVEL dispatch log before the end of the log "
                       f"({last.origin}){idle_note}"
                       + ("; resolve kernel_obj against the code object's .kd symbols" if name.startswith("kernel_obj")
                          else ""))
    library = [d for d in runtime.dispatches if d.source == "library-log"]
    if library:
        add(library[-1].kernel, 0.45, f"{library[-1].library} logged running it last before the end of the log "
                                      f"({library[-1].origin})")
    # Compilation and library-selection lines name kernels that were built or chosen, not run: never
    # above a dispatch or a fault report.
    for h in runtime.hints:
        add(h.kernel, 0.3, f"{h.kind} line names it just before the fault ({h.origin}): a hint only")

    copy_engine = [f for f in faults if f.source == "kernel-log" and f.engine == "copy"]
    shader = [f for f in faults if f.source == "kernel-log" and f.engine == "shader"]
    # What the log-side evidence says of itself: its processes and fault addresses.
    wave_pids = {w.pid for ws in wave_kernels.values() for w in ws if w.pid is not None}
    log_pids = wave_pids | {f.pid for f in runtime.faults if f.pid is not None}
    log_pages = {f.address >> 12 for f in runtime.faults if f.address}
    judged = [(f, _agrees(f, log_pids, log_pages)) for f in shader]
    agree = [f for f, ok in judged if ok is True]
    differ = [f for f, ok in judged if ok is False]
    ranked = sorted(cands.values(), key=lambda c: -c.score)
    for c in ranked:
        if copy_engine and not shader:
            c.score = round(c.score * 0.5, 2)
            c.why += "; but the kernel log says the copy engine (SDMA) faulted, not a shader"
        elif agree:
            c.why += "; consistent with the kernel log (a shader memory client faulted in the same process or page)"
        elif differ and not agree:
            c.score = round(c.score * 0.7, 2)
            f = differ[0]
            c.why += (f"; the kernel log's shader fault is another process's or page's (pid {f.pid}, page "
                      f"0x{(f.address or 0):x}): not corroborated")
        elif shader:
            c.why += "; a shader fault is in the kernel log, but nothing it carries (pid, page) can be compared"
    ranked.sort(key=lambda c: -c.score)

    # A wave dump corroborates the fault only when their processes agree.
    fault_pids = {f.pid for f in faults if f.pid is not None and is_address_fault(f)}
    if wave_kernels and wave_pids and fault_pids and not wave_pids & fault_pids:
        why = (f"the rocm-debug-agent waves are from pid {sorted(wave_pids)}, the fault from pid "
               f"{sorted(fault_pids)}: another process's dump does not name this fault's kernel")
        for c in ranked:
            if any(same_kernel(c.kernel, k) for k in wave_kernels):
                c.score = round(c.score * 0.5, 2)
                c.why += f"; but {why}"
        ranked.sort(key=lambda c: -c.score)
        return Verdict("candidates", None, why, ranked)

    if wave_kernels and len(cands) == 1:
        kernel = ranked[0].kernel
        imprecise = any("MEMORY_VIOLATION" in w.reasons for w in wave_kernels[kernel])
        why = ("a rocm-debug-agent wave dump stopped waves in this kernel and no other kernel is named by the "
               "evidence. Not 'certain': no debugger confirmed the stop with precise memory on"
               + ("; without precise memory the PC may be past the faulting instruction" if imprecise else ""))
        return Verdict("likely", kernel, why, ranked)
    if ranked:
        top = ranked[0]
        why = (f"{len(ranked)} candidate(s) named by the logs, none confirmed by a debugger stop; the first is "
               f"ranked highest because: {top.why.split(';')[0]}")
        return Verdict("candidates", None, why, ranked)
    if copy_engine and not shader:
        return Verdict("unknown", None, "the kernel log says the SDMA copy engine faulted: a memory copy, not a "
                                        "kernel, touched the address; no copy or kernel is named by the evidence")
    if faults and all(f.kind == "collective-timeout" for f in faults):
        return Verdict("unknown", None, "only collective timeouts: a rank stopped joining collectives (hung in a "
                                        "kernel, died or stuck on the host); no GPU fault or kernel is named")
    if any(is_address_fault(f) or f.kind.endswith("-error") or f.kind in ("queue-error", "gpu-hang", "memory-in-use")
           or f.kind.startswith("xid-") for f in faults):
        return Verdict("unknown", None, "the evidence shows a GPU error but names no kernel: runtime and kernel "
                                        "logs report the fault, not the kernel that caused it")
    return Verdict("unknown", None, "no GPU fault was found in the inputs")


def _agrees(f: Fault, pids: set[int], pages: set[int]) -> bool | None:
    """True when a key both sides carry agrees and none disagrees; False when one disagrees;
    None when nothing can be compared (an unknown key is neither agreement nor disagreement)."""
    verdicts = []
    if f.pid is not None and pids:
        verdicts.append(f.pid in pids)
    if f.address and pages:
        verdicts.append(f.address >> 12 in pages)
    if not verdicts:
        return None
    return all(verdicts)


def with_unopened_cores(v: Verdict, cores: list[CoreRecord]) -> Verdict:
    """A GPU core on disk means a runtime saw a GPU exception, even where nothing else says so."""
    unopened = [c for c in cores if c.platform in ("cuda", "rocm-gpu", "rocm-unified") and not c.analysed_with]
    if v.level != "unknown" or not unopened:
        return v
    return Verdict("unknown", None, f"{len(unopened)} GPU core dump(s) among the inputs ({unopened[0].path}) hold "
                                    f"the excepting wave or warp, but no debugger opened them here; see the next "
                                    f"steps for the command", v.candidates)
