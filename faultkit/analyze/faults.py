"""Turn parsed evidence into the report's fault records, each with what it means in words."""

from __future__ import annotations

from ..codes import (ADDRESS_FAULT_CODES, GPU_ERROR_BY_CODE, LIBRARY_STATUS, ROLE_WORDS, VM_FAULT_REASONS, client_role, engine_of,
                     status_meaning, status_name, xid_meaning)
from .event_faults import event_faults
from ..model import DriverException, Fault, HostError, KernelLog, RuntimeFault, RuntimeLog, VMFault, Xid

PAGE = 0xFFF


def runtime_fault(f: RuntimeFault) -> Fault:
    detail = {"text": f.text}
    for key in ("reason", "status", "queue", "agent_handle", "kernel", "host", "process_tag", "rocclr_line", "buffer"):
        value = getattr(f, key)
        if value is not None:
            detail[key] = value
    if f.imprecise:
        detail["imprecise"] = True
    if f.collective:
        detail.update(f.collective)
    if f.node is not None:
        gpu = f"node-{f.node}"
    elif f.gpu_index is not None:
        gpu = f"GPU index {f.gpu_index}"
    else:
        gpu = None
    kind = {
        "vm-fault": "memory-access-fault",
        "hw-exception": "gpu-hang" if f.reason == "GPU Hang" else "hw-exception-ecc",
        "queue-callback": "queue-error",
        "queue-error": "queue-error",
        "memory-fault-error": "memory-access-fault",
        "offload-fault": "memory-access-fault",
        "debug-agent-fault": "memory-access-fault",
        "system-event": "memory-access-fault",
        "hsakmt-fault": "memory-access-fault",
        "memory-error": "memory-in-use",
        "collective-timeout": "collective-timeout",
        "watchdog-stuck": "watchdog-stuck",
    }.get(f.kind, f.kind)
    if f.kind == "vm-fault" and f.reason:
        detail["reason_kind"] = VM_FAULT_REASONS.get(f.reason)
    return Fault(source="runtime", kind=kind, address=f.address, code=f.code, gpu=gpu, pid=f.pid,
                 process=f.process_tag, time=f.stamp.raw if f.stamp else None, detail=detail,
                 meaning=explain_runtime(f), origin=f.origin, node=f.node, kernel=f.kernel)


def explain_runtime(f: RuntimeFault) -> str:
    if f.kind in ("vm-fault", "offload-fault", "debug-agent-fault", "system-event"):
        where = f" on GPU node-{f.node}" if f.node is not None else ""
        addr = f" at 0x{f.address:x}" if f.address is not None else ""
        reason = f.reason or "reason not printed"
        extra = " The address may not be exact (imprecise)." if f.imprecise else ""
        zero = " Address 0 is a null-pointer dereference on the GPU." if f.address == 0 else ""
        return (f"A GPU memory access fault{where}{addr}: {reason}.{zero}{extra} The runtime aborts the process "
                f"from its event thread: the host stack shows only where the abort landed.")
    if f.kind == "collective-timeout":
        return (f"{f.process_tag or 'A rank'}'s collective timed out ({f.reason}): another rank never joined it "
                "(it died, hung in a kernel, or is stuck on the host). A symptom, not a fault: the rank that "
                "stopped first is the one to look at.")
    if f.kind == "watchdog-stuck":
        return (f"{f.process_tag or 'A rank'}'s NCCL watchdog thread got stuck ({f.reason}): it could not even "
                "check its collectives, so a CUDA/NCCL call it makes hangs (another thread holding the GIL inside a "
                "CUDA call, a hung CUDA event or communicator). A hang's symptom, not a GPU fault: take the "
                "process's stacks (py-spy dump --native) to see who holds it.")
    if f.kind == "hsakmt-fault":
        where = f", {f.buffer}" if f.buffer else ""
        oob = (" An address outside every buffer is an out-of-bounds access (or a freed or never-allocated pointer)."
               if f.buffer == "in no known buffer" else "")
        return f"libhsakmt's analysis of a GPU memory fault at 0x{f.address:x} on node {f.node}: {f.reason}{where}.{oob}"
    if f.kind == "memory-error":
        return (f"ROCr reports a memory error on GPU node-{f.node} at 0x{(f.address or 0):x}: {f.reason or 'no reason'}. "
                "Memory the GPU was still using was unmapped or freed (a free, an eviction or a migration while a "
                "kernel or copy used it): look for a free of this address just before.")
    if f.kind == "hw-exception":
        if f.reason == "GPU Hang":
            return ("The GPU hung (a wave or queue stopped making progress) and was reset; expect ring timeouts, "
                    "MES/HWS failures and a reset in the kernel log. Not a page fault.")
        return "An uncorrectable ECC error was reported by the GPU: hardware, not the application."
    if f.kind == "memory-fault-error":
        k = f" and names kernel {f.kernel!r} as running on a faulting queue" if f.kernel else ""
        return (f"ROCclr saw a VM fault on GPU index {f.gpu_index}{k}. It walks all queues, so the named kernel "
                f"is a strong candidate, not proof.")
    if f.code is not None:
        name = status_name(f.code) or f.status or f"code 0x{f.code:x}"
        return f"{name}: {status_meaning(f.code)}."
    if f.status:
        return f"{f.status}."
    return "A queue error was reported; the status was not readable."


