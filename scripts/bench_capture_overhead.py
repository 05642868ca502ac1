"""Benchmark: what a capture costs the server, side by side in one run.

Runs scripts/throughput_workload.py bare, under `faultkit capture` with its defaults (GPU core
dumps armed, nothing attached), and under `faultkit capture --with cuda-gdb --attach-workers`,
and prints each rank's throughput and its ratio to bare. Needs an NVIDIA GPU (and cuda-gdb for
the third row). The goal for the default capture is >= 98% of bare.

    python scripts/bench_capture_overhead.py [--seconds 50 --window 20] [--skip-debugger]
"""

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
LINE = re.compile(r"THROUGHPUT rank (\d+) (\w+)_per_s ([\d.]+)")


def measure(cmd: list[str], log: Path | None = None) -> dict[str, float]:
    res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    text = log.read_text(errors="replace") if log and log.exists() else res.stdout
    got = {m.group(2): float(m.group(3)) for m in LINE.finditer(text)}
    if not got:
        print(f"no throughput from {' '.join(cmd[:6])} ... (exit {res.returncode}):\n{res.stdout[-2000:]}",
              file=sys.stderr)
    return got


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=50.0)
    ap.add_argument("--window", type=float, default=20.0)
    ap.add_argument("--skip-debugger", action="store_true")
    args = ap.parse_args()
    work = [sys.executable, str(HERE / "throughput_workload.py"), "--seconds", str(args.seconds),
            "--window", str(args.window)]
    tmp = Path(tempfile.mkdtemp(prefix="faultkit-bench-"))
    fk = [sys.executable, "-m", "faultkit.cli", "capture", "--timeout", f"{args.seconds + 120:.0f}s"]
    rows = [("bare", measure(work))]
    rows.append(("faultkit capture (default: core dumps armed)",
                 measure(fk + ["-o", str(tmp / "default"), "--"] + work, tmp / "default" / "server.log")))
    if not args.skip_debugger and shutil.which("cuda-gdb"):
        rows.append(("faultkit capture --with cuda-gdb --attach-workers",
                     measure(fk + ["--with", "cuda-gdb", "--attach-workers", "-o", str(tmp / "gdb"), "--"] + work,
                             tmp / "gdb" / "server.log")))
    bare = rows[0][1]
    print(f"{'run':52s} {'small kernels/s':>16s} {'matmul/s':>10s} {'vs bare':>16s}")
    for name, got in rows:
        k, m = got.get("small_kernels"), got.get("matmuls")
        ratio = " / ".join(f"{got[x] / bare[x]:.0%}" for x in ("small_kernels", "matmuls") if x in got and bare.get(x))
        print(f"{name:52s} {k or float('nan'):16.1f} {m or float('nan'):10.1f} {ratio:>16s}")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
