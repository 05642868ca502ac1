"""What a debugger transcript proves: which stop is the fault, its kernel, and how exact its PC is.

The stop's thread identity decides GPU or host. The kernel of an AMDGPU wave comes from the
dispatch it belongs to (`info dispatches`), else from a code object symbol, else from its frame
(which may be a device function called by the kernel). With precise memory off the wave's PC
can be far past the faulting instruction; with it on the PC is the instruction after it
(reference/debugger_output.md §0.7). cuda-gdb's `triggered at PC` is the faulting instruction.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .._signals import FAULT_SIGNALS
from ..codes import MEMORY_OPS
from ..judge.claims import Basis, Claim, Identities, in_device_function
from ..judge.names import is_entry_name, kernel_key
from ..model import CodeObject, CodeObjectRef, DebuggerLog, DebugStop, DisasmLine, Fault, SanitizerReport
from .entry_signs import helper_sign
from .sanitizer_entry import add_claims, sanitizer_entry

SIGNAL_MEANING = {
    "SIGSEGV": "a wave accessed memory it may not (MEMORY_VIOLATION)",
    "SIGBUS": "a wave used an address outside the GPU's virtual address range (ADDRESS_ERROR / APERTURE_VIOLATION)",
    "SIGILL": "a wave executed an illegal instruction",
    "SIGFPE": "a wave raised a floating-point or integer-divide exception",
    "SIGABRT": "a wave executed a trap (assert / llvm.trap)",
}


@dataclass(frozen=True)
class Operand:
    """A SASS address operand `[R20.64+0x10]` read from one lane: the pair R20:R21's value and the offset."""
    register: str           # the pair's low register, `R20`
    base: int               # (R21 << 32) | R20
    offset: int

    @property
    def pair(self) -> str:
        return f"{self.register}:R{int(self.register[1:]) + 1}"


@dataclass
class StopFinding:
    """One GPU (or host) stop with what it lets us say."""
    stop: DebugStop
    file: str
    gpu: bool
    kernel: str | None = None
    kernel_basis: str | None = None
    function: str | None = None
    # the stop is in a device function and no entry point is visible: that function, and the sign
    helper: str | None = None
    helper_sign: str | None = None
    precise: bool | None = None
    precise_basis: str = ""
    pc: int | None = None
    faulting: DisasmLine | None = None
    disassembly: list[DisasmLine] = field(default_factory=list)
    source: str | None = None
    coordinates: str | None = None
    resolved: str | None = None       # kernel+offset and line from a code object, where one was available
    # The faulting instruction's address operand in the focused lane (its registers): the faulting
    # address when that lane is the one that faulted; a warp exception does not say which lane did.
    lane_address: int | None = None
    lane_address_basis: str | None = None
    lane_operand: Operand | None = None    # how it was made: the base register pair and the offset
    # The kernel is shown to be the launched entry point (a launch frame, a dispatch row, a kernel
    # symbol, the outermost frame of the wave's backtrace); None: it may be a device function.
    entry: bool | None = None
    debugger: str | None = None
    from_core: bool = False           # triage opened this transcript from a core (it knows; no text says so)


def is_fault_stop(stop: DebugStop) -> bool:
    if stop.kind == "cuda-exception":
        return True
    return stop.kind in ("signal", "catchpoint", "core", "mi") and (stop.signal in FAULT_SIGNALS or stop.signal is None)


def precise_state(log: DebuggerLog, stop: DebugStop) -> tuple[bool | None, str]:
    if stop.kind == "cuda-exception":
        return True, "cuda-gdb reports the exception PC itself"
    if stop.imprecise_warning:
        return False, "rocgdb printed 'precise memory violation signal reporting is not enabled' at this stop"
    state, where = log.precise_memory, log.precise_origin
    if state == "enabled":
        return True, f"'show amdgpu precise-memory' answered 'on (currently enabled)' ({where})"
    if state == "could-not-enable":
        return False, f"rocgdb said precise memory reporting could not be enabled ({where})"
    if state == "off":
        return False, f"precise memory was off ({where})"
    if state == "requested" and stop.kind == "signal" and stop.gpu is not None:
        return True, (f"'set amdgpu precise-memory on' ({where}) with no failure message, and no imprecise-memory "
                      f"warning at this signal stop (rocgdb prints one there when it is off)")
    return None, "the transcript does not show whether precise memory was on"


