"""A GPU core's focused-lane operand that is too low to be an address is not the fault's address (issue 34).

On the H200 (session 9, the Done-when run's diagnosis) every release and caching-off crash's triage made
"0x11 is in no allocation of this process" its decisive finding, from `[R20.64+0x10]` with R20=0x1, R21=0x0
(and 0x8000000091 from R20=0x81, R21=0x80): the register pair held a small value (loaded through the stale
pointer, or reused), not where the warp's access went. Now an operand below 64 KiB gets the verdict not-an-address:
it says what the registers hold and that one lane does not give the faulting address; "in no allocation"
stays a note, and no claim is made of it. A value above 64 KiB but below every allocation of the map
(0x8000000091) could be a wild pointer: it stays "in no allocation", with the doubt said, and makes no claim.

The evidence is the H200's captured bundle tests/data/live_h200_agent/uaf (its ring holds the 1 GiB KV pool
freed and released before the stale gather), with the cuda-gdb transcript edited only in R20/R21."""

import json
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

from faultkit.analyze import allocation_owner as AO
from faultkit.analyze.debug_stop import Operand, address_operand
from faultkit.ingest.agent_files import parse_agent

ROOT = Path(__file__).resolve().parent.parent
UAF = Path(__file__).parent / "data" / "live_h200_agent" / "uaf"
TRANSCRIPT = "cores/cuda.vm.616.1796123062.cuda-gdb.txt"
LOWEST = 0x7EFE98000000        # the ring's lowest segment (segment_alloc 0x7efe98000000, 1 GiB: the KV pool)


