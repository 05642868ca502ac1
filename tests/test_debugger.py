"""Debugger transcripts: every corpus transcript parses, with per-file expectations, and own fixtures."""

import json

import pytest

from faultkit.analyze.debug_stop import faulting_instruction, precise_state
from faultkit.bundle import collect
from faultkit.triage import build
from faultkit.export.report import render_markdown, to_json
from faultkit.ingest.debugger import parse_debugger, parse_frame

from .conftest import CORPUS, corpus_bytes, corpus_copy



# file -> (stop kind, signal, gpu?, thread id, frame function, source line no)
STOPS = {
    "hpctraining_saxpy_sigsegv.txt": ("signal", "SIGSEGV", True, "3", "saxpy", 57),
    "p1sin_crux_sigsegv_gfx1101_rocm612.txt": ("signal", "SIGSEGV", True, "6", "crux_p1sin", 7),
    "p1sin_fee_debugprints_sigsegv_gfx1101.txt": ("signal", "SIGSEGV", True, "6", "fee_kernel", 442),
    "p1sin_p1sin_sigbus_9999dirs.txt": ("signal", "SIGBUS", True, "6", "jones_p1sin_device", 328),
    "hpctraining_omp_offload_sigsegv.txt": ("signal", "SIGSEGV", True, "6", "__omp_offloading_..._main_l23", 25),
    "rocke_sigsegv_imprecise_gfx950_rocm72.txt": ("signal", None, True, None, "rocke_elementwise_add_f16_b256_v8", 415),
    "nan_check_sigfpe_imprecise_alu.txt": ("signal", "SIGFPE", True, "908", "loop_log_fusion", None),
    "rocgdb_pr68_cpu_thread_sigsegv.txt": ("signal", "SIGSEGV", False, "1", "main", 39),
    "gnu_gdb_catch_signal_sigsegv.txt": ("catchpoint", "SIGSEGV", False, "3", "worker_bad", 43),
    "gnu_gdb_clinfo_thread_received_sigsegv.txt": ("signal", "SIGSEGV", False, "1", "free", None),
    "gnu_gdb_rocminfo_program_received_sigsegv.txt": ("signal", "SIGSEGV", False, None, "??", None),
    "gnu_gdb_mi_stopped_sigsegv.txt": ("mi", "SIGSEGV", False, "1", "D main", 25),
    "rocke_breakpoint_pending_hit.txt": ("breakpoint", None, False, "68", "store_vec", 495),
    "windows_hipsdk_breakpoint_kernel_named_wave.txt": ("breakpoint", None, True, "7", "do_an_addition", 6),
    "doc_rocgdb_breakpoint_with_lanes.txt": ("breakpoint", None, True, "5", "func", 48),
    "doc_rocgdb_core_dump.txt": ("core", "SIGSEGV", True, "3", "faulty_kernel", 45),
    "doc_rocgdb_precise_memory_warning.txt": ("signal", "SIGSEGV", True, "6", "bit_extract_kernel", 38),
    "cuda_gdb_juwels_attach_stop.txt": ("cuda-exception", "CUDA_EXCEPTION_14", True, "1", "jacobi_kernel<32, 32>", 88),
    "cuda_gdb_coredump_warp_illegal_address.txt": ("cuda-exception", None, True, None, "illegalMemoryAccessKernel(int*, int)", None),
    "doc_cuda_gdb_exception_and_disas.txt": ("cuda-exception", "CUDA_EXCEPTION_14", True, "1", "exception_kernel", 50),
    "h200_torch_cudagdb.txt": ("cuda-exception", "CUDA_EXCEPTION_14", True, "1", "gather_kernel", 9),
    "h200_oob_cudagdb.txt": ("cuda-exception", "CUDA_EXCEPTION_7", True, "1", "scatter_oob_kernel", 7),
    "h200_attach_gdb_1105.txt": ("cuda-exception", "CUDA_EXCEPTION_14", True, "18", "gather_kernel", 9),
    "h200_coredump_load.txt": ("cuda-exception", None, True, None, "gather_kernel", 9),
}


def _corpus(name):
    for sub in ("gdb", "gdb/doc_examples", "cuda"):
        p = CORPUS / sub / name
        if p.exists():
            return p
    raise AssertionError(name)


