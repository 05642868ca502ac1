"""A toy tensor-parallel 'server' that faults on the GPU, for live captures on an NVIDIA machine.

The launcher spawns two workers (multiprocessing spawn, like SGLang/vLLM ranks). Each runs a
Triton gather kernel in a loop on its own stream; after --fault-after seconds rank 1 plants an
out-of-range index, so its next launch reads far outside the source buffer (CUDA error 700,
an Xid 31 in the kernel log). The delay leaves a debugger time to attach to the workers.

    python scripts/gpu_fault_server.py [--fault-after 40] [--hang]

With --hang, rank 1 launches a kernel that spins forever instead (a hung server: nothing faults,
the process just stops making progress).
"""

import argparse
import multiprocessing as mp
import os
import sys
import time


def worker(rank: int, fault_after: float, hang: bool = False) -> None:
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def spin_kernel(flag_ptr, out_ptr):
        # Waits for a flag nobody sets: the warp spins until the process is stopped.
        i = 0
        while tl.load(flag_ptr, volatile=True) == 0:
            i += 1
        tl.store(out_ptr, i)

    @triton.jit
    def gather_kernel(out_ptr, src_ptr, idx_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        idx = tl.load(idx_ptr + offs, mask=m)
        tl.store(out_ptr + offs, tl.load(src_ptr + idx, mask=m), mask=m)

    torch.cuda.set_device(0)
    n = 1 << 20
    src = torch.randn(n, device="cuda")
    out = torch.empty_like(src)
    idx = torch.arange(n, device="cuda", dtype=torch.int64)
    start = time.monotonic()
    step = 0
    print(f"rank {rank} pid {os.getpid()} ready", flush=True)
    while True:
        if rank == 1 and time.monotonic() - start > fault_after:
            if hang:
                print(f"rank {rank} step {step}: launching a kernel that never ends", flush=True)
                flag = torch.zeros(1, device="cuda", dtype=torch.int32)
                spin_kernel[(1,)](flag, out)
                torch.cuda.synchronize()
            idx[n // 3] = 1 << 40
            print(f"rank {rank} step {step}: planting a bad index", flush=True)
        gather_kernel[(n // 1024,)](out, src, idx, n, BLOCK=1024)
        torch.cuda.synchronize()
        step += 1
        if step % 50 == 0:
            print(f"rank {rank} step {step} ok", flush=True)
        time.sleep(0.05)
        if time.monotonic() - start > fault_after + 120:
            return


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--fault-after", type=float, default=40.0)
    ap.add_argument("--inline", action="store_true", help="one process: run the faulting rank in the launcher")
    ap.add_argument("--hang", action="store_true", help="rank 1 spins in a kernel instead of faulting")
    args = ap.parse_args()
    if args.inline:
        worker(1, args.fault_after, args.hang)
        sys.exit(0)
    ctx = mp.get_context("spawn")
    ps = [ctx.Process(target=worker, args=(r, args.fault_after, args.hang)) for r in range(2)]
    for p in ps:
        p.start()
    while all(p.exitcode is None for p in ps):
        time.sleep(0.1)
    for p in ps:
        if p.exitcode is None:
            p.terminate()
        p.join()
    print("exitcodes", [p.exitcode for p in ps], flush=True)
    sys.exit(1 if any(p.exitcode for p in ps) else 0)
