"""3 gloo ranks; rank 1 skips the 4th all_reduce and spins its GPU (torch.cuda._sleep) then
synchronizes; ranks 0 and 2 wait in the all_reduce until gloo's timeout. Each rank writes its
flight record with every dump function torch offers."""
import datetime, os, sys, time
import torch, torch.distributed as dist
import torch.multiprocessing as mp

OUT = sys.argv[1]

def dump_fr(rank, tag):
    os.makedirs(f"{OUT}/fr", exist_ok=True)
    m = torch._C._distributed_c10d
    names = [n for n in dir(m) if "dump" in n.lower()]
    with open(f"{OUT}/fr/api_rank{rank}.txt", "a") as log:
        log.write(f"{tag}: dump functions {names}\n")
        for n in names:
            try:
                data = getattr(m, n)()
            except Exception as exc:
                log.write(f"{n}(): {type(exc).__name__}: {exc}\n")
                continue
            kind = type(data).__name__
            log.write(f"{n}(): {kind} {len(data) if hasattr(data, '__len__') else ''}\n")
            if isinstance(data, (bytes, str)) and len(data):
                b = data.encode() if isinstance(data, str) else data
                ext = "json" if b[:1] in (b"{", b"[") else "pkl"
                with open(f"{OUT}/fr/{n}.{tag}.{ext}_rank_{rank}", "wb") as fh:
                    fh.write(b)
                if ext == "pkl" and not os.path.exists(f"{OUT}/fr/nccl_trace_rank_{rank}"):
                    with open(f"{OUT}/fr/nccl_trace_rank_{rank}", "wb") as fh:
                        fh.write(b)

def rank_main(rank, world):
    os.environ["RANK"] = str(rank)
    dist.init_process_group("gloo", rank=rank, world_size=world, init_method="tcp://127.0.0.1:29533",
                            timeout=datetime.timedelta(seconds=int(os.environ.get("GLOO_TIMEOUT", "25"))))
    t = torch.ones(4)
    for _ in range(3):
        dist.all_reduce(t)
    open(f"{OUT}/ready.{rank}", "w").write(str(os.getpid()))
    if rank == 1:
        dump_fr(rank, "skipped")
        x = torch.ones(1, device="cuda")
        torch.cuda._sleep(int(2e9 * 90))        # the GPU spins for ~90 s
        torch.cuda.synchronize()                  # SYNC
        return
    try:
        dist.all_reduce(t)                        # ALLREDUCE4
    except Exception as exc:
        print(f"rank {rank}: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
    dump_fr(rank, "timeout")

if __name__ == "__main__":
    print("launcher", os.getpid(), flush=True)
    mp.spawn(rank_main, args=(3,), nprocs=3, join=True)
