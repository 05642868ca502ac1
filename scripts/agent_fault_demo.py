"""Three GPU memory faults for the in-process agent, on an NVIDIA machine (faultkit capture arms the
CUDA core dump, whose registers give the faulting address; the agent's ring says whose it was).

    python3 scripts/agent_fault_demo.py --case uaf|oob|wild

The launcher spawns one worker (multiprocessing spawn, like a server's rank). The worker runs a
scheduler thread (a loop, as a server's would) and a Triton gather kernel; then:
- uaf: a 1 GiB "KV pool" is made in make_kv_pool(), freed and released to the driver
  (empty_cache), and 200 ms later a stale block-table entry makes the kernel read inside it;
- oob: a 64 MiB block table from alloc_block_table() stays live and the kernel reads 12,352 bytes
  past its end;
- wild: the kernel reads at 0xdead0000000, which nothing allocated.
A whole block of indices is bad, so the core's focused lane is a faulting one.
"""

import argparse
import multiprocessing as mp
import os
import sys
import threading
import time

WILD = 0xDEAD0000000
PAST = 12352


def scheduler_loop(stop):
    n = 0
    while not stop.is_set():
        n += 1
        time.sleep(0.005)


def make_kv_pool(torch):
    return torch.empty(1 << 30, dtype=torch.uint8, device="cuda")     # (a 256 MiB one freed did not fault)


def alloc_block_table(torch):
    return torch.zeros(16 << 20, dtype=torch.int32, device="cuda")     # 64 MiB


def decode_step(gather, out, src, idx, n):
    gather[(n // 1024,)](out, src, idx, n, BLOCK=1024)
    import torch
    torch.cuda.synchronize()


def worker(case: str) -> None:
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def gather_kernel(out_ptr, src_ptr, idx_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        idx = tl.load(idx_ptr + offs, mask=m)
        tl.store(out_ptr + offs, tl.load(src_ptr + idx, mask=m), mask=m)

    torch.cuda.set_device(0)
    stop = threading.Event()
    threading.Thread(target=scheduler_loop, args=(stop,), name="scheduler", daemon=True).start()
    n = 1 << 20
    src = torch.randn(n, device="cuda")
    out = torch.empty_like(src)
    idx = torch.arange(n, device="cuda", dtype=torch.int64)
    for _ in range(20):
        decode_step(gather_kernel, out, src, idx, n)
    if case == "uaf":
        pool = make_kv_pool(torch)
        target = pool.data_ptr() + 37 * 4096 + 128
        del pool
        torch.cuda.empty_cache()          # the pool's segment goes back to the driver
        time.sleep(0.2)
    elif case == "oob":
        table = alloc_block_table(torch)
        target = table.data_ptr() + table.numel() * table.element_size() + PAST
        for _ in range(5):                # the table is in use for a while, as a server's would be
            decode_step(gather_kernel, out, src, idx, n)
        time.sleep(0.1)
    else:
        target = WILD
    k0 = 1024 * 300
    idx[k0:k0 + 1024] = (target - src.data_ptr()) // 4 + torch.arange(1024, device="cuda")
    print(f"pid {os.getpid()} case {case}: the kernel reads at 0x{target:x}", flush=True)
    decode_step(gather_kernel, out, src, idx, n)
    print("no fault?", flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", choices=["uaf", "oob", "wild"], required=True)
    args = ap.parse_args()
    p = mp.get_context("spawn").Process(target=worker, args=(args.case,))
    p.start()
    p.join()
    print("worker exit", p.exitcode, flush=True)
    sys.exit(1 if p.exitcode else 0)
