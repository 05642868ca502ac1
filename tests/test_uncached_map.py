"""With caching off the black box still has a map: the H200's caching-off rings were empty (torch's
uncached path calls cudaMalloc/cudaFree itself, past the caching allocator's trace), so no caching-off
crash could name a block. The agent now records each uncached allocation from torch's GPU trace (the
pointer), the driver's cuMemGetAddressRange (its size) and the allocating thread's frames (its site), as
segments in the tracker's ring. Here: the real tracker (built against tests/data/fake_c10), this machine's
CPU torch's real GPU-trace registries fired as torch's uncached allocator fires them, a stub
cuMemGetAddressRange_v2 answering for real mmap'd memory, and the triage's own owner analysis."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from faultkit.agent import ring
from faultkit.analyze import allocation_owner as AO
from faultkit.ingest.agent_files import parse_agent

from .test_poison_block import AGENT, FAKE_C10, build

pytest.importorskip("torch")

DRIVER = """
#include <cstddef>
#include <cstdint>
extern "C" {
uint64_t bases[16], sizes[16];
int n = 0;
void fake_driver_alloc(uint64_t base, uint64_t size) { bases[n] = base; sizes[n] = size; n++; }
int cuMemGetAddressRange_v2(uint64_t* base, size_t* size, uint64_t ptr) {
  for (int i = 0; i < n; i++)
    if (bases[i] <= ptr && ptr < bases[i] + sizes[i]) { *base = bases[i]; *size = sizes[i]; return 0; }
  return 1;   // CUDA_ERROR_INVALID_VALUE
}
}
"""


# torch's C++ uncached_allocate / uncached_delete (c10/cuda/CUDACachingAllocator.cpp): cudaMalloc then the GPU
# trace's allocation callbacks with the pointer; the deallocation callbacks, then cudaFree. No Python frame of
# its own in torch: kept in a folder given to the agent as torch's, so it is skipped like torch's own frames.
UNCACHED = """
import ctypes
import torch.cuda._gpu_trace as trace
libc = ctypes.CDLL(None)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
DRV = []
def uncached_ready(drv):
    DRV.append(drv)
def cuda_malloc(size):
    addr = libc.mmap(None, size, 3, 0x22, -1, 0)
    DRV[0].fake_driver_alloc(addr, size)
    for cb in trace.MemoryAllocationCallbacks.callback_list:
        cb(addr)
    return addr
def cuda_free(addr, size):
    for cb in trace.MemoryDeallocationCallbacks.callback_list:
        cb(addr)
    libc.munmap(addr, size)
"""


def test_a_read_of_a_freed_uncached_table_names_it(tmp_path):
    tracker = build(tmp_path, "tracker", [AGENT / "tracker.cpp"], [FAKE_C10])
    (tmp_path / "driver.cpp").write_text(DRIVER)
    driver = build(tmp_path, "driver", [tmp_path / "driver.cpp"])
    agent = tmp_path / "agent"
    agent.mkdir()
    (tmp_path / "torchlike").mkdir()
    (tmp_path / "torchlike" / "uncached.py").write_text(UNCACHED)
    code = textwrap.dedent(f"""
        import ctypes, importlib.util, json, mmap, os, time
        os.environ["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"
        spec = importlib.util.spec_from_file_location("rt", {str(AGENT / "runtime.py")!r})
        rt = importlib.util.module_from_spec(spec); spec.loader.exec_module(rt)
        ring = rt._load("ring")
        drv = ctypes.CDLL({driver!r}, mode=ctypes.RTLD_GLOBAL)
        drv.fake_driver_alloc.argtypes = [ctypes.c_uint64, ctypes.c_uint64]
        # the agent's own attach at CUDA start (runtime._attach), the tracker already built; frames inside
        # "torch" (here: the stand-in for its C++ uncached allocator) are not the site
        class Job:
            library, seconds, torch_dir = {tracker!r}, 0.0, {str(tmp_path / "torchlike")!r}
        rt._state.update(files=rt._load("files"), dir={str(agent)!r}, mode="segments", build=Job,
                         header={{"failures": [], "armed": []}})
        import torch
        rt._attach()
        import sys
        sys.path.insert(0, {str(tmp_path / "torchlike")!r})
        from uncached import cuda_malloc, cuda_free, uncached_ready
        uncached_ready(drv)
        def kv_pool():
            return cuda_malloc(2 << 20)
        def table():
            return cuda_malloc(64 << 20)
        kv = kv_pool()
        t = table()
        cuda_free(t, 64 << 20)
        time.sleep(0.02)
        print(json.dumps({{"kv": kv, "table": t, "header": rt._state["header"], "pid": os.getpid()}}))
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.splitlines()[-1])
    assert "allocator-uncached" in out["header"]["armed"] and not out["header"]["failures"]
    (agent / "700.json").write_text(json.dumps(dict(out["header"], pid=700)))
    for suffix in (".sites.tsv", ".alloc.ring"):       # the files of one process, as pid 700
        (agent / f"{out['pid']}{suffix}").rename(agent / f"700{suffix}")
    log = parse_agent([(f.name, f.read_bytes()) for f in sorted(agent.iterdir())])
    p = log.processes[700]
    assert [(e.kind, e.address, e.size) for e in p.events] == [
        ("segment_alloc", out["kv"], 2 << 20), ("segment_alloc", out["table"], 64 << 20),
        ("segment_free", out["table"], 64 << 20)]
    freed = p.events[-1].t_ns
    # the stale gather's read of the table, 0x1208 bytes in, 5 ms after the free
    o = AO.black_box(log, [AO.FaultAddress(out["table"] + 0x1208, 700, "x")], freed + 5_000_000).owners[0]
    assert o.verdict == "freed" and o.base == out["table"] and o.size == 64 << 20 and o.released is True
    assert o.allocated_at.startswith("<string>:") and o.allocated_at.endswith(" table")
    assert o.freed_ms_before == 5.0
    assert o.text.startswith(f"0x{out['table'] + 0x1208:x} is 4,616 bytes into the 67,108,864-byte segment at "
                             f"0x{out['table']:x} allocated at <string>:")
    assert "freed and released to the driver 5.0 ms before the fault (released at <string>:" in o.text
    assert o.freed_at.startswith("<string>:") and o.freed_at.endswith(" <module>")     # who freed it
