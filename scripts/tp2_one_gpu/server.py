"""Two tensor-parallel ranks on ONE GPU (what the one-GPU H200 allows of issue 38): a gloo process
group over CUDA tensors, an all-reduce every step, like a TP2 server's decode loop.

    python scripts/tp2_one_gpu/server.py [--fault-after S | --hang-after S]

--fault-after: rank 1 then gathers through a stale index far past its buffer (CUDA error 700, a
GPU core dump where capture armed it); rank 0 waits in its all-reduce until gloo's timeout.
--hang-after: rank 1 then launches a kernel that spins on a flag nobody sets and synchronizes;
rank 0 waits in its all-reduce. Both ranks print each step, so silence means no progress.
"""

import argparse
import datetime
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def rank_main(rank: int, world: int, fault_after: float | None, hang_after: float | None, port: int) -> None:
    import triton
    import triton.language as tl

    @triton.jit
    def spin_kernel(flag_ptr, out_ptr):
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
    dist.init_process_group("gloo", rank=rank, world_size=world, init_method=f"tcp://127.0.0.1:{port}",
                            timeout=datetime.timedelta(seconds=int(os.environ.get("TP_TIMEOUT", "30"))))
    n = 1 << 20
    src = torch.randn(n, device="cuda")
    out = torch.empty_like(src)
    idx = torch.arange(n, device="cuda", dtype=torch.int64)
    acc = torch.ones(1024, device="cuda")
    start = time.monotonic()
    print(f"rank {rank} pid {os.getpid()} ready", flush=True)
    step = 0
    while True:
        late = time.monotonic() - start
        if rank == 1 and fault_after is not None and late > fault_after:
            idx[::4096] = 1 << 40                      # a stale index: far past the end of src
        if rank == 1 and hang_after is not None and late > hang_after:
            flag = torch.zeros(1, dtype=torch.int32, device="cuda")
            res = torch.zeros(1, dtype=torch.int32, device="cuda")
            print(f"rank 1: launching spin_kernel at step {step}", flush=True)
            spin_kernel[(1,)](flag, res)
            torch.cuda.synchronize()                   # waits for the spinning kernel forever
        gather_kernel[(triton.cdiv(n, 1024),)](out, src, idx, n, BLOCK=1024)
        dist.all_reduce(acc)                           # the step's all-reduce across both ranks
        torch.cuda.synchronize()
        if step % 20 == 0:
            print(f"rank {rank} step {step} sum {float(acc[0]):.0f}", flush=True)
        acc.fill_(1.0)
        step += 1
        time.sleep(0.05)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--fault-after", type=float)
    ap.add_argument("--hang-after", type=float)
    ap.add_argument("--port", type=int, default=29561)
    a = ap.parse_args()
    print("launcher", os.getpid(), flush=True)
    mp.spawn(rank_main, args=(2, a.fault_after, a.hang_after, a.port), nprocs=2, join=True)