def _dispatch_kernel(log: DebuggerLog, stop: DebugStop) -> str | None:
    g = stop.gpu
    if g is None or g.dispatch is None:
        return None
    for d in log.dispatches:
        if d.dispatch == g.dispatch and (g.agent is None or d.agent == g.agent) and \
                (g.queue is None or d.queue == g.queue):
            return d.kernel
    return None


def _cuda_kernel(log: DebuggerLog, stop: DebugStop) -> tuple[str | None, str | None, bool | None]:
    """(kernel, how it is known, whether that shows the launched entry point)."""
    for fr in [stop.frame, *log.backtrace]:
        if fr is not None and fr.launch and fr.function:
            return fr.function, f"the frame launched as {fr.function}<<<({fr.launch[0]}),({fr.launch[1]})>>>", True
    if stop.error_function:
        return stop.error_function, "the function at cuda-gdb's exception PC", None
    g = stop.gpu
    for k in log.cuda_kernels:
        if g is None or (k.grid == g.grid and k.kernel_id == g.kernel_id):
            return k.name, f"'info cuda kernels' row for grid {k.grid}", True
    outer = _outermost(log, stop)
    if outer and stop.frame and outer != stop.frame.function:
        return outer, f"the outermost device frame of the backtrace; the stop is in {stop.frame.function}, a " \
                      f"device function it called", True
    if stop.frame and stop.frame.function:
        return stop.frame.function, "the stop's frame", None
    return None, None, None


def _outermost(log: DebuggerLog, stop: DebugStop) -> str | None:
    """The outermost device frame of the stopped wave's backtrace: the launched kernel. Only a
    backtrace that starts at the stop's own frame is the wave's."""
    bt = [f for f in log.backtrace if f.function]
    if not bt or stop.frame is None or bt[0].function != stop.frame.function:
        return None
    device = [f for f in bt if f.objfile is None or "://" in f.objfile]     # host frames are `from /lib/...`
    if not device or helper_sign(device[-1].function):
        return None        # the outermost shown is only ever called: the kernel's frame was cut off
    return device[-1].function


def faulting_instruction(stop: DebugStop, blocks: list[list[DisasmLine]], precise: bool | None
                         ) -> tuple[DisasmLine | None, list[DisasmLine]]:
    """The disassembly block around the stop, and the instruction that faulted where it can be told."""
    # cuda-gdb knows the faulting instruction: it marks it '*>' (in `x/i $errorpc` too) and prints
    # its address; any block that holds it wins over the block around $pc.
    for block in reversed(blocks):
        hit = [line for line in block if "*" in line.marker
               or (stop.error_pc is not None and line.pc == stop.error_pc)]
        if hit:
            return hit[0], block
    pc = stop.frame.pc if stop.frame else None
    for block in reversed(blocks):
        if not any("=>" in line.marker for line in block):
            continue
        current = next(i for i, line in enumerate(block) if "=>" in line.marker)
        if pc is not None and block[current].pc not in (None, pc):
            continue
        if precise and stop.kind != "cuda-exception":
            # The reported PC is the instruction after the faulting one: the last memory
            # instruction before it is the access that faulted.
            for line in reversed(block[:current]):
                if MEMORY_OPS.match(line.instruction):
                    return line, block
        return None, block
    return None, []


def _coordinates(stop: DebugStop) -> str | None:
    g = stop.gpu
    if g is None or g.implied:
        return None
    if g.block is not None:
        return (f"block ({','.join(map(str, g.block))}), thread ({','.join(map(str, g.thread or ()))}), device {g.device}, "
                f"sm {g.sm}, warp {g.warp}, lane {g.lane}")
    show = (lambda t: ",".join("?" if x is None else str(x) for x in t) if t else "?")
    text = f"agent {g.agent}, queue {g.queue}, dispatch {g.dispatch}, wave {g.wave}, work-group ({show(g.workgroup)})"
    if g.lane is not None:
        text += f", lane {g.lane}, work-item [{show(g.work_item)}]"
    return text


