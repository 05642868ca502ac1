"""A GPU server stand-in that measures its own throughput (for scripts/bench_capture_overhead.py).

Two spawned workers, like tensor-parallel ranks: rank 0 launches a small Triton kernel in a loop
(launch-bound), rank 1 multiplies bf16 4096x4096 matrices (compute-bound). Each counts the work
it finished during the last --window seconds of a --seconds run and prints it, so a debugger
that attaches late is measured while attached.

    python scripts/throughput_workload.py --seconds 50 --window 20
"""

import argparse
import multiprocessing as mp
import sys
import time


def worker(rank: int, seconds: float, window: float) -> None:
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def add_one(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1, mask=m)

    torch.cuda.set_device(0)
    x = torch.zeros(4096, device="cuda")
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    start = time.monotonic()
    print(f"rank {rank} ready", flush=True)
    done, counting_from = 0, None
    while True:
        now = time.monotonic()
        if now - start > seconds:
            break
        if counting_from is None and now - start > seconds - window:
            torch.cuda.synchronize()
            counting_from, done = time.monotonic(), 0
        for _ in range(100):
            if rank == 0:
                add_one[(4,)](x, 4096, BLOCK=1024)
            else:
                torch.mm(a, b)
        torch.cuda.synchronize()
        done += 100
    elapsed = time.monotonic() - counting_from
    what = "small_kernels" if rank == 0 else "matmuls"
    print(f"THROUGHPUT rank {rank} {what}_per_s {done / elapsed:.1f}", flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=50.0)
    ap.add_argument("--window", type=float, default=20.0)
    args = ap.parse_args()
    ctx = mp.get_context("spawn")
    ps = [ctx.Process(target=worker, args=(r, args.seconds, args.window)) for r in range(2)]
    for p in ps:
        p.start()
    for p in ps:
        p.join()
    sys.exit(1 if any(p.exitcode for p in ps) else 0)
