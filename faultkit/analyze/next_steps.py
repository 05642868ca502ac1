"""What to run next, chosen from what the evidence has and lacks."""

from __future__ import annotations

from ..judge.levels import CANDIDATES, UNKNOWN
from ..model import HANG_SYMPTOMS, CoreRecord, Fault, KernelLog, RuntimeLog, Verdict
from .._signals import host_crash_signal
from .collectives import COLLECT_EVERY_RANK
from .hang import hang_steps


def suggest(runtime: RuntimeLog, kernel: KernelLog, faults: list[Fault], verdict: Verdict,
            kinds_seen: set[str], stops: list = (), cores: list[CoreRecord] = (),
            frameworks: set[str] = frozenset(), have_trace: bool = False, debugger_events: list = (),
            stacks=None, captured: bool = False, exit_code: int | None = None,
            kernel_log_readable: bool | None = None, tree_pids: set[int] | None = None) -> list[str]:
    """`frameworks`: servers the inputs mention (sglang, vllm); `have_trace`: a tracer's output is
    among them; `stacks`: the hang finding of the stacks (analyze/hang.py), where any were taken;
    `captured`: the inputs are a capture's bundle (its target's `exit_code`, whether it could read the
    kernel log, `tree_pids` the processes it recorded). Steps follow the evidence: no rocprofv3 advice next to a trace, no SGLang flag
    where nothing is SGLang, no GPU tool for a CPU crash, no "capture it" to a capture."""
    steps: list[str] = _for_cores(cores, runtime) + _after_debugger(stops, debugger_events)
    # a GPU core beside it (CUDA aborts after writing one: SIGABRT) means a GPU exception, not a CPU crash
    gpu_core = any(c.platform in ("cuda", "rocm-gpu", "rocm-unified") for c in cores)
    host = host_crash(kernel, exit_code, tree_pids) if not faults and not gpu_core else None
    if host:
        # a CPU crash of the host process: a debugger on the host side, not a GPU tool
        kept = " (a capture keeps its core in cores/ where the core-size limit let one be written)" if captured else ""
        steps.append(f"The target crashed on the CPU ({host}), not on the GPU: open its core in gdb (`gdb PROGRAM "
                     f"CORE`, then `thread apply all bt`){kept}, or run it under `faultkit capture --with gdb -- "
                     f"COMMAND` to stop at the crash with every thread's stack.")
    # a program's own error print (gpu-runtime-error) does not say which runtime: both sets of steps
    nvidia = any(f.kind.startswith("xid-") or f.kind in ("cuda-error", "gpu-runtime-error") for f in faults)
    # a collective timeout says nothing of the platform (NCCL and RCCL print it alike)
    amd = any(f.kind not in ("cuda-error", *HANG_SYMPTOMS) and not f.kind.startswith("xid-") for f in faults)
    codes = {f.hsa_code for f in faults if f.hsa_code is not None}
    engines = {f.engine for f in faults if f.source == "kernel-log" and f.engine}
    vmid0 = any(f.vmid == 0 and f.kind.startswith("page-fault") for f in faults)
    hang = any(f.kind == "gpu-hang" for f in faults) or any(e.kind == "ring-timeout" for e in kernel.events)
    if any(f.kind in HANG_SYMPTOMS for f in faults):
        steps.append("A collective timed out: find the rank that stopped first (the one whose log ends earliest, or "
                     "that faulted), and capture the hang itself: `faultkit capture --hang-after 5m -- <launch "
                     "command>` asks each GPU process for a core dump of what it is running when output stops. "
                     f"To name the rank that never joined the collective, collect {COLLECT_EVERY_RANK}.")
    elif any(n.kind == "watchdog-dump" and (n.fields or {}).get("from_rank") is not None for n in runtime.notes):
        steps.append(f"Another rank's collective timed out (this log has its dump signal): to see which rank the job "
                     f"waits for and where, collect {COLLECT_EVERY_RANK}.")

    if verdict.level in (CANDIDATES, UNKNOWN) and amd:
        steps.append("Capture the crash under rocgdb with precise memory so the faulting wave stops in place: "
                     "`faultkit capture --with rocgdb --attach-workers -- <launch command>` (it sets "
                     "`set amdgpu precise-memory on`, catches SIGSEGV/SIGBUS/SIGABRT and records "
                     "`info dispatches`, `info queues`, backtraces and the disassembly at the PC).")
        if not runtime.waves:
            steps.append("Or, cheaper than a debugger: run with the debug agent "
                         "(`HSA_TOOLS_LIB=librocm-debug-agent.so.2`, add `ROCM_DEBUG_AGENT_OPTIONS=--precise-memory`) "
                         "so every stopped wave is printed with its kernel and PC.")
        if not runtime.dispatches and not have_trace:
            steps.append("Record what was dispatched before the fault: `faultkit capture --with rocprofv3` "
                         "(kernel, memory-copy, allocation and HIP API traces), or `--with runtime-log` "
                         "(AMD_LOG_LEVEL=4 dispatch log, crash-safe).")
    if nvidia and verdict.level in (CANDIDATES, UNKNOWN):
        steps.append("Run the workload under compute-sanitizer (`faultkit capture --with sanitizer -- ...`): it "
                     "names the kernel, the thread and the bad address; or attach cuda-gdb to the workers "
                     "(`faultkit capture --with cuda-gdb --attach-workers -- ...`).")
        steps.append("Set CUDA_LAUNCH_BLOCKING=1 to make the error surface at the faulting launch (changes "
                     "timing; does not help inside CUDA graphs).")
    if 0x1016 in codes:
        steps.append("Code 0x1016 is a wave trap/abort (device assert, __builtin_trap), not a bad address: "
                     "look for device-side asserts in the kernels that ran; build with assertions messages "
                     "enabled, or let the debug agent print the trapping wave.")
    if "copy" in engines:
        steps.append("The copy engine (SDMA) faulted: check the source/destination of the memory copies issued "
                     "just before the fault (hipMemcpy*/peer copies) and their lifetimes; set "
                     "AMD_SERIALIZE_COPY=3 to make copy errors synchronous.")
    if vmid0:
        steps.append("A vmid 0 fault is the driver's or firmware's own: update the kernel/amdgpu firmware and "
                     "report it upstream with this kernel log; the application did not cause it directly.")
    if hang:
        steps.append("The GPU hung and was reset: check for kernels that never finish (deadlocks, spin waits on "
                     "other ranks) and compare with `faultkit timeline` of a rocprofv3 trace; a hang is not a "
                     "page fault.")
    if amd and any(f.kind in ("memory-access-fault", "queue-error") or f.kind.startswith("page-fault")
                   for f in faults):
        steps.append("Serialize to make the report point honest: run with AMD_SERIALIZE_KERNEL=3 and "
                     "AMD_SERIALIZE_COPY=3 and verify they reached the GPU worker processes, not just the "
                     "launcher: `faultkit capture --env AMD_SERIALIZE_KERNEL=3 --env AMD_SERIALIZE_COPY=3 -- ...` "
                     "checks /proc/PID/environ of every GPU process (a server that was already running keeps its "
                     "old environment). HIP_LAUNCH_BLOCKING=1 is not the same: it does not serialize copies and "
                     "graph replays. GPU serialization cannot rule out a host-side race either (a scheduler that "
                     "prepares batch N+1 while batch N runs): test such a switch with trials.")
    if faults and "sglang" in frameworks:
        steps.append("If the crash is intermittent, test one change at a time with repeated runs, e.g. the "
                     "overlap scheduler off (SGLang `--disable-overlap-schedule`): `faultkit trials run --arm "
                     "base='...' --arm fix='... --disable-overlap-schedule' -n 15` and `faultkit trials plan` "
                     "for how many runs it takes.")
    elif faults:
        steps.append("If the crash is intermittent, test one change at a time with repeated runs: `faultkit trials "
                     "run --arm base='...' --arm fix='...' -n 15`, and `faultkit trials plan` for how many runs "
                     "it takes to tell the rates apart.")
    if captured and kernel_log_readable is False:
        steps.append("The capture could not read the kernel log (its problem is listed below): capture again as "
                     "root or with CAP_SYSLOG (or `sysctl kernel.dmesg_restrict=0`) to have the kernel's record.")
    elif "kernel-log" not in kinds_seen and faults and not captured:
        steps.append("Add the kernel log from the time of the crash (`dmesg -T | grep -iE "
                     "'amdgpu|kfd|fault|VM_L2|NVRM'` or `journalctl -k --since ...`): it tells which engine "
                     "(shader, copy engine, command processor) faulted and on which page.")
    if not faults and not cores and not host:
        # a hang's stacks say what to do next (analyze/hang.py); a crash log is asked for only without them
        steps += hang_steps(stacks) or [
            "No fault was found in this capture: run it again until the crash comes (`faultkit trials run` "
            "repeats it), with `--hang-after` if it hangs instead." if captured else
            "No fault was found: pass the server log with the crash, the kernel log (dmesg), and any "
            "debugger transcript; or reproduce under `faultkit capture`."]
    return steps