def vm_fault(f: VMFault) -> Fault:
    detail = {}
    for key in ("hub", "retry", "vmid", "pasid", "ring", "src_id", "thread", "tid", "client_name", "client_id",
                "rw", "permission_faults", "walker_error", "mapping_error", "more_faults", "die", "generation",
                "format_hint", "ih_client_name", "status_register"):
        value = getattr(f, key)
        if value is not None:
            detail[key] = value
    if f.status is not None:
        detail["status"] = f"0x{f.status:08x}"
    if f.secondary:
        detail["secondary"] = True
    kind = "page-fault" + ("-retry" if f.retry else "")
    return Fault(source="kernel-log", kind=kind, address=f.address, gpu=f.pci, pid=f.pid, process=f.process,
                 time=f.stamp.raw if f.stamp else None, detail=detail, meaning=explain_vm_fault(f), origin=f.origin,
                 client=None if f.secondary else f.client_name,
                 engine=None if f.secondary else engine_of(f.client_name), vmid=f.vmid, pasid=f.pasid,
                 secondary=bool(f.secondary))


def explain_vm_fault(f: VMFault) -> str:
    parts: list[str] = []
    if f.vmid == 0:
        parts.append("vmid 0: the driver or firmware faulted, not the application")
    role = client_role(f.client_name)
    if f.secondary:
        who = ("a fault latched behind an earlier one (status already cleared): this block does not tell "
               "which engine faulted; read the first block of the burst")
    elif role:
        who = ROLE_WORDS[role].format(c=f.client_name)
    elif f.client_name:
        who = f"client {f.client_name}"
    else:
        who = "an unknown engine (no status block printed)"
    parts.append(who)
    if not f.secondary and f.status is not None or f.generation == "gfx8":
        access = {0: "read", 1: "write"}.get(f.rw if f.rw is not None else -1, "access")
        what = []
        perm = f.permission_faults or 0
        if f.generation != "gfx8":
            if perm & 1:
                what.append("an unmapped page (PTE not valid)")
            if perm & 4 and f.rw == 1:
                what.append("a page without write permission")
            if perm & 2 and f.rw == 0:
                what.append("a page without read permission")
            if perm & 8:
                what.append("a page without execute permission")
        if f.walker_error:
            what.append("a page-table walker error (bad PDE/PTE)")
        if f.mapping_error:
            what.append("a mapping error")
        parts.append(f"{access} of " + (" and ".join(what) if what else "a page it may not touch"))
    if f.retry:
        parts.append("retry fault (XNACK/SVM): the driver could not resolve it")
    if f.pasid is not None and 0 < f.pasid < 32768:
        parts.append(f"pasid {f.pasid} < 32768: a graphics context, not a compute (KFD) process")
    if f.address is not None:
        parts.append(f"page 0x{f.address:x}" + (" (null page)" if f.address < 0x10000 else ""))
    if f.process or f.pid:
        parts.append(f"process {f.process or '?'} pid {f.pid}")
    return "; ".join(parts) + "."


