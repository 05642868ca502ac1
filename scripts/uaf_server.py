"""A small server with a planted, intermittent use-after-free: the sample for `faultkit amplify`.

    python scripts/uaf_server.py --port 30123 [--device auto|cpu|cuda] [--reuse-rate 0.05] [--seed 1]
    python scripts/uaf_server.py --client --port 30123 [--requests 20]

The front is HTTP (POST /generate, GET /health); the work runs in one worker process started the
way serving frameworks start their ranks. Each request is a few decode steps. A step allocates a
block table (the indices of the KV pages it reads), launches a gather through it, and frees it when
the step returns. The planted bug is the overlap scheduler's classic one: the NEXT step's gather is
launched with the previous step's table address, after that table was freed.
- With the caching allocator (the default) the freed table stays mapped and keeps its old, valid
  indices: the stale gather silently reads plausible data. Only when another allocation of the same
  size takes the freed block and fills it before the stale gather (with probability --reuse-rate per
  trial; drawn from --seed and the trial index faultkit exports, so a trial always does the same)
  do the indices become garbage, and the gather reads far outside the pool: the crash is
  intermittent. The defaults (--reuse-rate 0.05, --seed 1) make the plain arm crash about 1 trial in
  20; of trial indices 0..39 only index 17 draws a reuse, so the ten-against-ten run of
  scripts/live_amplify_nvidia.sh (its plain trials are indices 0, 2, 5, 6, 8, 10, 12, 14, 16, 19 of
  faultkit's seeded plan) expects no plain crash, within the issue's "at most 1 of 10"
  (tests/test_uaf_sample_draw.py checks the draw).
- The amplified arms crash on EVERY trial by construction, whatever the draw: the stale gather runs
  at every step after the first, and each amplifier makes every stale read bad on its own (caching
  off unmaps the freed table at once, poison overwrites it with poison, release gives it back to the
  driver at the next step's start); the draw only decides whether the cache hands the freed block
  to another allocation, the one way the plain arm can crash.
- With the cache off (PYTORCH_NO_CUDA_MEMORY_CACHING=1) the free returns the block to the system at
  once and the stale read faults on every trial; with freed blocks poisoned (faultkit's agent) the
  indices read as poison and the gather faults; with freed blocks held back (the agent holding
  `decode_step`'s locals) the block is never reused and the crash goes away.

On CUDA (torch with a GPU, `--device cuda` or auto) this is the real thing: torch's caching
allocator, a Triton gather kernel, an illegal-address fault. Without a GPU, `--device cpu` (the
default where torch has no CUDA) runs the CPU STAND-IN, which CI tests: a pure-Python pool
allocator over mmap that caches freed blocks like torch's, and honours the same switch
(PYTORCH_NO_CUDA_MEMORY_CACHING, or PYTORCH_NO_HIP_MEMORY_CACHING, set: every free is an munmap),
with a ctypes read as the "kernel" (a SIGSEGV instead of an illegal address). Only the switch's
effect is imitated; the amplifier, its verification and the statistics are the real ones.

--clean-worker-env starts the worker with a cleaned environment (PATH and LANG only), as some
launchers do: the amplifier's variables then never reach the process that does the work.
--no-bug: the same program without the stale launch (to measure that an amplifier changes nothing
else: it prints a checksum of every result).
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import mmap
import os
import random
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STEPS_PER_REQUEST = 4
NO_CACHING = ("PYTORCH_NO_CUDA_MEMORY_CACHING", "PYTORCH_NO_HIP_MEMORY_CACHING")


# ---------------- the CPU stand-in allocator ----------------

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


def caching_disabled() -> bool:
    # torch reads these as "set to anything but empty" (c10's check of the variable): so does the stand-in
    return any(os.environ.get(k) for k in NO_CACHING)


class Block:
    """A device-memory stand-in: freed when its last reference goes, as a tensor's storage is."""

    def __init__(self, pool: "Pool", addr: int, size: int):
        self.pool, self.addr, self.size = pool, addr, size

    def data_ptr(self) -> int:            # what faultkit's hold-back recognises as owning memory
        return self.addr

    def __del__(self):
        self.pool.release(self.addr, self.size)


class Pool:
    """A caching pool: freed blocks are kept mapped and handed out again for the same size (best
    fit, most recently freed first, like torch's per-size free lists); without caching every free
    unmaps."""

    def __init__(self):
        self.cached: dict[int, list[int]] = {}
        self.caching = not caching_disabled()

    def alloc(self, size: int) -> Block:
        free = self.cached.get(size)
        if free:
            return Block(self, free.pop(), size)
        addr = _libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            raise MemoryError("mmap failed")
        return Block(self, addr, size)

    def release(self, addr: int, size: int) -> None:
        if self.caching:
            self.cached.setdefault(size, []).append(addr)
        else:
            _libc.munmap(addr, size)


