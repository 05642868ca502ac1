"""A stand-in server for trials: crashes (a real SIGSEGV through ctypes) with a known probability.

The draw is seeded by --seed and the trial index faultkit exports (FAULTKIT_TRIAL_INDEX), so a
given trial always does the same thing; --rate sets the crash probability.

    python scripts/crashy_server.py --rate 0.4 --seed 7 [--port 30123] [--after 0.3] [--run-for 2]
"""

import argparse
import ctypes
import os
import random
import socket
import sys
import time

p = argparse.ArgumentParser()
p.add_argument("--rate", type=float, required=True)
p.add_argument("--seed", type=int, default=0)
p.add_argument("--port", type=int)
p.add_argument("--after", type=float, default=0.3, help="seconds before the crash")
p.add_argument("--run-for", type=float, default=2.0, help="seconds to serve when not crashing")
args = p.parse_args()

index = int(os.environ.get("FAULTKIT_TRIAL_INDEX", "0"))
crash = random.Random(args.seed * 100003 + index).random() < args.rate
sock = None
if args.port:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    sock.listen()
print(f"server ready (trial {index}, will {'crash' if crash else 'serve'})", flush=True)
if crash:
    time.sleep(args.after)
    print("worker: about to touch a bad pointer", flush=True)
    ctypes.string_at(0)  # SIGSEGV
time.sleep(args.run_for)
print("server done", flush=True)
sys.exit(0)