@pytest.mark.parametrize("name", sorted(STOPS))
def test_corpus_stop(corpus, name):
    kind, sig, gpu, tid, func, line = STOPS[name]
    log = parse_debugger(corpus_bytes(_corpus(name)), name)
    stop = [s for s in log.stops if s.kind != "attach"][-1]
    assert (stop.kind, stop.signal, stop.gpu is not None, stop.thread) == (kind, sig, gpu, tid)
    assert stop.frame is not None and stop.frame.function == func
    assert stop.frame.line == line


def test_corpus_wave_and_lane_ids(corpus):
    st = parse_debugger(corpus_bytes(_corpus("p1sin_crux_sigsegv_gfx1101_rocm612.txt"))).stops[0]
    g = st.gpu
    assert (g.agent, g.queue, g.dispatch, g.wave, g.lane, g.workgroup, g.work_item) == (1, 2, 1, 1, 1, (31, 0, 0), (0, 0, 1))
    st = parse_debugger(corpus_bytes(_corpus("h200_attach_gdb_1105.txt"))).stops[-1]
    g = st.gpu
    assert (g.grid, g.block, g.thread, g.sm, g.warp, g.device) == (17, (341, 0, 0), (64, 0, 0), 39, 8, 0)
    assert st.error_pc == 0x7efd0b7a5b90 and st.frame.pc == 0x7efd0b7a5ca0   # the exception PC is not $pc
    assert st.exception == "Warp Illegal Address" and st.error_function == "gather_kernel"


def test_corpus_warnings_and_precise_memory(corpus):
    log = parse_debugger(corpus_bytes(_corpus("rocke_sigsegv_imprecise_gfx950_rocm72.txt")))
    assert log.stops[0].imprecise_warning and log.stops[0].lane_inactive
    assert precise_state(log, log.stops[0])[0] is False
    log = parse_debugger(corpus_bytes(_corpus("nan_check_sigfpe_imprecise_alu.txt")))
    st = log.stops[0]
    assert st.imprecise_warning and st.gpu.systag.startswith("AMDGPU Lane 1:64:1:1/0")   # warning between the lines
    log = parse_debugger(corpus_bytes(_corpus("hpctraining_omp_offload_sigsegv.txt")))
    assert log.precise_memory == "requested" and precise_state(log, log.stops[0])[0] is True
    log = parse_debugger(corpus_bytes(_corpus("bc250_gfx1013_unsupported_warnings.txt")))
    assert log.precise_memory == "could-not-enable"
    assert [e.fields.get("arch") for e in log.events if e.kind == "unsupported-agent"][0] == "gfx1013"
    log = parse_debugger(corpus_bytes(CORPUS / "gdb/doc_examples/doc_rocgdb_show_precise_memory.txt"))
    assert log.precise_memory == "could-not-enable"   # a later 'currently disabled' does not undo the failure