def examine(log: DebuggerLog, file: str, from_core: bool = False) -> list[StopFinding]:
    """`from_core`: the caller opened this transcript from a GPU core (a fact it knows)."""
    out = []
    for stop in log.stops:
        if not is_fault_stop(stop):
            continue
        gpu = stop.gpu is not None or stop.kind == "cuda-exception"
        f = StopFinding(stop, file, gpu, debugger=log.debugger, from_core=from_core)
        f.function = stop.frame.function if stop.frame else None
        f.pc = stop.error_pc if stop.error_pc is not None else (stop.frame.pc if stop.frame else None)
        if stop.frame and stop.frame.file and stop.frame.line:
            text = stop.source_line.split(None, 1)[1].strip() if stop.source_line and " " in stop.source_line.strip() \
                else ""
            f.source = f"{stop.frame.file}:{stop.frame.line}" + (f": {text}" if text else "")
        if stop.error_file and stop.error_line:
            f.source = f"{stop.error_file}:{stop.error_line} (exception PC)" + (f"; stop frame {f.source}" if f.source else "")
        if gpu:
            f.precise, f.precise_basis = precise_state(log, stop)
            if stop.kind == "cuda-exception":
                f.kernel, f.kernel_basis, f.entry = _cuda_kernel(log, stop)
            else:
                k = _dispatch_kernel(log, stop)
                outer = _outermost(log, stop)
                if k:
                    f.kernel, f.kernel_basis = k, f"'info dispatches' row of the wave's dispatch {stop.gpu.dispatch}"
                    f.entry = True
                elif outer and outer != "??" and outer != f.function:
                    f.kernel, f.entry = outer, True
                    f.kernel_basis = (f"the outermost frame of the wave's backtrace; the stop is in {f.function}, a "
                                      f"device function it called")
                elif outer and outer == f.function:
                    f.kernel, f.entry = f.function, True
                    f.kernel_basis = "the stopped wave's frame, the outermost of its backtrace"
                elif f.function and f.function != "??":
                    f.kernel, f.kernel_basis = f.function, ("the stopped wave's frame (no 'info dispatches' in the input: "
                                                            "this may be a device function called by the kernel)")
            _unshown_entry(f)
            f.faulting, f.disassembly = faulting_instruction(stop, log.disassembly, f.precise)
            f.coordinates = _coordinates(stop)
            if f.faulting is not None and f.precise:
                f.lane_address, f.lane_address_basis, f.lane_operand = address_operand(f.faulting.instruction,
                                                                                        log.registers)
        out.append(f)
    return out


def _unshown_entry(f: StopFinding) -> None:
    """A stop frame whose name shows it is only ever called (a device library's helper, a lambda's
    operator()) names no kernel where no entry point is shown above it: the kernel's frame is
    further up the stack or cut off. The fault is placed in that device function instead."""
    if f.kernel is None or f.entry is True:
        return
    sign = helper_sign(f.kernel)
    if sign:
        f.helper, f.helper_sign = f.kernel, f"{sign}; no entry-point frame is shown above it"
        f.kernel, f.kernel_basis = None, None


SASS_ADDRESS = re.compile(r"\[(?P<reg>R\d+)\.64(?:\+(?P<off>0x[0-9a-f]+|\d+))?\]")


def address_operand(instruction: str, registers: dict[str, int]) -> tuple[int | None, str | None, Operand | None]:
    """`LDG.E R9,desc[UR4][R2.64]` reads through the 64-bit pair R2:R3 (plus any immediate offset)."""
    m = SASS_ADDRESS.search(instruction)
    if not m:
        return None, None, None
    n = int(m["reg"][1:])
    lo, hi = registers.get(f"R{n}"), registers.get(f"R{n + 1}")
    if lo is None or hi is None:
        return None, None, None
    off = int(m["off"], 0) if m["off"] else 0
    return ((hi << 32) | lo) + off, (f"the faulting instruction's address operand [{m['reg']}.64"
                                     + (f"+{m['off']}" if m["off"] else "") + f"] with R{n}=0x{lo:x}, "
                                     f"R{n + 1}=0x{hi:x} in the focused lane's registers: the faulting address only "
                                     f"if this lane faulted (a warp exception does not say which lane did) and no "
                                     f"later instruction reused the registers"), Operand(m["reg"], (hi << 32) | lo, off)


