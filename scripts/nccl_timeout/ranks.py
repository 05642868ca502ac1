"""Two NCCL ranks (one GPU each): both run a few all_reduces, then rank 1 skips the next one and
sleeps; rank 0's watchdog times out in it (15 s). Each rank's stderr (where c10's C++ log goes)
is its own file, so a rank's log is what one user would paste. Usage: ranks.py OUTDIR"""
import datetime, os, sys, time
import torch, torch.distributed as dist
import torch.multiprocessing as mp

OUT = sys.argv[1]


def rank_main(rank: int) -> None:
    fd = os.open(f"{OUT}/rank{rank}.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 2)
    os.dup2(fd, 1)
    os.environ.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT="29533")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=15), device_id=torch.device("cuda", rank))
    x = torch.ones(1 << 20, device="cuda")
    for _ in range(3):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    print(f"rank {rank} pid {os.getpid()}: 3 all_reduce done", flush=True)
    if rank == 1:
        time.sleep(90)            # never joins the fourth
    else:
        dist.all_reduce(x)        # the fourth: rank 0 waits in it
        torch.cuda.synchronize()
        time.sleep(60)


if __name__ == "__main__":
    mp.spawn(rank_main, nprocs=2, join=True)