def test_corpus_tables(corpus):
    g = CORPUS / "gdb"
    d = CORPUS / "gdb/doc_examples"
    log = parse_debugger(corpus_bytes(g / "hpctraining_info_agents_mi250.txt"))
    a = log.agents[0]
    assert (a.gpuid, a.arch, a.name, a.location, a.current) == (64146, "gfx90a", "Aldebaran/MI200 [Instinct MI250X/MI250]",
                                                                "29:00.0", True)
    assert [a.location for a in parse_debugger(corpus_bytes(d / "doc_rocgdb_info_agents.txt")).agents] == \
        ["0000:0a:00.0", "0000:44:00.0"]
    q = parse_debugger(corpus_bytes(d / "doc_rocgdb_info_queues.txt")).queues
    assert [(x.queue, x.qid, x.type, x.read, x.size) for x in q] == [(1, 1, "HSA", 0, 65536), (2, 2, "DMA", None, 1048576),
                                                                    (3, 0, "HSA", 4, 262144)]
    full = parse_debugger(corpus_bytes(d / "doc_rocgdb_info_dispatches_full.txt")).dispatches[0]
    assert full.kernel == "bit_extract_kernel(unsigned int*, unsigned int const*, unsigned long)"
    assert (full.private, full.kernel_descriptor, full.fence) == (220, 0x7ffde5409800, "B|As")
    rows = parse_debugger(corpus_bytes(d / "doc_rocgdb_testsuite_info_dispatches_samples.txt")).dispatches
    assert [(r.queue, r.dispatch, r.kernel) for r in rows[:2]] == [(1, 1, "single_wave_kernel1()"), (3, 2, "single_wave_kernel2()")]
    threads = parse_debugger(corpus_bytes(g / "lumi_info_threads_rocm51.txt")).threads
    assert len(threads) == 6 and threads[2].current and threads[2].gpu.wave == 1
    assert threads[2].frame.endswith("at saxpy.hip:57") and "from /opt/rocm/lib/libhsa-runtime64.so.1" in threads[0].frame
    unknown = parse_debugger(corpus_bytes(d / "doc_rocgdb_info_threads_unknown_coords.txt")).threads[-1].gpu
    assert unknown.dispatch is None and unknown.workgroup == (None, None, None)
    lanes = parse_debugger(corpus_bytes(d / "doc_rocgdb_info_lanes.txt")).lanes
    assert [(x.state, x.gpu.lane, x.gpu.work_item) for x in lanes] == [("A", 2, (1, 2, 4)), ("I", 12, (1, 2, 3))]
    assert len(parse_debugger(corpus_bytes(d / "doc_rocgdb_mi_lane_info.txt")).lanes) == 3
    refs = parse_debugger(corpus_bytes(d / "doc_rocgdb_info_sharedlibrary.txt")).code_objects
    assert [(r.scheme, r.offset, r.size, r.low) for r in refs] == [("file", 6477, 10832, 0x7fd11d001000),
                                                                   ("memory", 0x7fd0083e7f60, 41416, 0x7fd11d008000)]
    k = parse_debugger(corpus_bytes(g / "cuda_gdb_info_cuda_kernels_old.txt")).cuda_kernels[0]
    assert (k.kernel_id, k.grid, k.grid_dim, k.name.split("(")[0]) == (5, 6, "(4801,1,1)", "render")
    ev = parse_debugger(corpus_bytes(CORPUS / "cuda/h200_mp_cudagdb.txt"))
    assert ev.debugger == "cuda-gdb" and any(e.kind == "debugger-internal-error" for e in ev.events)
    assert any(e.kind == "exec" and e.fields["program"] == "/usr/bin/python3.12" for e in ev.events)
    assert any(e.kind == "inferior-exit" for e in parse_debugger(corpus_bytes(g / "p1sin_inferior_exit.txt")).events)


def test_corpus_disassembly_marks(corpus):
    log = parse_debugger(corpus_bytes(_corpus("rocke_disassemble_around_pc.txt")))
    block = log.disassembly[0]
    assert [x.marker for x in block] == ["", "", "=>", ""]
    assert block[1].instruction.startswith("global_store_dwordx4")
    log = parse_debugger(corpus_bytes(_corpus("p1sin_crux_sigsegv_gfx1101_rocm612.txt")))
    cur = [x for x in log.disassembly[0] if x.marker == "=>"][0]
    assert (cur.pc, cur.symbol, cur.offset, cur.instruction) == (0x7fffed2b8b18, "_Z10crux_p1sinPd", 24, "s_mov_b32 exec_lo, s0")
    st = log.stops[0]
    hit, _ = faulting_instruction(st, log.disassembly, precise=True)
    assert hit.instruction.startswith("scratch_store_b32")      # the last memory access before the PC
    assert faulting_instruction(st, log.disassembly, precise=None)[0] is None


def test_corpus_sanitizer(corpus):
    log = parse_debugger(corpus_bytes(CORPUS / "cuda/h200_oob_sanitizer.txt"))
    r = log.sanitizer[0]
    assert (r.space, r.access, r.size, r.kernel, r.offset, r.file, r.line) == \
        ("global", "write", 4, "scatter_oob_kernel(float *, const int *, int)", 0xf0, "oob.cu", 6)
    assert (r.thread, r.block, r.address, r.distance, r.direction, r.allocation, r.allocation_size) == \
        ((0, 0, 0), (2048, 0, 0), 0x7f8e2aa00000, 4158651905, "after", 0x7f8d32c00000, 512)
    assert r.host_frames == ["main in oob.cu:16 [0x8eae] in oob"]
    assert [e.fields["code"] for e in log.events if e.kind == "sanitizer-api-error"] == [719]
    mp = parse_debugger(corpus_bytes(CORPUS / "cuda/h200_sanitizer_mp.txt")).sanitizer[0]
    assert mp.kernel == "gather_kernel" and "worker in mp_server.py:22" in mp.host_frames