def resolve_with(f: StopFinding, objects: list[tuple[str, CodeObject]], refs: list[CodeObjectRef]) -> None:
    """Name the PC's kernel, offset and line from the code objects given to the triage.

    The load base comes from the `info sharedlibrary` row whose text range holds the PC; failing
    that, the `=>` line of the disassembly names symbol+offset, which needs no base at all."""
    if f.pc is None or not objects:
        return
    hit = None
    for ref in refs:
        if ref.low is not None and ref.high is not None and ref.low <= f.pc < ref.high:
            for name, co in objects:
                r = co.resolve(f.pc, text_start=ref.low)
                if r:
                    hit = (r, name, co, f"loaded at the text range of {ref.uri}")
                    break
        if hit:
            break
    if hit is None:
        marked = next((line for line in f.disassembly if "=>" in line.marker and line.symbol), None)
        for name, co in objects:
            if marked is None:
                break
            fn = next((a for a, _, n in co.functions if n == marked.symbol), None)
            if fn is not None:
                r = co.resolve(fn + marked.offset)
                if r:
                    hit = (r, name, co, f"from the disassembly's <{marked.symbol}+{marked.offset}>")
                    break
    if hit is None:
        return
    r, name, co, how = hit
    f.resolved = f"{r} in {name} ({co.target}; {how})"
    if co.kernel(r.kernel) and (f.kernel is None or f.kernel_basis and f.kernel_basis.startswith("the stopped")):
        f.kernel, f.kernel_basis = r.kernel, f"the code object's kernel symbol containing the PC ({name})"
        f.entry = True             # a kernel descriptor (.kd) symbol: a launchable entry point


def stop_fault(f: StopFinding) -> Fault:
    st = f.stop
    if st.kind == "cuda-exception":
        kind = "cuda-exception"
        meaning = (f"cuda-gdb stopped the GPU on {st.exception or st.meaning}"
                   + (f" ({st.signal})" if st.signal else "") + ": the warp's faulting PC is exact.")
    elif f.gpu:
        kind = FAULT_SIGNALS.get(st.signal or "", "gpu-stop")
        meaning = (f"The debugger stopped an AMDGPU wave on {st.signal or 'a signal (stop line not in the input)'}: "
                   f"{SIGNAL_MEANING.get(st.signal or '', 'a GPU exception')}.")
    else:
        kind = "host-signal"
        meaning = (f"A host thread stopped on {st.signal}: a CPU crash (for example inside the runtime), "
                   f"not a GPU fault; the GPU may still have faulted elsewhere.")
    detail = {"stop": st.text, "thread": st.thread, "thread_name": st.thread_name, "kernel": f.kernel,
              "function": f.function, "pc": f"0x{f.pc:x}" if f.pc is not None else None,
              "coordinates": f.coordinates, "source": f.source, "precise": f.precise,
              "focused_lane_address": f"0x{f.lane_address:x}" if f.lane_address is not None else None,
              "focused_lane_address_basis": f.lane_address_basis}
    g = st.gpu
    gpu = (f"device {g.device}" if g and g.device is not None else f"agent {g.agent}" if g and g.agent is not None
           else None)
    return Fault(source="debugger", kind=kind, code=None, gpu=gpu, detail={k: v for k, v in detail.items() if v is not None},
                 meaning=meaning, origin=st.origin, kernel=f.kernel if f.gpu else None,
                 engine="shader" if f.gpu else None)


def sanitizer_fault(r: SanitizerReport) -> Fault:
    if r.direction == "inside":
        where = (f"{'misaligned' if r.misaligned else 'out of bounds though'} inside the allocation at "
                 f"0x{r.allocation:x} ({r.allocation_size:,} bytes)"
                 + ("" if r.misaligned else ": a part of it not mapped for the GPU (e.g. an expandable segment "
                                            "not yet backed), or freed and reused"))
    elif r.distance is not None:
        where = (f"{r.distance:,} bytes {r.direction} the nearest allocation at 0x{r.allocation:x} "
                 f"({r.allocation_size:,} bytes)")
    else:
        where = "no allocation near it"
    e = sanitizer_entry(r)
    if e.kernel and e.device_function:
        place = f"{e.device_function}, a device function of {e.kernel}"
    elif e.device_function:
        place = f"device function {e.device_function} (a helper of an unnamed kernel)"
    else:
        place = r.kernel or "a kernel it did not name"
    detail = {"kernel": r.kernel, "device_function": e.device_function,
              "offset": f"0x{r.offset:x}" if r.offset is not None else None,
              "source": f"{r.file}:{r.line}" if r.file else None,
              "block": r.block, "thread": r.thread, "size": r.size, "host_frames": r.host_frames[:12],
              "allocation": f"0x{r.allocation:x}" if r.allocation is not None else None,
              "allocation_size": r.allocation_size, "allocation_relation": r.direction,
              "misaligned": r.misaligned or None}
    return Fault(source="sanitizer", kind=f"invalid-{r.space}-{r.access}", address=r.address,
                 detail={k: v for k, v in detail.items() if v is not None},
                 meaning=f"compute-sanitizer caught an invalid {r.size}-byte {r.space} {r.access} in {place}: {where}.",
                 origin=r.origin, kernel=r.kernel, engine="shader")