def host_crash(kernel: KernelLog, exit_code: int | None, tree_pids: set[int] | None = None) -> str | None:
    """A CPU crash the evidence shows with no GPU fault beside it: the kernel's segfault record of a
    host process, or the capture's target killed by a crash signal (its own, not one sent to stop it).
    A capture's kernel log is the machine's: a segfault record is the target's only where its pid is one
    the capture recorded (`tree_pids`), never another program's crash in the same window."""
    seg = next((e for e in kernel.events if e.kind == "host-segfault"
                and (tree_pids is None or (e.fields or {}).get("pid") in tree_pids)), None)
    if seg is not None:
        return f"the kernel's segfault record: {seg.text[:160]}"
    if (sig := host_crash_signal(exit_code)) is not None:
        return f"it was killed by {sig}"
    return None


DUMP_FAILURE_STEPS = {
    "pipe-handler-missing": "The kernel's core_pattern pipes to a handler that is missing here (a container): set "
                            "HSA_COREDUMP_PATTERN to a writable file path (e.g. /tmp/gpucore.%p); faultkit capture "
                            "does this for you.",
    "handler-error": "The core_pattern pipe handler failed: set HSA_COREDUMP_PATTERN to a writable file path "
                     "(faultkit capture does).",
    "directory-unwritable": "The GPU core's folder is not writable: point HSA_COREDUMP_PATTERN at a writable "
                            "folder (faultkit capture writes into the bundle's cores/).",
    "file-exists": "A GPU core of the same name already existed (the same small pid in a container): put %t in "
                   "HSA_COREDUMP_PATTERN or clear old gpucore.* files.",
    "skipped-pc-sampling": "ROCr skipped the GPU core because PC sampling was active: run the crash without "
                           "rocprofv3 PC sampling to get the dump.",
    "debugger-conflict": "rocr-debug-agent (or a debugger) held the debug interface, so ROCr could not dump: before "
                         "rocm-systems PR 6811 run without HSA_TOOLS_LIB to get the GPU core.",
    "truncated": "The GPU core was cut at the core-size limit: the agents and queues survive; raise `ulimit -c` "
                 "(or use a runtime with HSA_ENABLE_LIGHTWEIGHT_COREDUMP) for the waves' state.",
}