@pytest.mark.parametrize("name, level, kernel", [
    ("h200_attach_gdb_1105.txt", "certain", "gather_kernel"),
    ("h200_torch_cudagdb.txt", "certain", "gather_kernel"),
    ("h200_oob_cudagdb.txt", "certain", "scatter_oob_kernel"),
    ("h200_oob_sanitizer.txt", "certain", "scatter_oob_kernel(float *, const int *, int)"),
    ("hpctraining_omp_offload_sigsegv.txt", "certain", "__omp_offloading_..._main_l23"),
    ("p1sin_crux_sigsegv_gfx1101_rocm612.txt", "likely", "crux_p1sin"),
    ("rocke_sigsegv_imprecise_gfx950_rocm72.txt", "likely", "rocke_elementwise_add_f16_b256_v8"),
    ("gnu_gdb_clinfo_thread_received_sigsegv.txt", "unknown", None),
    ("rocgdb_pr68_cpu_thread_sigsegv.txt", "unknown", None),
])
def test_corpus_triage_verdicts(corpus, tmp_path, name, level, kernel):
    doc = to_json(build(collect([str(corpus_copy(_corpus(name), tmp_path))])))
    assert (doc["verdict"]["level"], doc["verdict"]["kernel"]) == (level, kernel)
    if level == "unknown":
        assert "not a GPU fault" in doc["verdict"]["why"]


# ---------------- own fixtures, written after the real formats ----------------

PRECISE_SESSION = """\
(gdb) set amdgpu precise-memory on
(gdb) run
[New Thread 0x7ffff5dff640 (LWP 4101)]
(gdb) show amdgpu precise-memory
AMDGPU precise memory access reporting is on (currently enabled).

Thread 7 "python3" received signal SIGSEGV, Segmentation fault.
[Switching to thread 7, lane 0 (AMDGPU Lane 1:3:12:4/0 (20,0,0)[0,0,0])]
0x00007ffff5e01a24 in oob_store (p=0x7ffe00000000, n=1048576) at kernels.cl:9
9	    p[i + n] = i;
(gdb) info dispatches
  Id   Target Id                       Grid         Workgroup Fence   Kernel Function
  1    AMDGPU Dispatch 1:3:11 (PKID 4) [4096,1,1]   [256,1,1] B|Aa|Ra scale
* 2    AMDGPU Dispatch 1:3:12 (PKID 5) [262144,1,1] [256,1,1] B|Aa|Ra oob_store
(gdb) x/4i $pc-12
   0x7ffff5e01a18 <oob_store+24>:	v_add_co_u32 v0, vcc_lo, s0, v0
   0x7ffff5e01a1c <oob_store+28>:	global_store_b32 v[0:1], v2, off
=> 0x7ffff5e01a24 <oob_store+36>:	s_endpgm
(gdb) info sharedlibrary
From                To                  Syms Read   Shared Object Library
0x00007ffff7fc5000  0x00007ffff7febb35  Yes         /lib64/ld-linux-x86-64.so.2
0x00007ffff5e01900  0x00007ffff5e01c00  Yes         file://{host}#offset={offset}&size={size}
"""


def _fatbin_entry():
    from faultkit.ingest.code_object import code_objects_in
    from .conftest import ROOT
    host = ROOT / "tests/data/code_objects/host-with-fatbin"
    found, _ = code_objects_in(host.read_bytes(), str(host))
    name, co = next((n, c) for n, c in found if c.target == "gfx1100")
    offset, size = name.split("#offset=")[1].split(" ")[0].split("&size=")
    return host, int(offset), int(size), co


def test_precise_stop_is_certain_and_resolves_through_the_bundle(tmp_path):
    host, offset, size, co = _fatbin_entry()
    t = tmp_path / "gdb.txt"
    t.write_text(PRECISE_SESSION.format(host=host, offset=offset, size=size))
    inc = build(collect([str(t), str(host)]))
    v = inc.verdict
    assert (v.level, v.kernel) == ("certain", "oob_store")
    f = inc.stops[0]
    assert f.kernel_basis.startswith("'info dispatches' row of the wave's dispatch 12")
    assert f.faulting.instruction.startswith("global_store_b32")
    assert f.resolved.startswith("oob_store+0x") and "kernels.cl:" in f.resolved
    line_no = int(f.resolved.split("kernels.cl:")[1].split()[0])
    src = (host.parent / "kernels.cl").read_text().splitlines()
    assert "p[i + n]" in src[line_no - 1] or "workitem_id" in src[line_no - 1]
    md = render_markdown(inc)
    assert "<-- faulting instruction" in md and "global_store_b32" in md
    doc = json.loads(json.dumps(to_json(inc), default=str))
    assert doc["debugger_stops"][0]["precise"] is True and doc["debugger_stops"][0]["kernel"] == "oob_store"