def xid_fault(x: Xid) -> Fault:
    detail = {"xid": x.xid, "text": x.text}
    for key in ("channel", "fault_type", "access", "engine", "client", "location", "exception", "caused_by"):
        value = getattr(x, key)
        if value is not None:
            detail[key] = value
    if not x.trusted:
        detail["untrusted"] = "UNRECOGNIZED_* MMU fault record: keep the pid, distrust address and type"
    meaning = f"NVIDIA Xid {x.xid}: {xid_meaning(x.xid)}."
    if x.caused_by is not None:
        meaning += f" The driver says it was caused by the earlier Xid {x.caused_by}: a consequence, not a new error."
    if x.exception:
        meaning += f" Exception: {x.exception}."
        if "Invalid Address Space" in x.exception:
            meaning += " (address outside the VA space; CUDA error 717)"
    if x.xid == 31 and x.access and x.trusted:
        meaning += f" {x.access.replace('ACCESS_TYPE_', '').lower().replace('_', ' ')} at 0x{x.address:x}, {x.fault_type}."
    return Fault(source="kernel-log", kind=f"xid-{x.xid}", address=x.address if x.trusted else None,
                 gpu=x.pci, pid=x.pid, process=x.process, time=x.stamp.raw if x.stamp else None, detail=detail,
                 meaning=meaning, origin=x.origin, engine=_xid_engine(x))


def _xid_engine(x: Xid) -> str | None:
    """The MMU fault's engine: a copy engine (CE*) or the graphics/compute engine's GPC clients
    (the SMs' memory path: a kernel's access); Xid 13 is an SM exception."""
    if x.xid == 13 and x.exception:
        return "shader"
    if not x.engine or not x.trusted:
        return None               # an UNRECOGNIZED_* record names no client worth trusting
    if x.engine.startswith("CE"):
        return "copy"
    if x.engine == "GRAPHICS" and (x.client or "").startswith("GPCCLIENT"):
        return "shader"
    return "other"


def driver_place(d: DriverException) -> str:
    return ", ".join(f"{k} {v}" for k, v in (("device", d.device), ("SM", d.sm), ("warp", d.warp)) if v is not None)


def driver_exception_fault(d: DriverException) -> Fault:
    where = driver_place(d)
    detail = {"exception": d.exception, "code": d.code, "device": d.device, "sm": d.sm, "warp": d.warp,
              "pc": f"0x{d.pc:x}" if d.pc is not None else None, "kernel": d.kernel}
    meaning = (f"The CUDA driver reported {d.exception} ({where}) while writing a GPU core dump"
               + (f"; the excepting warp was in {d.kernel} at PC 0x{d.pc:x}" if d.kernel and d.pc is not None else "")
               + ("; the warp had already exited, so no stack was recorded (the core still holds the exception)"
                  if d.warp_exited else "") + ".")
    return Fault(source="runtime", kind="cuda-exception", pid=d.pid, process=d.process_tag,
                 detail={k: v for k, v in detail.items() if v is not None}, meaning=meaning, origin=d.origin,
                 kernel=d.kernel, engine="shader")


def host_error_fault(e: HostError) -> Fault:
    meaning = (f"The host saw a {e.api} error ({e.text}). It is reported at the next synchronizing call, not "
               f"where the kernel faulted.")
    # "CUDA/HIP": a program's own error print, whose strings both runtimes share
    kind = "gpu-runtime-error" if "/" in e.api else f"{e.api.lower()}-error"
    err = GPU_ERROR_BY_CODE.get(e.code) if e.code is not None else None
    if err is not None:
        meaning += (f" Error {err.code} ({err.runtime}): a kernel failed on the GPU and the context is lost."
                    if err.device else f" Error {err.code} ({err.runtime}).")
    elif e.enum in LIBRARY_STATUS:
        meaning += f" {e.enum}: {LIBRARY_STATUS[e.enum]}."
    detail = {"text": e.text, "exception": e.exception, "enum": e.enum}
    if e.reported_in:
        detail.update(device=e.device, reported_in=e.reported_in, call=e.call)
        meaning += (f" The library's check reported it in {e.reported_in}" + (f", at `{e.call}`" if e.call else "")
                    + (f", on device {e.device}" if e.device is not None and e.device >= 0 else "")
                    + ": where the host noticed the error, not the kernel that faulted.")
    gpu = f"{e.api} device {e.device}" if e.device is not None and e.device >= 0 else None
    return Fault(source="runtime", kind=kind, code=e.code, decimal_code=True, gpu=gpu, pid=e.pid,
                 process=e.process_tag,
                 detail=detail, meaning=meaning, origin=e.origin)


