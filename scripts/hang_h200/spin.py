import torch, sys
x = torch.ones(1, device="cuda")
print("ready", flush=True)
for step in range(10**9):
    torch.cuda._sleep(int(2e9 * 120))
    torch.cuda.synchronize()                      # SPINSYNC
