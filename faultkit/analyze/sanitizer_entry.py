"""Which function of a compute-sanitizer report (any tool) is the kernel, and which is a device function.

The report names the function holding the access on its `at` line, and prints the device call stack
under it (`Device Frame:` lines, innermost first) where the access was in a called function: the
outermost frame is the launched kernel where the report visibly goes on past its frames (its host
backtrace, the `=========` separator that ends each record, the next report, the summary) and the
frame is no helper by its name (entry_signs). Where the paste ends in the frames, the kernel's frame
may be cut. With no `Device Frame:` line the `at` function stands for the kernel unless its name shows
it is a helper (older versions printed an inlined helper's access with no frame under it:
NVIDIA/Fuser#2930's `<unnamed>::loadGeneric`; 2025.3.1 prints the kernel's frame under it, H200), and
only where the record visibly ended: a record cut before its end may have lost the frames that would
show the `at` function is a device function. racecheck names a function per access, all of one kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

from typing import Any

from ..judge.claims import Basis, Claim, Identities, in_device_function
from ..judge.names import kernel_key
from ..model import SanitizerFinding, SanitizerReport
from .entry_signs import helper_sign, unclone


@dataclass(frozen=True)
class SanitizerEntry:
    """The entry point a sanitizer report names, or why it names none."""
    kernel: str | None               # the entry point the report shows (None: it shows none)
    device_function: str | None      # the function the access was in, where that is not the kernel
    unshown: str | None = None       # kernel None: why no entry point is shown (the sign used)
    entry: bool | None = True        # False: no kernel; None: the kernel may be a device function
    cut: str | None = None           # entry None: what the cut record may have lost
    cloned_into: str | None = None   # kernel None: the K of `[clone K] f`, the kernel f was compiled into
    told_by: str | None = None       # kernel named: the sign that shows it is the entry point


def sanitizer_entry(r: SanitizerReport | SanitizerFinding) -> SanitizerEntry:
    at, into = unclone(r.kernel) if r.kernel else (None, None)
    if r.device_frames:
        outer = r.device_frames[-1]
        inner = at or next((f for f in r.device_frames if f), None)
        if not outer:
            return SanitizerEntry(None, inner, "the report's outermost device frame is cut: the kernel's name is "
                                               "not shown", entry=False)
        sign = helper_sign(outer)
        if sign:
            return SanitizerEntry(None, unclone(outer)[0], f"its outermost device frame is "
                                  f"{sign.removeprefix('not an entry point: ')}: no entry point is shown", entry=False)
        if r.device_frames_end:
            return SanitizerEntry(outer, at if at != outer else None,
                                  told_by="the outermost `Device Frame:` of a record that goes on past its frames")
        return SanitizerEntry(None, outer, "the report ends in its device frames: the kernel's frame, the "
                                           "outermost, is not shown", entry=False)
    sign = helper_sign(r.kernel) if r.kernel else None
    # racecheck names the function of each access, all in one kernel (one block's shared memory): where one
    # is a helper and another shows none, the other is the kernel's own code
    sites = getattr(r, "sites", [])
    plain = next((x for x in sites if not helper_sign(x)), None)
    helper = next((x for x in sites if helper_sign(x)), None)
    if plain and helper and r.device_frames_end:
        function, into = unclone(helper)
        named = " (the bracket of its `[clone ...]` names it too)" if into and into == plain else ""
        return SanitizerEntry(plain, function, told_by=f"the function of the race's access that shows no helper{named}")
    if sign:
        cloned = f" (`[clone {into}]`: the kernel it was compiled into, whose frame is not shown)" if into else ""
        return SanitizerEntry(None, at, f"{sign}{cloned}", entry=False, cloned_into=into)
    if r.kernel and r.offset is None and "(" not in r.kernel:
        # `at NAME in FILE:LINE` (compute-sanitizer 2026, cccl#8288): neither the symbol's offset nor a signature,
        # so a name from the line table, which names inlined functions too (that report's cp_async_bulk_cp_mask
        # was a helper inside CUB's DeviceScanKernel)
        return SanitizerEntry(r.kernel, None, entry=None,
                              cut="named without an offset or a parameter list: a name from the line table, which "
                                  "may be a device function inlined into the kernel")
    if r.kernel and not r.device_frames_end:
        return SanitizerEntry(r.kernel, None, entry=None,
                              cut="the report is cut before its end: the `Device Frame:` lines that would show this "
                                  "function is a device function called by the kernel may be missing")
    return SanitizerEntry(r.kernel, None, told_by="the `at` function of a record that ended with no `Device Frame:` "
                                                   "line under it, its name no helper's")


def clone_claim(e: SanitizerEntry, what: str, ids: Identities, origin: str) -> Claim | None:
    """The kernel a `[clone K] f` names where K's frame is not shown: a candidate beside the device
    function's claim, never more (BASES['cloned-into'])."""
    if not e.cloned_into:
        return None
    return Claim(e.cloned_into, Basis("cloned-into", "compute-sanitizer"),
                 f"{what} in device function {e.device_function}, which compute-sanitizer shows as cloned into this "
                 f"kernel (`[clone {e.cloned_into}]`); the kernel's own frame is not shown ({origin})",
                 ids, origin, entry=None, device_function=e.device_function)


def add_claims(out: list[Claim], e: SanitizerEntry, r: SanitizerReport | SanitizerFinding, what: str, where: str,
               ids: Identities, basis: str, this: str = "kernel", entry: bool | None = True, **kw: Any) -> None:
    """The claims one report makes, appended to the claims of the reports before it (`out`) unless one
    of them says the same: the device function where no entry point is shown (and the kernel its
    clone names, a candidate), else the kernel with the device function the access was in. `what` is
    the finding in words, `where` its offset and line (the first access's); `kw` goes to the claims
    (went_on, contradiction)."""
    origin = str(r.origin)
    if e.kernel is None:
        if not e.device_function:
            return
        if not any(not c.named and c.device_function == e.device_function for c in out):
            out.append(in_device_function(e.device_function, "compute-sanitizer",
                                          f"{what} in device function {e.device_function}{where} ({origin}); {e.unshown}",
                                          ids, origin, went_on=kw.get("went_on")))
        cloned = clone_claim(e, what, ids, origin)
        if cloned and not any(c.basis.kind == cloned.basis.kind and kernel_key(c.kernel) == kernel_key(cloned.kernel)
                              for c in out):
            out.append(cloned)
        return
    if any(c.basis.kind == basis and kernel_key(c.kernel) == kernel_key(e.kernel) for c in out):
        return
    # the offset and line are the `at` function's: the device function's only where it is that function
    at_it = bool(e.device_function) and unclone(r.kernel or "")[0] == e.device_function
    inside = f", in its device function {e.device_function}," if at_it else ""
    other = f"; the other access in its device function {e.device_function}" if e.device_function and not at_it else ""
    cut = f"; {e.cut}" if e.cut else f"; the kernel by {e.told_by}" if e.told_by else ""
    out.append(Claim(e.kernel, Basis(basis, "compute-sanitizer"), f"{what} in this {this}{inside}{where} ({origin}){other}{cut}",
                     ids, origin, entry=entry, device_function=e.device_function, **kw))
