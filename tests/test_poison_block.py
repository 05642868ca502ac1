"""The poison amplifier names the freed block a stale read came through (issue 34: "the black box of the
amplified crashes names the block (allocated at ..., freed ... ms before)").

On the H200 (docs/live-h200.md, the third amplify run) every poison crash faulted at an address made of
the poison: 0xfdfe7d2343ddfc08, 0xfdfe7d1909ddfe08, 0xfdfe7dc23bddfc08 (the sample's gather read the
freed table's 0x7f7f... as a page index and scaled it by its page, 1,024 bytes), "in no allocation":
nothing said which block the poison came from. Now poison.cpp fills each freed block with the next byte
of its tag set and records the fill in the tracker's ring; analyze/poison_address.py decodes the address.

The C++ here is the real tracker.cpp and poison.cpp, built against tests/data/fake_c10 (torch's allocator
header's names, with fake_event playing the allocator) and a cudaMemsetAsync that records its calls."""

import ctypes
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from faultkit.agent import ring
from faultkit.analyze import allocation_owner as AO
from faultkit.analyze import poison_address as PA

AGENT = Path(ring.__file__).parent
FAKE_C10 = Path(__file__).parent / "data" / "fake_c10"
W7F = 0x7F7F7F7F7F7F7F7F
H200_POISON_FAULTS = [0xFDFE7D2343DDFC08, 0xFDFE7D1909DDFE08, 0xFDFE7DC23BDDFC08]
PAGE_BYTES = 256 * 4          # uaf_server.py CudaDevice: PAGE_WORDS float32 per page


def test_the_h200_poison_faults_are_poison_scaled_by_the_page_plus_the_kv_pool():
    """Independent of faultkit's decoder: A - (0x7f.. << 10) is the KV pool's base (2 MiB aligned, ending
    0xe00000 like every KV segment the H200's rings recorded: 0x7f5a5de00000, 0x7fa9cfe00000, ...) plus
    a lane's offset within its page (< 1,024)."""
    for a in H200_POISON_FAULTS:
        rest = (a - ((W7F << 10) & PA.MASK)) & PA.MASK
        base, lane = rest & ~((2 << 20) - 1), rest & ((2 << 20) - 1)
        assert base & 0xFFFFFF == 0xE00000 and 0x7F0000000000 <= base < 0x800000000000
        assert lane < PAGE_BYTES
        assert a >= PA.NOT_A_REAL_ADDRESS


def test_the_tag_bytes_keep_every_shifted_word_out_of_any_address_range():
    tags = [b for b in range(256) if PA.is_tag(b)]
    assert len(tags) == 246 and 0x7F in tags and 0x00 not in tags and 0xFF not in tags and 0x80 not in tags
    for b in tags:
        for k in range(64):
            top = ((PA.word(b) << k) & PA.MASK) >> 56
            assert 0x03 <= top <= 0xFE or k >= 57        # shifted past 57 bits only the low pattern is left
            if k <= PA.MAX_SHIFT:
                for base in (0, 0x7F2545E00000, (1 << 56) - 1):
                    assert PA.NOT_A_REAL_ADDRESS <= (base + ((PA.word(b) << k) & PA.MASK)) & PA.MASK


def build(tmp: Path, name: str, sources: list[Path], includes: list[Path] = ()) -> str:
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler here: the agent's libraries cannot be built")
    out = str(tmp / f"{name}.so")
    cmd = [cxx, "-std=c++17", "-O2", "-fPIC", "-shared", *[a for i in includes for a in ("-I", str(i))],
           *map(str, sources), "-o", out]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return out


STUB = """
#include <cstddef>
#include <cstdint>
extern "C" {
uint64_t calls[64][3];
int ncalls = 0;
int cudaMemsetAsync(void* p, int value, size_t n, void* stream) {
  calls[ncalls][0] = (uint64_t)p; calls[ncalls][1] = (uint64_t)value; calls[ncalls][2] = n; ncalls++;
  return 0;
}
}
"""

KV, TABLE = 0x7FA9CFE00000, 0x7FA9B7400000      # the H200's trial-003-release ring: its KV and table segments