class CpuDevice:
    name = "cpu stand-in (mmap pool)"
    PAGES, PAGE_WORDS, TABLE = 256, 64, 4096

    def __init__(self):
        self.pool = Pool()
        self.kv = self.pool.alloc(self.PAGES * self.PAGE_WORDS * 8)
        ctypes.memset(self.kv.addr, 1, self.kv.size)

    def table(self, rng: random.Random) -> Block:
        t = self.pool.alloc(self.TABLE * 8)
        arr = (ctypes.c_int64 * self.TABLE).from_address(t.addr)
        for i in range(self.TABLE):
            arr[i] = rng.randrange(self.PAGES)
        return t

    def scratch(self) -> Block:
        """An activation of the table's size filled with float data: garbage as indices."""
        s = self.pool.alloc(self.TABLE * 8)
        arr = (ctypes.c_double * self.TABLE).from_address(s.addr)
        for i in range(self.TABLE):
            arr[i] = 1.5 + i
        return s

    def gather(self, table_addr: int) -> int:
        """The "kernel": read the table, then the KV page each index names; returns a checksum."""
        idx = (ctypes.c_int64 * self.TABLE).from_address(table_addr)
        acc = 0
        for i in range(0, self.TABLE, 64):
            page = idx[i]
            # a 64-bit address, as the hardware would form it (Python ints do not wrap)
            addr = (self.kv.addr + page * self.PAGE_WORDS * 8) & 0xFFFF_FFFF_FFFF_FFFF
            acc += ctypes.c_int64.from_address(addr).value & 0xFFFF
        return acc


