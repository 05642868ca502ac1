"""One NCCL rank on one GPU whose all_reduce cannot complete: it is queued behind a kernel that
spins for minutes (torch.cuda._sleep), so its watchdog times out (15 s) the way a rank waiting for
a peer does, and prints its lines (timeout, work status, dump signal, the collective's stack).
Its stderr (where c10's C++ log goes) is OUTDIR/rank0.log. Usage: one_gpu.py OUTDIR"""
import datetime, os, sys, time
import torch, torch.distributed as dist

OUT = sys.argv[1]
fd = os.open(f"{OUT}/rank0.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.dup2(fd, 2)
os.dup2(fd, 1)
os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT="29534")
torch.cuda.set_device(0)
dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=15), device_id=torch.device("cuda", 0))
x = torch.ones(1 << 20, device="cuda")
for _ in range(3):
    dist.all_reduce(x)
torch.cuda.synchronize()
print(f"rank 0 pid {os.getpid()}: 3 all_reduce done; the 4th queued behind a spinning kernel", flush=True)
torch.cuda._sleep(int(2e12))      # ~ minutes of GPU cycles on the current stream
dist.all_reduce(x)                # the NCCL stream waits for it: the work cannot end in 15 s
time.sleep(90)