def test_same_stop_without_precise_memory_is_likely(tmp_path):
    text = PRECISE_SESSION.replace("(gdb) set amdgpu precise-memory on\n", "").replace(
        "AMDGPU precise memory access reporting is on (currently enabled).",
        "AMDGPU precise memory access reporting is off").format(host="/x", offset=1, size=2)
    t = tmp_path / "gdb.txt"
    t.write_text(text)
    inc = build(collect([str(t)]))
    assert (inc.verdict.level, inc.verdict.kernel) == ("likely", "oob_store")
    assert "past the faulting instruction" in inc.verdict.why
    assert inc.stops[0].faulting is None


def test_host_segv_in_runtime_is_not_a_gpu_fault():
    text = ('Thread 12 "python3" received signal SIGSEGV, Segmentation fault.\n'
            "[Switching to thread 12 (Thread 0x7fff6effd640 (LWP 3811))]\n"
            "0x00007ffff7a3c1d0 in rocr::core::Runtime::AsyncEventsLoop(void*) () from /opt/rocm/lib/libhsa-runtime64.so.1\n")
    log = parse_debugger(text)
    st = log.stops[0]
    assert st.gpu is None and st.host_systag == "Thread 0x7fff6effd640 (LWP 3811)"
    assert st.frame.objfile == "/opt/rocm/lib/libhsa-runtime64.so.1"


def test_joined_and_indented_lines():
    text = ('   Thread 6 "x" received signal SIGBUS, Bus error.[Switching to thread 6, lane 3 '
            "(AMDGPU Lane 1:1:2:7/3 (5,0,0)[3,0,0])]\n"
            "   0x00007fffed26994c in k (a=<error reading variable: Cannot access memory at address private_lane#0x4470>,\n"
            "       b=0x1) at ./k.h:12\n"
            "   12\t  p[i] = 0;\n")
    st = parse_debugger(text).stops[0]
    assert st.signal == "SIGBUS" and st.gpu.lane == 3 and st.gpu.dispatch == 2
    assert (st.frame.function, st.frame.file, st.frame.line) == ("k", "./k.h", 12)
    assert st.source_line.endswith("p[i] = 0;")


def test_gdb_without_amd_support_records_unavailable_commands():
    text = ('(gdb) info dispatches\nUndefined info command: "dispatches".  Try "help info".\n'
            '(gdb) info agents\nUndefined info command: "agents".  Try "help info".\n')
    log = parse_debugger(text)
    assert [e.fields["command"] for e in log.events if e.kind == "unavailable"] == ["dispatches", "agents"]
    assert not log.problems


def test_frames():
    f = parse_frame("#0  0x000055555555513d in main (argc=1, argv=0x7fffffffe0c8) at crash.c:4")
    assert (f.level, f.pc, f.function, f.args, f.file, f.line) == (0, 0x55555555513D, "main", "argc=1, argv=0x7fffffffe0c8",
                                                                    "crash.c", 4)
    f = parse_frame("0x00007fff524237a0 in k () from memory://2842384#offset=0x15d61e0&size=5848")
    assert f.objfile.startswith("memory://2842384")
    f = parse_frame("jacobi_kernel<32, 32><<<(512,512,1),(32,32,1)>>> (/*...*/) at jacobi_kernels.cu:88")
    assert f.function == "jacobi_kernel<32, 32>" and f.launch == ("512,512,1", "32,32,1")
    assert parse_frame("rank 1 step 0 ok") is None


def test_cut_and_binary_transcripts_keep_what_they_have():
    text = (b'Thread 3 "a" received signal SIGSEGV, Segmentation fault.\n'
            b"[Switching to thread 3, lane 0 (AMDGPU Lane 1:2:1:1/0 (0,0,0)[0,0,0])]\n\xff\xfe\x00garbage\n0x00007f in k")
    log = parse_debugger(text, "cut.txt")
    assert log.stops[0].gpu is not None
    assert any("UTF-8" in p.message for p in log.problems)


def test_debugger_internal_error_is_said(corpus, tmp_path):
    doc = to_json(build(collect([str(corpus_copy(CORPUS / "cuda/h200_mp_cudagdb.txt", tmp_path))])))
    assert "debugger-internal-error" in [e["kind"] for e in doc["debugger"]["events"]]
    assert doc["next_steps"][0].startswith("The debugger itself failed")
