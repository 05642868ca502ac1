"""Benchmark: `faultkit triage` of a big server log beside `grep -E` of the same patterns.

Writes server logs of the given sizes (default 200 MB and 1 GB): an SGLang/vLLM serving log
(decode and prefill batches, request lines, metrics; words such as `cuda graph` and `#queue-req`
that a loose filter would stop on), a warning with a traceback in the middle, and at the end a
GPU memory access fault, a queue callback abort and `Aborted (core dumped)`. Then, each in a fresh
process (wall time and peak RSS from wait4), taking turns, `--repeat` times:

  1. grep -E -n with every anchor of faultkit's parsers (ingest.prefilter), the file in page cache
  2. faultkit triage --format json of the file

and prints the medians. Goal (issue 28): triage within 10x grep's time and at most 200 MB peak RSS.

    python scripts/bench_triage_biglog.py [--sizes 200,1000] [--repeat 3] [--dir /tmp/fk-biglog] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

LINES = [
    "[2026-11-20 10:17:42 TP0] Decode batch. #running-req: 12, #token: 40960, token usage: 0.21, cuda graph: True, "
    "gen throughput (token/s): 1234.56, #queue-req: 0",
    "[2026-11-20 10:17:42 TP1] Prefill batch. #new-seq: 1, #new-token: 512, #cached-token: 0, token usage: 0.20, "
    "#running-req: 11, #queue-req: 0",
    'INFO:     127.0.0.1:53412 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    "INFO 11-20 10:17:42 [metrics.py:455] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 812.3 "
    "tokens/s, Running: 12 reqs, GPU KV cache usage: 21.3%, kernel launch overhead 0x0",
]
MIDDLE = ("[2026-11-20 10:17:43 TP0] Warning: request failed\nTraceback (most recent call last):\n"
          '  File "/srv/app/serve.py", line 88, in handle\n    out = model(x)\nValueError: bad request\n')
END = ("Memory access fault by GPU node-2 (Agent handle: 0x55d1c3a0e2f0) on address 0x7f1c2e400000. "
       "Reason: Page not present or supervisor privilege.\n"
       ":0:rocdevice.cpp            :2984: 1234567890 us: [pid:4242  tid:0x7f00] Callback: Queue 0x7f00 aborting with "
       "error : HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION: The agent attempted to access memory beyond the largest "
       "legal address. code: 0x29\nAborted (core dumped)\n")


def generate(path: Path, mb: int) -> None:
    size = mb * 1_000_000
    if path.exists() and path.stat().st_size >= size:
        return
    block = "\n".join(LINES[i % 4] for i in (0, 1, 0, 2, 0, 1, 3, 0, 2, 0) * 1000) + "\n"
    with open(path, "w") as fh:
        written = 0
        while written < size:
            fh.write(block)
            written += len(block)
            if abs(written - size // 2) < len(block):
                fh.write(MIDDLE)
        fh.write(END)


def run(argv: list[str]) -> tuple[float, float, str]:
    t = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    return time.monotonic() - t, usage.ru_maxrss / 1024, out.decode(errors="replace")


def grep_pattern() -> str:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import faultkit.ingest.debugger  # noqa: F401 - each parser declares its anchors on import
    import faultkit.ingest.kernel_log  # noqa: F401
    import faultkit.ingest.runtime_log  # noqa: F401
    from faultkit.ingest.prefilter import GUARDS
    words = sorted({a for g in GUARDS for a in g.anchors})
    return "|".join(re.sub(r"([.^$*+?()\[\]{}|\\])", r"\\\1", w) for w in words)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="200,1000", help="log sizes in MB")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default="/tmp/fk-biglog")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    pattern = grep_pattern()
    faultkit = [sys.executable, "-m", "faultkit.cli", "triage", "--format", "json"]
    rows = []
    try:
        for mb in map(int, args.sizes.split(",")):
            log = root / f"server-{mb}MB.log"
            generate(log, mb)
            subprocess.run(["cat", str(log)], stdout=subprocess.DEVNULL)        # into the page cache
            g, f = [], []
            for _ in range(args.repeat):
                g.append(run(["grep", "-E", "-n", pattern, str(log)]))
                f.append(run(faultkit + [str(log)]))
            doc = json.loads(f[-1][2])
            faults = [x["kind"] for x in doc["faults"]]
            gt, gr = statistics.median(x[0] for x in g), statistics.median(x[1] for x in g)
            ft, fr = statistics.median(x[0] for x in f), statistics.median(x[1] for x in f)
            rows.append((mb, gt, gr, ft, fr, faults, len(g[-1][2].splitlines())))
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(f"{'log':>8} | {'grep -E':>8} | {'faultkit triage':>16} | {'ratio':>6} | {'peak RSS':>9} | faults found")
    for mb, gt, gr, ft, fr, faults, hits in rows:
        print(f"{mb:>6}MB | {gt:7.2f}s | {ft:15.2f}s | {ft / gt:5.1f}x | {fr:6.0f} MB | {', '.join(faults)} "
              f"(grep: {hits} lines, {gr:.0f} MB)")


if __name__ == "__main__":
    main()
