"""The H200's diag run (session 9, 22:29-22:31 UTC, `scripts/live_amplify_nvidia.sh $OUT diag` from main f69faf2):
2 rounds of poison, release and caching-off, the crashed trials brought back in one tarball with their REAL rings
cut to header and records (tests/data/live_h200_amplify/diag). The run predates the transcript saving, so the
lane operands come from each trial's triage.md (written on the H200 from the core's cuda-gdb transcript: its
`address operand` line); the rings, the output's arrival stamps and the trials' start clocks are the real ones.

- poison: the table's fill is in the ring with its time, and the trial folder's clocks time the fault (the
  kernel's Xid 13, 5.5 ms after the fill; the CUDA driver's exception line came 0.84 s after it): the block
  is named with "freed and filled with poison 0x83 5.5 ms before the fault" (the run itself, on main before
  the trial-folder fix, said "(its time unknown)").
- release and caching-off: the lane operand was 0x8000000091 ([R20.64+0x10], R20=0x81, R21=0x80) in all four
  processes, whose maps (and freed tables) lay at four different addresses: a value, not an address. It is
  below every allocation of each map: kept "in no allocation", with the doubt said, and no claim."""

import json
import re
import struct
from pathlib import Path
from types import SimpleNamespace

import pytest

from faultkit.analyze import allocation_owner as AO
from faultkit.analyze.debug_stop import Operand
from faultkit.analyze.fault_time import fault_time
from faultkit.ingest.agent_files import parse_agent
from faultkit.sources import agent as agent_source
from faultkit.triage import triage

DIAG = Path(__file__).parent / "data" / "live_h200_amplify" / "diag"
OPERAND = re.compile(r"^- address operand: (0x[0-9a-f]+): the faulting instruction's address operand "
                     r"\[(R\d+)\.64(?:\+(0x[0-9a-f]+))?\] with R\d+=(0x[0-9a-f]+), R\d+=(0x[0-9a-f]+) ", re.M)
RECORD = struct.Struct("<QIHhQQQQIIQ")      # docs: seq crc kind device t addr size stream site tid extra
POISON_KIND, SEGMENT_ALLOC = 18, 4        # ring.py: POISON; SEGMENT_ALLOC in TraceEntry order from ALLOC = 1


def operand(trial: Path) -> tuple[int, Operand, str]:
    m = OPERAND.search((trial / "triage.md").read_text())
    address, reg, off, lo, hi = m[1], m[2], m[3], m[4], m[5]
    op = Operand(reg, (int(hi, 16) << 32) | int(lo, 16), int(off, 16) if off else 0)
    assert op.base + op.offset == int(address, 16)
    return int(address, 16), op, m[0]


def raw_ring(trial: Path) -> tuple[int, int, list[tuple]]:
    """pid, the ring's boottime - monotonic anchor, and its records, read with struct alone."""
    (ring,) = (trial / "agent").glob("*.alloc.ring")
    data = ring.read_bytes()
    mono, boot = struct.unpack_from("<QQ", data, 40)[0], struct.unpack_from("<QQQ", data, 40)[2]
    recs = [RECORD.unpack_from(data, at) for at in range(4096, len(data), 64)]
    return int(ring.name.split(".")[0]), boot - mono, [r for r in recs if r[0]]


def xid13_boot(trial: Path) -> int:
    """The kernel log's first Xid 13 (CLOCK_MONOTONIC seconds) on CLOCK_BOOTTIME, with the trial's start clocks."""
    line = next(t for t in (trial / "kernel.log").read_text().splitlines() if re.search(r"NVRM: Xid \(PCI:[^)]*\): 13,", t))
    start = json.loads((trial / "result.json").read_text())["clocks"]["start"]
    return int(float(re.match(r"\[\s*([\d.]+)\]", line)[1]) * 1e9) + start["boottime_ns"] - start["monotonic_ns"]


def arrival_boot(trial: Path, line: int) -> int:
    """CLOCK_BOOTTIME at which the capture read `line` of server.log: the last stamp row at or before it."""
    rows = [tuple(int(float(x)) if i != 1 else float(x) for i, x in enumerate(r.split("\t")))
            for r in (trial / "server.times.tsv").read_text().splitlines()]
    return max((r for r in rows if r[0] <= line), key=lambda r: r[0])[3]


