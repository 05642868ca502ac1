"""Parser records that are GPU faults by themselves and were heard by no claim: device-side
asserts (the GPU runtime's `__assertfail` line) and CUDA API errors compute-sanitizer reported.

An assert alone is a GPU fault of kind `device-assert`; the function it names asserted, so it is
the kernel or a device function inside one (docs/evidence-coverage.md: cuda-assert, hip-assert,
ceiling likely, kernel field `device fn`): the claim never says it is the entry point, and a name
that shows it is a helper (a lambda's `operator()`, a device library's prefix) is said as one, apart
from any kernel. An API error alone is a GPU fault of kind `api-error` with its code; it names no
kernel (its frames are the host's); its CUDA error number is kept apart from the HSA status `code`.
"""

from __future__ import annotations


from ..judge.claims import Basis, Claim, Identities, in_device_function
from ..model import DebuggerLog, DeviceAssert, Fault, RuntimeLog
from .entry_signs import helper_sign


def assert_faults(runtime: RuntimeLog) -> list[Fault]:
    out = []
    for a in runtime.device_asserts:
        detail = {"function": a.function, "file": a.file, "line": a.line, "assertion": a.assertion,
                  "runtime": a.runtime, "threads": a.count}
        if a.block is not None:
            detail.update(block=list(a.block), thread=list(a.thread or ()))
        where = f" in {a.function}" if a.function else ""
        out.append(Fault(source="runtime", kind="device-assert", pid=a.pid, process=a.process_tag, detail=detail,
                         meaning=f"A device-side assert failed{where} ({a.file}:{a.line}): `{a.assertion}`, on "
                                 f"{a.count} thread(s). The kernel stopped on it; the host sees an error at its "
                                 f"next synchronizing call.", origin=a.origin))
    return out


def assert_claims(runtime: RuntimeLog) -> list[Claim]:
    out, seen = [], set()
    for a in runtime.device_asserts:
        if not a.function or a.function in seen:
            continue
        seen.add(a.function)
        at = f"{a.origin.file}:{a.origin.line}"
        why = (f"device-side assert `{a.assertion}` failed in {a.function} ({a.file}:{a.line})"
               + (f", block {tuple(a.block)} thread {tuple(a.thread or ())}" if a.block else "")
               + f" ({at})")
        sign = helper_sign(a.function)
        if sign:
            out.append(in_device_function(a.function, a.runtime, f"{why}; {sign}", Identities(pid=a.pid), at))
        else:
            # the asserting function: the kernel itself, or a device function it called
            out.append(Claim(a.function, Basis("device-assert", a.runtime), why, Identities(pid=a.pid), at,
                             entry=None))
    return out


def api_error_faults(debugger: DebuggerLog) -> list[Fault]:
    out = []
    for e in debugger.events:
        if e.kind != "sanitizer-api-error":
            continue
        f = e.fields
        # the CUDA error number is no HSA status: it stays out of `code` (the report decodes that)
        out.append(Fault(source="sanitizer", kind="api-error",
                         detail={"api": f.get("api"), "error": f.get("error"), "error_code": f.get("code"),
                                 "text": f.get("text")},
                         meaning=f"compute-sanitizer saw {f.get('api')} return {f.get('error') or 'error'} "
                                 f"({f.get('code')}: {f.get('text')}): the GPU error surfaced at this API call; "
                                 f"the kernel that caused it is not named by this report.", origin=e.origin))
    return out