def triage_with(tmp: Path, r20: int, r21: int) -> tuple[dict, str]:
    bundle = tmp / "uaf"
    shutil.copytree(UAF, bundle)
    t = bundle / TRANSCRIPT
    text = t.read_text()
    text, n = re.subn(r"(?m)^R20 .*$", f"R20            0x{r20:x}          {r20}", text)
    text, m = re.subn(r"(?m)^R21 .*$", f"R21            0x{r21:x}          {r21}", text)
    assert n == m == 1
    t.write_text(text)
    out = []
    for fmt in ("json", "md"):
        r = subprocess.run([sys.executable, "-m", "faultkit.cli", "triage", str(bundle), "-f", fmt], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        out.append(r.stdout)
    return json.loads(out[0]), out[1]


def decisive(md: str) -> str:
    return next(line for line in md.splitlines() if line.startswith("Decisive finding:"))


def test_a_register_value_is_not_made_the_decisive_finding(tmp_path):
    rep, md = triage_with(tmp_path, 0x1, 0x0)
    o = rep["black_box"]["owners"][0]
    assert o["address"] == "0x1" and o["verdict"] == AO.NOT_AN_ADDRESS == "not-an-address"
    assert o["text"] == ("the operand's base register pair R20:R21 holds 0x1 (R20=0x1, R21=0x0): a small integer, not a "
                         f"device pointer (no mapping lies below 0x10000, and this process's lowest allocation is at "
                         f"0x{LOWEST:x}): a value loaded through a stale pointer, or a register the kernel reused after "
                         f"the access; the address the warp faulted on is not known from one lane's registers (pid 616)")
    assert o["notes"] == ["0x1 is in no allocation of this process (pid 616); as an address it is a candidate at most"]
    # no claim of the owner: the decisive finding is the core's stop, the kernel still certain
    assert not any(c["basis"]["kind"] == "address-owner" for c in rep["verdict"]["claims"])
    assert rep["verdict"]["level"] == "certain" and rep["verdict"]["kernel"] == "gather_kernel"
    assert decisive(md) == ("Decisive finding: GPU core dump: the excepting warp in this kernel at PC 0x7eff037a3560, "
                            "block (300,0,0), thread (32,0,0), device 0, sm 40, warp 11, lane 0.")
    assert "**not-an-address**: the operand's base register pair R20:R21 holds 0x1" in md
    # amplify's black box of such a crash names no block and says why
    from faultkit.amplify.report import black_box_findings
    assert black_box_findings([tmp_path / "uaf"], 1) == [f"name no block (uaf: no fault address ({o['text']}))"]


def test_a_low_value_that_could_be_mapped_stays_in_no_allocation_and_is_not_decisive(tmp_path):
    """0x8000000081 (R20=0x81, R21=0x80, as in every H200 release and caching-off core but for its +0x10) is
    below the map's allocations but above 64 KiB: a wild pointer can be there, so it stays "in no
    allocation", with a note that it may be a value rather than the address, and it is not the finding."""
    rep, md = triage_with(tmp_path, 0x81, 0x80)
    o = rep["black_box"]["owners"][0]
    assert o["verdict"] == "none" and o["text"] == "0x8000000081 is in no allocation of this process (pid 616)"
    assert (f"0x8000000081 is below every allocation of this process (the lowest at 0x{LOWEST:x}) and was read from "
            "one lane's registers (R20:R21 = 0x8000000081): it may be a value the kernel loaded or reused there "
            "rather than the address the warp faulted on") in o["notes"]
    assert o["address_doubt"] in o["notes"]
    # shown, but no claim: the decisive finding is the core's stop
    assert not any(c["basis"]["kind"] == "address-owner" for c in rep["verdict"]["claims"])
    assert decisive(md).startswith("Decisive finding: GPU core dump: the excepting warp in this kernel at PC ")


def test_the_real_operand_still_names_the_freed_pool(tmp_path):
    """The transcript as recorded (R20=0x98025280, R21=0x7efe): inside the KV pool released to the driver before
    the fault: the ring's segment_free against the kernel log's Xid 13 (`[   77.096763]`, CLOCK_MONOTONIC, put
    on CLOCK_BOOTTIME with the manifest's start clocks). The demo sleeps 200 ms after empty_cache()."""
    rep, md = triage_with(tmp_path, 0x98025280, 0x7EFE)
    o = rep["black_box"]["owners"][0]
    data = (UAF / "agent" / "616.alloc.ring").read_bytes()
    mono, _, boot = struct.unpack_from("<QQQ", data, 40)
    freed = next(r for r in (struct.unpack_from("<QIHhQQQQIIQ", data, at) for at in range(4096, len(data), 64))
                 if r[2] == 5 and r[5] == 0x7EFE98000000)            # SEGMENT_FREE of the pool
    start = json.loads((UAF / "manifest.json").read_text())["start"]
    xid = int(77.096763 * 1e9) + start["boottime_ns"] - start["monotonic_ns"]
    assert "[   77.096763] NVRM: Xid (PCI:0000:00:06): 13, " in (UAF / "kernel.log").read_text()
    ms = round((xid - (freed[4] + boot - mono)) / 1e6, 3)
    assert 200 < ms < 260
    assert o["verdict"] == "freed" and o["address"] == "0x7efe98025280" and o["freed_ms_before_fault"] == ms
    assert decisive(md).startswith("Decisive finding: 0x7efe98025280 is 152,192 bytes into the 1,073,741,824-byte "
                                   "segment at 0x7efe98000000")


def test_an_address_above_every_allocation_stays_in_no_allocation(tmp_path):
    """0x7fff00000000 could be a pointer (above the map's allocations, none of them): neither rule is for it."""
    rep, md = triage_with(tmp_path, 0x0, 0x7FFF)
    o = rep["black_box"]["owners"][0]
    assert o["verdict"] == "none" and o["text"] == "0x7fff00000000 is in no allocation of this process (pid 616)"
    assert not any("below every allocation" in n for n in o["notes"]) and o["address_doubt"] is None
    assert decisive(md) == "Decisive finding: 0x7fff00000000 is in no allocation of this process (pid 616)."


def test_the_h200_diagnosis_operand_with_its_offset():
    """`[R20.64+0x10]` with R20=0x1, R21=0x0, as the H200's release and caching-off cores read (done.log)."""
    a, basis, op = address_operand("@!P0 LDG.E R6,desc[UR4][R20.64+0x10]", {"R20": 0x1, "R21": 0x0})
    assert (a, op) == (0x11, Operand("R20", 0x1, 0x10)) and "[R20.64+0x10] with R20=0x1, R21=0x0" in basis
    log = parse_agent([(f.name, f.read_bytes()) for f in sorted((UAF / "agent").iterdir())])
    o = AO.black_box(log, [AO.FaultAddress(a, 616, basis, operand=op)], None).owners[0]
    assert o.verdict == "not-an-address" and o.text.startswith(
        "the operand's base register pair R20:R21 holds 0x1 (R20=0x1, R21=0x0) plus the offset 0x10: a small integer")
    # the same value from a kernel log or a runtime line (no operand) is looked up as an address, as before
    plain = AO.black_box(log, [AO.FaultAddress(a, 616, "the runtime's fault line")], None).owners[0]
    assert plain.verdict == "none"
