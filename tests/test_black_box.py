"""The join of the agent's records with the fault: the H200 runs kept in tests/data/live_h200_agent
(a use-after-free of a released pool, a read past a live block, a wild pointer), synthetic rings
against the corpus's ROCm faults (a runtime `on address` line, a kernel-log page), and the parsers'
handling of cut and torn input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from faultkit.agent import files, ring
from faultkit.analyze.allocation_owner import FaultAddress, black_box, locate
from faultkit.export.report import render_markdown, to_json
from faultkit.export.timeline import build_timeline
from faultkit.ingest.agent_files import parse_agent, parse_stacks
from faultkit.triage import triage

from .conftest import ROOT

LIVE = ROOT / "tests" / "data" / "live_h200_agent"
DEMO = (ROOT / "scripts" / "agent_fault_demo.py").read_text().splitlines()
CORPUS = ROOT.parent / "shared" / "corpus"


def _line_of(text: str) -> int:
    return next(i + 1 for i, t in enumerate(DEMO) if text in t)


def _planted(case: str) -> int:
    """The address the demo planted, as its own output line says."""
    m = re.search(r"reads at (0x[0-9a-f]+)", (LIVE / case / "server.log").read_text())
    return int(m[1], 16)


def _lane(case: str) -> int:
    """The core's focused-lane operand, from the cuda-gdb transcript's registers (R20/R21 pair etc.)."""
    text = next((LIVE / case / "cores").glob("*.txt")).read_text()
    reg = re.search(r"\[(R\d+)\.64\]", text[text.index("*>"):])[1]
    n = int(reg[1:])
    regs = dict(re.findall(r"^(R\d+)\s+(0x[0-9a-f]+)", text, re.M))
    return (int(regs[f"R{n + 1}"], 16) << 32) | int(regs[f"R{n}"], 16)


@pytest.fixture(scope="module")
def live():
    return {c: triage([str(LIVE / c)]) for c in ("uaf", "oob", "wild")}


def test_use_after_free_of_a_released_pool(live):
    inc = live["uaf"]
    (o,) = inc.black_box.owners
    assert o.address == _lane("uaf")
    assert 0 <= o.address - _planted("uaf") < 4096        # the focused lane's element of the planted block
    assert o.verdict == "freed" and o.released is True and o.level == "segment"
    assert o.size == 1 << 30                                # make_kv_pool: torch.empty(1 << 30, uint8)
    assert o.allocated_at.endswith(f"agent_fault_demo.py:{_line_of('torch.empty(1 << 30')} make_kv_pool")
    assert 200 < o.freed_ms_before < 5000                  # the demo sleeps 0.2 s after empty_cache()
    assert "freed and released to the driver" in o.text and "use after free" in o.text
    assert inc.verdict.decisive == o.text
    md = render_markdown(inc)
    assert f"Decisive finding: {o.text}" in md


def test_a_read_past_the_end_of_a_live_block(live):
    (o,) = live["oob"].black_box.owners
    assert o.verdict == "past-end" and o.size == 64 << 20  # alloc_block_table: 16 Mi int32
    assert o.address == _lane("oob")
    planted_past = 12352                                     # PAST in the demo
    assert o.offset == planted_past + (o.address - _planted("oob"))
    assert o.allocated_at.endswith(f"agent_fault_demo.py:{_line_of('torch.zeros(16 << 20')} alloc_block_table")
    assert f"{o.offset:,} bytes past the end of the 67,108,864-byte segment" in o.text


def test_a_wild_pointer_is_in_no_allocation(live):
    (o,) = live["wild"].black_box.owners
    assert o.verdict == "none" and 0 <= o.address - 0xDEAD0000000 < 4096
    assert "in no allocation of this process" in o.text


def test_every_thread_at_the_abort_with_the_gpu_waiter_marked(live):
    for case, inc in live.items():
        pid = int(re.search(r"pid (\d+)", (LIVE / case / "server.log").read_text())[1])
        views = inc.black_box.threads[pid]
        assert any(t.frames and t.frames[0].endswith(f"agent_fault_demo.py:{_line_of('time.sleep(0.005)')} "
                                                    f"scheduler_loop") for t in views)
        (marked,) = [t for t in views if t.mark and "GPU runtime" in t.mark]
        assert marked.frames[0].endswith(" synchronize")
        assert marked.frames[1].endswith(f"agent_fault_demo.py:{_line_of('torch.cuda.synchronize()')} decode_step")
        assert inc.black_box.dumps[pid].startswith("Fatal Python error: Aborted")


def test_json_and_timeline_carry_the_black_box(live):
    inc = live["uaf"]
    j = to_json(inc)["black_box"]
    assert j["owners"][0]["verdict"] == "freed" and j["owners"][0]["size"] == 1 << 30
    assert j["owners"][0]["released_to_driver"] is True
    proc = next(p for p in j["processes"] if p["events"])
    assert proc["allocations"] == "c++ trace tracker" and proc["threads_at_abort"]
    json.dumps(j)
    tl = build_timeline(inc, None)
    pts = [p for p in tl.points if p.track.endswith(":memory")]
    kinds = [p.name.split()[0] for p in pts]
    assert "segment_free" in kinds and "segment_alloc" in kinds
    freed = next(p for p in pts if p.name.startswith("segment_free") and p.args["size"] == 1 << 30)
    assert freed.args["site"].endswith(" worker")


# ---------------- synthetic rings against the corpus's ROCm faults ----------------

def _agent(tmp: Path, pid: int, events: list[tuple], blocks: bool, sites: dict[int, str]) -> Path:
    d = tmp / files.DIR
    d.mkdir(parents=True, exist_ok=True)
    w = ring.Writer(str(d / files.name(pid, files.ALLOC_RING)), 1 << 16,
                    "torch-tracker-blocks" if blocks else "torch-tracker-segments")
    for kind, addr, size, site, t in events:
        w.write(kind, addr=addr, size=size, site=site, t_ns=t)
    (d / files.name(pid, files.SITES)).write_text("".join(f"{k}\t{v}\t{v}\n" for k, v in sites.items()) + "9\tcut")
    (d / files.name(pid, files.HEADER)).write_text(json.dumps({"pid": pid, "alloc": {"mechanism": "c++ trace tracker"}}))
    return d


def _corpus(rel: str) -> Path:
    p = CORPUS / rel
    if not p.exists():
        pytest.skip(f"corpus file {rel} is not here (../shared/corpus)")
    return p


def test_a_kernel_log_page_inside_a_freed_segment(tmp_path):
    # dmesg: "in process python pid 25698 ..." / "in page starting at address 0x00007f9587e00000"
    log = _corpus("dmesg/gfx1100_7900xtx_in_process_variant_dmesg_T_rocm_issue_3452.txt")
    page = 0x7F9587E00000
    _agent(tmp_path, 25698, [(ring.SEGMENT_ALLOC, page - (2 << 20), 4 << 20, 1, 1000),
                             (ring.SEGMENT_FREE, page - (2 << 20), 4 << 20, 2, 2000)], False,
           {1: "serve.py:10 make_pool", 2: "serve.py:20 shrink"})
    inc = triage([str(log), str(tmp_path / files.DIR)])
    o = next(o for o in inc.black_box.owners if o.address == page)
    assert o.pid == 25698 and o.verdict == "freed" and o.released is True
    assert o.offset == 2 << 20 and o.allocated_at == "serve.py:10 make_pool"
    assert "the evidence gives the page, not the byte" in o.text and "released at serve.py:20 shrink" in o.text
    assert o.freed_ms_before is None and "its time unknown" in o.text     # dmesg -T: no clock to join on


def test_a_runtime_on_address_page_just_past_a_live_block(tmp_path):
    # "Memory access fault by GPU node-3 (Agent handle: 0x13e852f0) on address 0x77d445e00000."
    log = _corpus("runtime/vmfault_unknown_gfx950_aiter_vllm_issue_43605.txt")
    addr = 0x77D445E00000
    _agent(tmp_path, 4242, [(ring.SEGMENT_ALLOC, addr - (20 << 20), 20 << 20, 1, 10),
                            (ring.ALLOC, addr - (2 << 20), 2 << 20, 1, 20),
                            (ring.ALLOC, addr - (4 << 20), 2 << 20, 3, 30)], True,
           {1: "kv.py:5 alloc_kv", 3: "kv.py:9 scratch"})
    inc = triage([str(log), str(tmp_path / files.DIR)])
    o = next(o for o in inc.black_box.owners if o.address == addr)
    assert o.verdict == "past-end" and o.level == "block" and o.offset == 0
    assert o.base == addr - (2 << 20) and o.allocated_at == "kv.py:5 alloc_kv"


def test_freed_block_kept_cached_and_live_block_inside():
    from faultkit.agent_model import AgentProcess, AllocEvent
    ev = [AllocEvent(1, "segment_alloc", 0, 0x1000_0000, 1 << 21, 0, 0, 1, 1),
          AllocEvent(2, "alloc", 10, 0x1000_0000, 4096, 0x77, 0, 2, 1),
          AllocEvent(3, "free_requested", 5_000_010, 0x1000_0000, 4096, 0x77, 0, 3, 1),
          AllocEvent(4, "alloc", 6_000_000, 0x1000_2000, 8192, 0x77, 0, 2, 1)]
    p = AgentProcess(7, events=ev, ring={"producer": "torch-tracker-blocks"})
    cached = locate(p, 0x1000_0010, 9_000_010, "test")
    assert cached.verdict == "freed" and cached.released is False and cached.freed_ms_before == 4.0
    assert "kept the memory cached" in cached.text
    inside = locate(p, 0x1000_2000 + 100, 9_000_010, "test")
    assert inside.verdict == "live" and inside.offset == 100 and inside.size == 8192
    before = locate(p, 0x1000_0010, 1_000_000, "test")           # the same address before its free
    assert before.verdict == "live" and before.base == 0x1000_0000


def test_an_address_without_a_process_is_looked_up_in_every_mapped_one():
    from faultkit.agent_model import AgentLog, AgentProcess, AllocEvent
    log = AgentLog({1: AgentProcess(1), 2: AgentProcess(2, events=[AllocEvent(1, "segment_alloc", 0, 0x5000, 4096,
                                                                              0, 0, 0, 2)])})
    bb = black_box(log, [FaultAddress(0x5008, None, "test")], None)
    (o,) = bb.owners
    assert o.pid == 2 and o.verdict == "live" and "no Python site" in o.text
    assert any("time is not known" in n for n in bb.notes)


# ---------------- the parsers ----------------

def test_stacks_asked_for_twice_are_two_dumps_and_a_fatal_one_is_marked():
    text = ('Thread 0x01 (most recent call first):\n  File "a.py", line 3 in loop\n\n'
            'Current thread 0x02 (most recent call first):\n  File "b.py", line 9 in serve\n\n'
            'Thread 0x01 (most recent call first):\n  File "a.py", line 4 in loop\n\n'
            'Fatal Python error: Aborted\n\nThread 0x01 (most recent call first):\n  File "a.py", line 5 in loop\n'
            '  File "<string>", line 1 in <module>\n\nExtension modules: x (total: 1)\n')
    dumps = parse_stacks(text, "s.txt")
    assert [d.fatal for d in dumps] == [None, None, "Fatal Python error: Aborted"]
    assert dumps[0].threads[1].current and dumps[0].threads[1].frames == ["b.py:9 serve"]
    assert dumps[2].threads[0].frames == ["a.py:5 loop", "<string>:1 <module>"]
    assert dumps[2].origin == "s.txt:10"


def test_a_torn_ring_record_and_a_cut_site_line_are_dropped(tmp_path):
    d = _agent(tmp_path, 11, [(ring.SEGMENT_ALLOC, 0x9000, 4096, 1, 5), (ring.SEGMENT_FREE, 0x9000, 4096, 1, 6)],
               False, {1: "x.py:1 f"})
    path = d / files.name(11, files.ALLOC_RING)
    data = bytearray(path.read_bytes())
    data[ring.HEADER_BYTES + ring.RECORD_BYTES + 20] ^= 0xFF          # the second record's time
    path.write_bytes(bytes(data))
    log = parse_agent([(str(p), p.read_bytes()) for p in d.iterdir()])
    p = log.processes[11]
    assert [e.kind for e in p.events] == ["segment_alloc"] and p.ring["torn"] == 1
    assert set(p.sites) == {1}                                         # "9\tcut" had no newline
    assert any("1 torn record" in x.message for x in log.problems)
    assert locate(p, 0x9010, None, "t").verdict == "live"             # the free was torn: not invented


def test_a_damaged_ring_header_is_a_problem_not_a_crash(tmp_path):
    log = parse_agent([("agent/5.alloc.ring", b"FKRING1\x00" + b"\x00" * 100), ("agent/5.json", b"{not json")])
    msgs = " ".join(p.message for p in log.problems)
    assert "checksum" in msgs and "agent header unreadable" in msgs
    assert log.processes[5].events == []


def test_the_memory_track_passes_the_timeline_check(live, tmp_path):
    from faultkit.export.pftrace_check import check_trace
    from faultkit.export.timeline import write_pftrace
    out = tmp_path / "t.pftrace"
    write_pftrace(build_timeline(live["uaf"], None), str(out))
    r = check_trace(out.read_bytes())
    assert r.ok, r.errors
    assert any("segment_free" in n for n in sum(r.names.values(), []))


def test_capture_records_the_agents_processes_and_no_agent_opts_out(tmp_path):
    import subprocess
    import sys
    cmd = [sys.executable, "-m", "faultkit.cli", "capture", "-q", "--no-coredump", "-o"]
    code = "import os; print('pid', os.getpid())"
    on = subprocess.run(cmd + [str(tmp_path / "on"), "--", sys.executable, "-c", code], capture_output=True,
                        text=True, timeout=120, cwd=ROOT)
    assert on.returncode == 0, on.stderr
    m = json.loads((tmp_path / "on" / "manifest.json").read_text())
    pid = int(re.search(r"pid (\d+)", (tmp_path / "on" / "server.log").read_text())[1])
    assert m["agent"]["enabled"] and m["agent"]["mode"] == "segments"
    assert [p["pid"] for p in m["agent"]["processes"]] == [pid]
    assert "faulthandler" in m["agent"]["processes"][0]["armed"]
    assert any(files.ENV_DIR in (r.get("env") or {}) for r in json.loads((tmp_path / "on" / "environ.json").read_text()))
    off = subprocess.run(cmd + [str(tmp_path / "off"), "--no-agent", "--", sys.executable, "-c", code],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert off.returncode == 0, off.stderr
    m = json.loads((tmp_path / "off" / "manifest.json").read_text())
    assert m["agent"] == {"enabled": False, "note": "--no-agent"} and not (tmp_path / "off" / files.DIR).exists()
    env = json.loads((tmp_path / "off" / "environ.json").read_text())
    assert not any(files.ENV_DIR in (r.get("env") or {}) for r in env)