class CudaDevice:
    """The real thing: torch's caching allocator, a Triton gather through the table's address."""
    TABLE = 8 << 20            # 8 Mi int64 indices: a 64 MiB block (a large block: freed uncached, it unmaps)
    PAGES, PAGE_WORDS, READ = 1024, 256, 1 << 20

    def __init__(self):
        import torch
        import triton
        import triton.language as tl
        self.torch = torch
        self.name = f"cuda ({torch.cuda.get_device_name(0)}, torch {torch.__version__})"

        @triton.jit
        def gather_kernel(out_ptr, anchor_ptr, table_off, kv_ptr, n, PAGE: tl.constexpr, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            m = offs < n
            page = tl.load(anchor_ptr + table_off + offs, mask=m, other=0)       # the table, by address
            tl.store(out_ptr + offs, tl.load(kv_ptr + page * PAGE + offs % PAGE, mask=m), mask=m)

        self.kernel = gather_kernel
        torch.cuda.set_device(0)
        self.kv = torch.ones(self.PAGES * self.PAGE_WORDS, device="cuda")
        self.anchor = torch.zeros(8, dtype=torch.int64, device="cuda")   # live: the stale address is an offset from it
        self.out = torch.empty(self.READ, device="cuda")

    def table(self, rng: random.Random):
        g = self.torch.Generator(device="cuda")
        g.manual_seed(rng.randrange(1 << 30))
        return self.torch.randint(0, self.PAGES, (self.TABLE,), dtype=self.torch.int64, device="cuda", generator=g)

    def scratch(self):
        return self.torch.randn(self.TABLE * 2, device="cuda")       # float32 of the table's bytes: garbage indices

    def gather(self, table_addr: int) -> int:
        off = (table_addr - self.anchor.data_ptr()) // 8
        self.kernel[(self.READ // 1024,)](self.out, self.anchor, off, self.kv, self.READ, PAGE=self.PAGE_WORDS,
                                          BLOCK=1024)
        return int(self.out.sum().item())


def make_device(choice: str):
    if choice in ("auto", "cuda"):
        try:
            import torch
            if torch.cuda.is_available():
                return CudaDevice()
        except ImportError:
            pass
        if choice == "cuda":
            sys.exit("--device cuda: torch with a GPU is not available here")
    return CpuDevice()


# ---------------- the worker (a rank) ----------------

def decode_step(dev, rng, prev_addr, bug: bool) -> tuple[int, int]:
    """One step: first -- the bug -- the previous step's gather, launched late with that step's
    table address after the table was freed (the overlap scheduler's stale hand-off); then this
    step's own table (freed when this returns) and its gather."""
    result = dev.gather(prev_addr) if bug and prev_addr is not None else 0
    table = dev.table(rng)
    result += dev.gather(table.data_ptr())
    return result, table.data_ptr()


REUSE_RATE = 0.05         # the defaults: see the docstring (the plain arm's expected crash rate)
SEED = 1


def reuses(seed: int, index: int, rate: float) -> bool:
    """Whether trial `index` plants the reuse: a draw from the seed and the trial index alone, so a
    trial always does the same."""
    return random.Random(seed * 100003 + index).random() < rate


def worker(args) -> None:
    index = int(os.environ.get("FAULTKIT_TRIAL_INDEX", "0"))
    reuse_this_trial = reuses(args.seed, index, args.reuse_rate)
    dev = make_device(args.device)
    print(f"worker pid {os.getpid()} on {dev.name}; caching {'off' if caching_disabled() else 'on'}", file=sys.stderr, flush=True)
    rng = random.Random(index)
    prev = None
    step = 0
    digest = hashlib.sha256()
    for line in sys.stdin:
        req = json.loads(line)
        for _ in range(req.get("steps", STEPS_PER_REQUEST)):
            step += 1
            # another request's activation of the table's size, made between two steps: with the
            # cache it takes the freed table's block and fills it
            other = dev.scratch() if reuse_this_trial and step == 6 else None
            result, prev = decode_step(dev, rng, prev, not args.no_bug)
            del other
            digest.update(str(result).encode())
        sys.stdout.write(json.dumps({"id": req["id"], "checksum": digest.hexdigest()[:16]}) + "\n")
        sys.stdout.flush()


# ---------------- the front ----------------

class Front:
    def __init__(self, args):
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--device", args.device,
               "--reuse-rate", str(args.reuse_rate), "--seed", str(args.seed)] + (["--no-bug"] if args.no_bug else [])
        env = None
        if args.clean_worker_env:
            env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "FAULTKIT_TRIAL_INDEX")}
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
        self.lock = threading.Lock()
        self.next_id = 0
        threading.Thread(target=self.watch, daemon=True).start()

    def watch(self) -> None:
        code = self.proc.wait()
        if code:
            self.die(code)

    def die(self, code: int) -> None:
        # a serving framework that loses a rank exits: never answers again with a dead worker
        how = f"signal {-code}" if code < 0 else f"status {code}"
        print(f"server: worker died ({how}); shutting down", flush=True)
        os._exit(1)

    def generate(self, body: dict) -> dict:
        with self.lock:
            self.next_id += 1
            self.proc.stdin.write(json.dumps({"id": self.next_id, "steps": body.get("steps", STEPS_PER_REQUEST)}) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
            if not line:                   # the worker is gone: its status decides how the server ends
                self.die(self.proc.wait())
            return json.loads(line)


def serve(args) -> None:
    front = Front(args)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def _send(self, code: int, doc: dict) -> None:
            data = json.dumps(doc).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self._send(200, {"ok": True})

        def do_POST(self):
            n = int(self.headers.get("Content-Length") or 0)
            try:
                self._send(200, front.generate(json.loads(self.rfile.read(n) or b"{}")))
            except (ValueError, OSError) as exc:
                self._send(500, {"error": str(exc)})

    httpd = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(f"server ready on port {args.port} (worker pid {front.proc.pid})", flush=True)
    deadline = time.monotonic() + args.serve_for
    httpd.timeout = 0.2
    while time.monotonic() < deadline:
        httpd.handle_request()
    print("server done", flush=True)
    front.proc.stdin.close()
    front.proc.wait(timeout=30)


def client(args) -> int:
    url = f"http://127.0.0.1:{args.port}/generate"
    for i in range(args.requests):
        try:
            req = urllib.request.Request(url, data=json.dumps({"steps": STEPS_PER_REQUEST}).encode(), method="POST")
            with urllib.request.urlopen(req, timeout=60) as r:
                doc = json.loads(r.read())
        except OSError as exc:
            print(f"client: request {i + 1} failed: {exc}", flush=True)
            return 1
        print(f"client: request {i + 1} checksum {doc.get('checksum')}", flush=True)
    print(f"client: {args.requests} requests served", flush=True)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=30123)
    ap.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    ap.add_argument("--reuse-rate", type=float, default=REUSE_RATE, help="chance per trial that the freed table is reused")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--serve-for", type=float, default=600.0, help="seconds to serve before exiting by itself")
    ap.add_argument("--clean-worker-env", action="store_true")
    ap.add_argument("--no-bug", action="store_true")
    ap.add_argument("--client", action="store_true", help="send --requests requests and exit")
    ap.add_argument("--requests", type=int, default=20)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.client:
        return client(args)
    if args.worker:
        worker(args)
        return 0
    serve(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