def _for_cores(cores, runtime: RuntimeLog) -> list[str]:
    steps = []
    for c in cores:
        if c.open_with and not c.analysed_with:
            steps.append(f"Open the GPU core {c.path} in its debugger (no GPU needed for CUDA cores): `{c.open_with}`; "
                         f"or run `faultkit triage` where cuda-gdb/rocgdb is installed (or pass --debugger PATH).")
    seen = set()
    for n in runtime.notes:
        event = n.fields.get("event") if n.kind == "gpu-core-dump" else None
        if event in DUMP_FAILURE_STEPS and event not in seen:
            seen.add(event)
            steps.append(DUMP_FAILURE_STEPS[event] + f" ({n.origin})")
    return steps


def _after_debugger(stops, events) -> list[str]:
    steps = []
    if any(e.kind == "debugger-internal-error" for e in events):
        steps.append("The debugger itself failed (`internal-error` in its transcript): what it saw after that is "
                     "lost. Re-run with fewer inferiors followed (attach to the GPU workers only: `faultkit capture "
                     "--with cuda-gdb --attach-workers`), or use the GPU core dump, which needs no debugger attached.")
    amd = [f for f in stops if f.gpu and f.stop.kind != "cuda-exception"]
    if any(f.precise is not True for f in amd):
        steps.append("The wave's PC may be past the faulting instruction: re-run under rocgdb with "
                     "`set amdgpu precise-memory on` and check that `show amdgpu precise-memory` answers "
                     "`on (currently enabled)` (some gfx targets cannot enable it); faultkit capture --with rocgdb "
                     "does both and records the answer.")
    if any(f.kernel_basis and f.kernel_basis.startswith("the stopped wave's frame") for f in amd):
        steps.append("Run `info dispatches` at the stop: the wave's dispatch (third number of its `AMDGPU Wave a:q:d:w` "
                     "id) names the kernel, where the frame may show a device function it called.")
    if any(f.pc is not None and not f.resolved for f in amd):
        steps.append("To map the PC to a source line offline, pass the code object to the triage: the host "
                     "binary or library named by the `file://…#offset=…` URI in `info sharedlibrary`, or the "
                     "object saved from a `memory://` URI (`dump binary memory co.elf OFFSET OFFSET+SIZE`).")
    if stops and not any(f.gpu for f in stops):
        steps.append("The debugger stopped a host thread, not a GPU wave: if the GPU faulted, the runtime's "
                     "event thread aborts the process; catch SIGSEGV/SIGBUS/SIGABRT with `catch signal` and keep "
                     "continuing to the wave's stop, or use `faultkit capture --with rocgdb`.")
    return steps