def detected_line(trial: Path) -> int:
    lines = (trial / "server.log").read_text().splitlines()
    return next(i + 1 for i, t in enumerate(lines) if "coredump: Detected an exception of type" in t)


def agent_log(trial: Path):
    return parse_agent([(f.name, f.read_bytes()) for f in sorted((trial / "agent").iterdir())])


@pytest.mark.parametrize("name", ["trial-002-poison", "trial-005-poison"])
def test_the_poison_crash_names_the_table_and_how_long_before_the_fault_it_was_filled(name):
    trial = DIAG / name
    pid, offset, recs = raw_ring(trial)
    table = next(r for r in recs if r[2] == SEGMENT_ALLOC and r[6] == 64 << 20)
    fill = next(r for r in recs if r[2] == POISON_KIND and r[5] == table[5])
    assert fill[10] == 0x83 and fill[6] == 64 << 20                  # the table's fill, with the 4th tag byte
    # triage reads the trial folder with its clocks: the fault is the kernel's Xid 13; the CUDA driver's
    # exception line (stamped on arrival) came 0.84 s later
    inc = triage([str(trial)])
    at = xid13_boot(trial)
    ft = fault_time(inc.runtime, inc.kernel, inc.log_clock, None)
    assert ft.boottime_ns == at and ft.source.startswith("the kernel log's Xid 13 (")
    server_log = next(i["name"] for i in inc.inputs if i["name"].endswith("server.log"))
    late = inc.log_clock.of_line(server_log, detected_line(trial)) - at
    assert late == arrival_boot(trial, detected_line(trial)) - at and 0.8e9 < late < 0.9e9
    address, op, _ = operand(trial)
    bb = AO.black_box(agent_log(trial), [AO.FaultAddress(address, pid, "the H200 core's lane operand", operand=op)], at)
    o = bb.owners[0]
    ms = round((at - (fill[4] + offset)) / 1e6, 3)
    assert 5 < ms < 6                          # the next decode step's stale gather
    assert o.verdict == "freed" and o.base == table[5] and o.size == 64 << 20 and o.freed_ms_before == ms
    assert o.allocated_at == "/work/main/scripts/uaf_server.py:180 table"
    assert o.text.endswith(f"freed and filled with poison 0x83 {ms:,.1f} ms before the fault: a use after free "
                           f"(pid {pid})")
    # the report written on the H200 (main before the fix) had no time
    assert "freed and filled with poison 0x83 before the fault (its time unknown)" in (trial / "triage.md").read_text()


RELEASE_AND_CACHING_OFF = ["trial-000-release", "trial-003-caching-off", "trial-006-caching-off", "trial-007-release"]


def test_the_same_operand_in_four_processes_is_a_value_and_not_the_finding():
    tables = set()
    for name in RELEASE_AND_CACHING_OFF:
        trial = DIAG / name
        address, op, line = operand(trial)
        assert (address, op) == (0x8000000091, Operand("R20", 0x8000000081, 0x10)), line
        pid, _, recs = raw_ring(trial)
        tables.add(next(r[5] for r in recs if r[2] == SEGMENT_ALLOC and r[6] == 64 << 20))
        lowest = min(r[5] for r in recs if r[2] == SEGMENT_ALLOC)
        bb = AO.black_box(agent_log(trial), [AO.FaultAddress(address, pid, "the H200 core's lane operand",
                                                             operand=op)], None)
        o = bb.owners[0]
        assert o.verdict == "none" and o.text == f"0x8000000091 is in no allocation of this process (pid {pid})"
        assert o.doubt == (f"0x8000000091 is below every allocation of this process (the lowest at 0x{lowest:x}) and "
                           f"was read from one lane's registers (R20:R21 = 0x8000000081): it may be a value the "
                           f"kernel loaded or reused there rather than the address the warp faulted on")
        assert agent_source._claims(SimpleNamespace(black_box=bb), None) == []
        # on the H200 (before the fix) it was the decisive finding
        assert f"Decisive finding: 0x8000000091 is in no allocation of this process (pid {pid})." in \
            (trial / "triage.md").read_text()
    assert len(tables) == 4          # four freed tables at four addresses, one operand: not an address into any