def stop_claims(findings: list[StopFinding]) -> list[Claim]:
    """A GPU stop names the kernel a debugger watched fault: certain where the PC is exact or a
    core holds the excepting wave, likely otherwise. A host stop names no kernel: it says the
    crash was the CPU's."""
    out: list[Claim] = []
    seen: set[tuple[str, str]] = set()
    for f in findings:
        st = f.stop
        if not f.gpu:
            where = f.function or "an unknown function"
            out.append(Claim(None, Basis("host-stop", f.debugger or "debugger"),
                             f"the debugger stopped a host thread on {st.signal} in {where} ({st.origin}): a CPU "
                             f"crash, not a GPU fault; no GPU wave stopped", origin=str(st.origin)))
            continue
        if not f.kernel:
            if f.helper:
                out.append(in_device_function(
                    f.helper, f.debugger or "debugger",
                    f"the debugger stopped a GPU {'warp' if st.kind == 'cuda-exception' else 'wave'} in "
                    f"device function {f.helper}; {f.helper_sign} ({st.origin})",
                    Identities(engine="shader"), str(st.origin)))
            continue
        core = st.kind == "core" or f.from_core
        pc = f" at PC 0x{f.pc:x}" if f.pc is not None else ""
        headline = (f"{'GPU core dump: the excepting' if core else 'debugger stop on a GPU'} "
                    f"{'warp' if st.kind == 'cuda-exception' else 'wave'} in this kernel{pc}"
                    + (f", {f.coordinates}" if f.coordinates else ""))
        text = (headline + f"; kernel from {f.kernel_basis}; "
                + (f"PC exact: {f.precise_basis}" if f.precise else
                   "the core holds the wave the exception stopped, so its kernel is the one that faulted; the "
                   "instruction is not: without precise memory the wave's PC is past the faulting access" if core else
                   f"PC may be past the faulting instruction: {f.precise_basis}") + f" ({st.origin})")
        kind = "core-stop" if core and not f.precise else "debugger-stop" if f.precise or core else \
            "debugger-stop-inexact"
        entry = f.entry or (True if is_entry_name(f.kernel) else None)
        key = (kind, kernel_key(f.kernel))
        if key in seen:
            continue
        seen.add(key)
        out.append(Claim(f.kernel, Basis(kind, f.debugger or "debugger"), text, Identities(engine="shader"),
                         str(st.origin), entry=entry, headline=headline,
                         ceiling_note=None if kind != "debugger-stop-inexact" else
                         "without precise memory the stop PC can lie after the faulting instruction"))
    return out


def sanitizer_claims(log: DebuggerLog) -> list[Claim]:
    out: list[Claim] = []
    for r in log.sanitizer:
        e = sanitizer_entry(r)
        contradiction = None
        if e.kernel and r.direction == "inside" and not r.misaligned:
            contradiction = (f"it calls the access out of bounds, yet places 0x{r.address or 0:x} inside the "
                             f"allocation at 0x{r.allocation or 0:x} ({r.allocation_size or 0:,} bytes)")
        add_claims(out, e, r, f"compute-sanitizer: invalid {r.space} {r.access} of {r.size} bytes",
                   f" at +0x{r.offset or 0:x}" + (f" ({r.file}:{r.line})" if r.file else ""),
                   Identities(page=r.address >> 12 if r.address is not None else None, engine="shader"),
                   "sanitizer", entry=e.entry, went_on=went_on(log, r),
                   **({"contradiction": contradiction} if contradiction else {}))
    return out


def went_on(log: DebuggerLog, r: SanitizerReport) -> str | None:
    """The program carried on after this report and ended well: compute-sanitizer says 'Target
    application returned an error' for a non-zero exit and 'Program hit ...' for a failed API call;
    gdb says 'exited normally'. Only the report's own transcript is read."""
    mine = [e for e in log.events if e.origin.file == r.origin.file]
    after = [e for e in mine if (e.origin.line or 0) > (r.origin.line or 0)]
    if any(e.kind in ("sanitizer-api-error", "sanitizer-target-error") for e in after):
        return None
    normal = next((e for e in after if e.kind == "inferior-exit" and e.fields.get("code") in (None, "0", "00")), None)
    if normal is not None:
        return f"{normal.text} ({normal.origin})"
    summary = next((e for e in after if e.kind == "sanitizer-summary"), None)
    if summary is not None:
        return (f"compute-sanitizer's summary ({summary.origin}) follows with no API error and no 'Target "
                f"application returned an error': the program exited 0")
    return None
