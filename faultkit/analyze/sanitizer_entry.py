"""Which function of a compute-sanitizer report (any tool) is the kernel, and which is a device function.

The report names the function holding the access on its `at` line, and prints the device call stack
under it (`Device Frame:` lines, innermost first) where the access was in a called function: the
outermost frame is the launched kernel where the report visibly goes on past its frames (its host
backtrace, the `=========` separator that ends each record, the next report, the summary) and the
frame is no helper by its name (entry_signs). Where the paste ends in the frames, the kernel's frame
may be cut. With no `Device Frame:` line the `at` function stands for the kernel unless its name shows
it is a helper (an inlined helper prints no frame of its own: NVIDIA/Fuser#2930's
`<unnamed>::loadGeneric`), and only where the record visibly ended: a record cut before its end may
have lost the frames that would show the `at` function is a device function.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..judge.claims import Basis, Claim, Identities
from ..model import SanitizerFinding, SanitizerReport
from .entry_signs import helper_sign, unclone


@dataclass(frozen=True)
class SanitizerEntry:
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
    if sign:
        cloned = f" (`[clone {into}]`: the function it was cloned into, whose frame is not shown)" if into else ""
        return SanitizerEntry(None, at, f"{sign}{cloned}", entry=False, cloned_into=into)
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