def collect_faults(runtime: RuntimeLog, kernel: KernelLog) -> list[Fault]:
    faults = [runtime_fault(f) for f in runtime.faults]
    faults += [vm_fault(f) for f in kernel.faults]
    faults += [xid_fault(x) for x in kernel.xids]
    faults += event_faults(kernel)
    faults += [driver_exception_fault(d) for d in runtime.driver_exceptions]
    seen: set[tuple] = set()
    # (one error's number, seen by several layers: PyTorch's text, Triton's, a program's own print;
    # a print that names no runtime is the same error as one that does)
    named = {e.code for e in runtime.host_errors if e.code is not None and "/" not in e.api}
    for e in runtime.host_errors:
        key = (e.api, e.text) if e.code is None else (e.api, e.code)
        if key not in seen and not ("/" in e.api and e.code in named):  # PyTorch repeats the same text in several log layers
            seen.add(key)
            faults.append(host_error_fault(e))
    group_faults(faults)
    return faults


def group_faults(faults: list[Fault]) -> None:
    """Same event seen by several sources: a runtime address in the same page as a kernel-log
    fault (and pid/pasid agreeing where both are known); kernel-log faults of one burst
    (same device and pasid/pid) belong together."""
    next_group = 1
    bursts: dict[tuple, int] = {}
    for f in faults:
        if f.source == "kernel-log" and f.kind.startswith("page-fault"):
            key = (f.gpu, "pasid", f.pasid) if f.pasid is not None else (f.gpu, "pid", f.pid)
            if key not in bursts:
                bursts[key] = next_group
                next_group += 1
            f.group = bursts[key]
    pages = {}
    for f in faults:
        if f.group is not None and f.address is not None:
            pages.setdefault(f.address & ~PAGE, f.group)
    for f in faults:
        if f.source == "runtime" and f.address is not None:
            g = pages.get(f.address & ~PAGE)
            if g is not None and _pids_agree(f, faults, g):
                f.group = g
    # Xid 13 (no pid) belongs with the next Xid 31/43 of the same device; Xid 31/43 group by pid.
    by_pid: dict[tuple, int] = {}
    pending13: list[Fault] = []
    for f in faults:
        if not f.kind.startswith("xid-"):
            continue
        if f.kind == "xid-13":
            pending13.append(f)
            continue
        key = (f.gpu, f.pid)
        if key not in by_pid:
            by_pid[key] = next_group
            next_group += 1
        f.group = by_pid[key]
        for p in pending13:
            if p.gpu == f.gpu:
                p.group = f.group
        pending13 = [p for p in pending13 if p.gpu != f.gpu]


def _pids_agree(runtime: Fault, faults: list[Fault], group: int) -> bool:
    if runtime.pid is None:
        return True
    pids = {f.pid for f in faults if f.group == group and f.source == "kernel-log" and f.pid}
    return not pids or runtime.pid in pids


def other_processes(faults: list[Fault], captured: set[int]) -> tuple[list[Fault], list[Fault]]:
    """(this capture's faults, other processes' kernel-log records). On a shared node the kernel log
    holds every process's faults; one whose pid is not among the processes the capture recorded is
    another job's, never evidence of this incident. Without a process record nothing is set apart."""
    if not captured:
        return faults, []
    mine, others = [], []
    for f in faults:
        (others if f.source == "kernel-log" and f.pid is not None and f.pid not in captured else mine).append(f)
    return mine, others


def is_address_fault(f: Fault) -> bool:
    return f.kind in ("memory-access-fault",) or f.kind.startswith("page-fault") or f.kind == "xid-31" or \
        (f.hsa_code in ADDRESS_FAULT_CODES)