def run_agent_libs(tmp: Path) -> tuple[Path, list]:
    """The real libraries in a process of their own: the tracker records the two segments with their
    Python sites, the poison library fills three freed blocks (the table last) and records each fill."""
    tracker = build(tmp, "tracker", [AGENT / "tracker.cpp"], [FAKE_C10])
    poison = build(tmp, "poison", [AGENT / "poison.cpp"], [FAKE_C10])
    (tmp / "stub.cpp").write_text(STUB)
    stub = build(tmp, "stub", [tmp / "stub.cpp"])
    agent = tmp / "agent"
    agent.mkdir()
    code = textwrap.dedent(f"""
        import ctypes, importlib.util, json, time
        spec = importlib.util.spec_from_file_location("rt", {str(AGENT / "runtime.py")!r})
        rt = importlib.util.module_from_spec(spec); spec.loader.exec_module(rt)
        ring = rt._load("ring")
        rt._state["header"] = {{"failures": []}}
        stub = ctypes.CDLL({stub!r}, mode=ctypes.RTLD_GLOBAL)    # found as cudaMemsetAsync by dlsym
        lib = ctypes.CDLL({tracker!r})
        rt._declare(lib)
        lib.fake_event.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_size_t]
        path = {str(agent / "700.alloc.ring")!r}
        cap = ring.create(path, 1 << 16, "torch-tracker-segments")
        assert lib.fk_attach(path.encode(), cap, 0) == 0
        assert rt.start_sites({tracker!r}, lib, {str(agent / "700.sites.tsv")!r}, "/nonexistent/") is None
        # the agent's own attach: the poison library handed the tracker's fk_note (runtime._attach_poison)
        import os
        os.environ["FAULTKIT_AMPLIFY_POISON"] = "0x7f"
        class Job:
            library, seconds, problem = {poison!r}, 0.0, None
        rt._state.update(files=rt._load("files"), poison_build=Job, lib=lib,
                         header={{"failures": [], "armed": []}})
        rt._attach_poison()
        assert rt._state["header"]["armed"] == ["amplify-poison"], rt._state["header"]
        assert rt._state["header"]["amplify_poison"]["fills_recorded"] is True
        p = rt._state["poison_lib"]
        p.fake_event.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_size_t]
        def __init__():
            lib.fake_event(3, {KV}, 2 << 20, 0)            # SEGMENT_ALLOC: the KV pool
        def table():
            lib.fake_event(3, {TABLE}, 64 << 20, 0)        # SEGMENT_ALLOC: the block table's segment
        __init__()
        table()
        for addr, size in [({KV} + 0x100000, 512), ({KV} + 0x100200, 512), ({TABLE}, 64 << 20)]:
            p.fake_event(2, addr, size, 5)                 # FREE_COMPLETED: into the pool, poisoned
        time.sleep(0.3)                                    # the resolver writes the sites
        calls = (ctypes.c_uint64 * 3 * 64).in_dll(stub, "calls")
        print(json.dumps([[calls[i][j] for j in range(3)] for i in range(ctypes.c_int.in_dll(stub, "ncalls").value)]))
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    (agent / "700.json").write_text(json.dumps({"pid": 700, "ppid": 699, "mode": "segments", "armed": [
        "allocator-segments", "amplify-poison"], "failures": [], "alloc": {"mechanism": "c++ trace tracker"}}))
    return agent, json.loads(r.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def agent_run(tmp_path_factory):
    return run_agent_libs(tmp_path_factory.mktemp("agent-libs"))


def test_each_fill_takes_the_next_tag_and_is_recorded_in_the_trackers_ring(agent_run):
    agent, memsets = agent_run
    tags = [b for b in list(range(0x7F, 256)) + list(range(0x7F)) if bin(b).count("1") in range(2, 8)]
    assert tags[:3] == [0x7F, 0x81, 0x82]                  # 0x80 has one bit: skipped
    assert memsets == [[KV + 0x100000, 0x7F, 512], [KV + 0x100200, 0x81, 512], [TABLE, 0x82, 64 << 20]]
    data = (agent / "700.alloc.ring").read_bytes()
    recs, torn = ring.read_records(data, ring.read_header(data)[0]["capacity"])
    assert torn == 0
    assert [(ring.KIND_NAMES[r[2]], r[5], r[6], r[7], r[10]) for r in recs] == [
        ("segment_alloc", KV, 2 << 20, 0, 0), ("segment_alloc", TABLE, 64 << 20, 0, 0),
        ("poison", KV + 0x100000, 512, 5, 0x7F), ("poison", KV + 0x100200, 512, 5, 0x81),
        ("poison", TABLE, 64 << 20, 5, 0x82)]


def agent_process(agent: Path):
    from faultkit.ingest.agent_files import parse_agent
    log = parse_agent([(f.name, f.read_bytes()) for f in sorted(agent.iterdir())])
    return log, log.processes[700]


def test_a_fault_at_the_tables_poison_names_the_table(agent_run):
    agent, _ = agent_run
    log, p = agent_process(agent)
    fill = next(e for e in p.events if e.kind == "poison" and e.address == TABLE)
    # the sample's gather: kv + page * 1,024 + lane offset, the page read from the freed table (0x82..)
    fault = (KV + ((PA.word(0x82) << 10) & PA.MASK) + 0x208) & PA.MASK
    at = fill.t_ns + 12_500_000                            # 12.5 ms after the fill
    bb = AO.black_box(log, [AO.FaultAddress(fault, 700, "the core's lane operand")], at)
    o = bb.owners[0]
    assert o.verdict == "freed" and o.base == TABLE and o.size == 64 << 20 and o.freed_ms_before == 12.5
    assert o.allocated_at.endswith(" table")                # the site of the table's segment, from the tracker
    assert o.text.startswith(f"0x{fault:x} is poison 0x82 read as an index (scaled by 4 or 1,024 or 262,144 bytes) "
                             f"into the 2,097,152-byte segment at 0x{KV:x} allocated at ")
    assert f"the poison came from the 67,108,864-byte block at 0x{TABLE:x} allocated at " in o.text
    assert o.text.endswith("freed and filled with poison 0x82 12.5 ms before the fault: a use after free (pid 700)")
    # the KV pool's own small blocks got other bytes: their poison names them, not the table
    small = (KV + ((PA.word(0x81) << 10) & PA.MASK) + 8) & PA.MASK
    o2 = AO.black_box(log, [AO.FaultAddress(small, 700, "x")], at).owners[0]
    assert o2.base == KV + 0x100200 and o2.size == 512
    # a pointer read from the table's poison
    o3 = AO.black_box(log, [AO.FaultAddress(PA.word(0x82) + 0x40, 700, "x")], at).owners[0]
    assert o3.base == TABLE and "a pointer read from poison 0x82" in o3.text


def test_an_address_that_is_no_poison_stays_in_no_allocation(agent_run):
    agent, _ = agent_run
    log, p = agent_process(agent)
    for a in (0xDEAD0000000, (KV + ((PA.word(0x90) << 10) & PA.MASK)) & PA.MASK):   # 0x90: no fill used it
        o = AO.black_box(log, [AO.FaultAddress(a, 700, "x")], None).owners[0]
        assert o.verdict == "none", o.text


def test_the_crashes_name_the_block_they_have_in_common(agent_run):
    """Three amplified crashes: two read the table's poison (12.5 and 30 ms after its fill), one a small
    block's: the verdict's black box names the table, in 2 of the 3 crashed trials looked at."""
    from faultkit.amplify.report import name_the_block
    from faultkit.amplify.verdict import ArmOutcome, sentence
    agent, _ = agent_run
    log, p = agent_process(agent)
    fill = next(e for e in p.events if e.kind == "poison" and e.address == TABLE)
    table_fault = (KV + ((PA.word(0x82) << 10) & PA.MASK) + 8) & PA.MASK
    small_fault = (KV + ((PA.word(0x7F) << 10) & PA.MASK) + 8) & PA.MASK

    def owner(addr, ms):
        return AO.black_box(log, [AO.FaultAddress(addr, 700, "x")], fill.t_ns + int(ms * 1e6)).owners[0]
    found = [("trial-001-poison", owner(table_fault, 12.5)), ("trial-003-poison", owner(small_fault, 12.5)),
             ("trial-005-poison", owner(table_fault, 30))]
    site = found[0][1].allocated_at
    text = name_the_block(found, 3)
    assert text == (f"name the block: the 67,108,864-byte block allocated at {site}, freed 12.5 to 30.0 ms before the "
                    f"fault, in 2 of 3 crashed trial(s) looked at (trial-001-poison, trial-005-poison); 1 other "
                    f"trial(s) name another block")
    o = ArmOutcome("poison", "memory-reuse", 10, 10, 0, 10, 1e-5, "decided", 6.8, 0, [text])
    assert "; the black box of the amplified crashes name the block: the 67,108,864-byte block allocated at " \
        in sentence(o)


H200_TRANSCRIPT = Path(__file__).parent / "data" / "live_h200_agent" / "uaf" / "cores" / \
    "cuda.vm.616.1796123062.cuda-gdb.txt"


def with_operand(text: str, address: int) -> str:
    """The H200's cuda-gdb transcript with only the faulting operand's register pair (R20:R21 of
    `@!P1 LDG.E R8,desc[UR4][R20.64]`) changed to hold `address`."""
    lo, hi = address & 0xFFFFFFFF, address >> 32
    out = []
    for line in text.splitlines(keepends=True):
        if line.startswith("R20 "):
            line = f"R20            0x{lo:x}          {lo}\n"
        elif line.startswith("R21 "):
            line = f"R21            0x{hi:x}          {hi}\n"
        out.append(line)
    return "".join(out)


def test_a_trial_folders_fault_is_timed_and_the_fill_said_so_many_ms_before(agent_run, tmp_path):
    """The H200's Done-when run said of every poison crash "freed and filled with poison 0x83 before the fault
    (its time unknown)": the fill's ring record has its time, but a trial folder (no capture manifest) was not
    read with its arrival stamps, so the fault had none. Here a trial folder as trials/runner.py writes it:
    the real agent's ring (tracker.cpp + poison.cpp), the CUDA driver's exception line in server.log stamped
    on arrival 12.5 ms after the table's fill (server.times.tsv), result.json's start clocks, and the H200's
    cuda-gdb transcript with its operand holding the table's poison read as a page index."""
    agent, _ = agent_run
    trial = tmp_path / "trial-001-poison"
    shutil.copytree(agent, trial / "agent")
    data = (trial / "agent" / "700.alloc.ring").read_bytes()
    head, _ = ring.read_header(data)
    offset = head["boottime_ns"] - head["monotonic_ns"]           # the ring's records are on CLOCK_MONOTONIC
    fill_mono = next(r[4] for r in ring.read_records(data, head["capacity"])[0]
                     if r[2] == ring.POISON and r[5] == TABLE)
    fault_mono = fill_mono + 12_500_000
    wall0 = 1796162713.124123
    (trial / "result.json").write_text(json.dumps({
        "index": 1, "arm": "poison", "outcome": "crash", "schema": "faultkit.trials.result/1",
        "clocks": {"start": {"wall": wall0, "monotonic_ns": fill_mono - 4_000_000_000,
                             "boottime_ns": fill_mono - 4_000_000_000 + offset}}}))
    (trial / "server.log").write_text(
        "server ready on port 30126 (worker pid 700)\n"
        "[22:05:18.737063] coredump: Starting GPU coredump generation\n"
        "[22:05:18.740316] coredump: Detected an exception of type CUDBG_EXCEPTION_WARP_OUT_OF_RANGE_ADDRESS (5)\n"
        "server: worker died (signal 6); shutting down\n")
    rows = [(1, fill_mono - 3_000_000_000), (2, fault_mono - 3_000_000), (3, fault_mono), (4, fault_mono + 4 * 10**9)]
    (trial / "server.times.tsv").write_text("".join(
        f"{line}\t{wall0 + (mono - fill_mono) / 1e9 + 4:.6f}\t{mono}\t{mono + offset}\n" for line, mono in rows))
    fault = (KV + ((PA.word(0x82) << 10) & PA.MASK) + 0x208) & PA.MASK
    (trial / "cores").mkdir()
    (trial / "cores" / "cuda.vm.700.1796162716.cuda-gdb.txt").write_text(with_operand(H200_TRANSCRIPT.read_text(), fault))
    r = subprocess.run([sys.executable, "-m", "faultkit.cli", "triage", str(trial), "-f", "json"],
                       cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    o = rep["black_box"]["owners"][0]
    assert o["address"] == f"0x{fault:x}" and o["verdict"] == "freed" and o["base"] == f"0x{TABLE:x}"
    assert o["freed_ms_before_fault"] == 12.5
    assert o["text"].endswith("freed and filled with poison 0x82 12.5 ms before the fault: a use after free (pid 700)")
    assert "the fault's time is not known: 'live' and 'freed' are judged at the map's end" not in rep["black_box"]["notes"]
    # result.json is faultkit's record of the trial, not evidence (its fault_line would count the fault twice),
    # and the stamps are stamps, not a log
    names = [Path(i["name"]).name for i in rep["inputs"]]
    assert "result.json" not in names and "server.times.tsv" not in names and "server.log" in names
