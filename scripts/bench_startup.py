#!/usr/bin/env python3
"""Start-up cost where users feel it: `faultkit --help`, shell completion and a text-only triage of
the bundled sample's logs, each beside `python -c pass` (the interpreter's own start) in one run.
The warm-up run of each row also writes faultkit's pattern cache (faultkit/re_cache.py), as a user's first run does.

Each command runs REPS times, interleaved with the others (so load on a shared machine hits every
row alike), and the median wall time is printed with the targets of issue #35. Usage:

    python scripts/bench_startup.py [--reps 9]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "traces" / "sglang-tp2-mi300x"
CLI = [sys.executable, "-m", "faultkit.cli"]

# (label, argv, extra environment, target seconds or None)
ROWS = [
    ("python -c pass", [sys.executable, "-c", "pass"], {}, None),
    ("faultkit --help", CLI + ["--help"], {}, 0.15),
    ("completion (faultkit tr<TAB>)", CLI, {"_FAULTKIT_COMPLETE": "bash_complete", "COMP_WORDS": "faultkit tr",
                                           "COMP_CWORD": "1"}, 0.15),
    ("triage server.log dmesg.txt", CLI + ["triage", str(SAMPLE / "server.log"), str(SAMPLE / "dmesg.txt")], {}, 0.3),
    ("triage of the whole sample (traces)", CLI + ["triage", str(SAMPLE)], {}, None),
]


def once(argv: list[str], extra: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child: user + system). The CPU time is what a busy shared
    machine changes least: compare it where the wall times of `python -c pass` swing."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", **extra}
    # as installed: bytecode cached (a shell with PYTHONDONTWRITEBYTECODE would compile every module each run)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    t = time.perf_counter()
    p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    _, _, usage = os.wait4(p.pid, 0)
    return time.perf_counter() - t, usage.ru_utime + usage.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=9)
    args = ap.parse_args()
    times: dict[str, list[float]] = {r[0]: [] for r in ROWS}
    cpu: dict[str, list[float]] = {r[0]: [] for r in ROWS}
    for label, argv, extra, _ in ROWS:          # warm the page cache and the .pyc files first
        once(argv, extra)
    for _ in range(args.reps):
        for label, argv, extra, _ in ROWS:
            wall, used = once(argv, extra)
            times[label].append(wall)
            cpu[label].append(used)
    base = statistics.median(times[ROWS[0][0]])
    print(f"{'command':40} {'median s':>9} {'min s':>7} {'over python':>12} {'cpu s':>6}  target")
    failed = 0
    for label, _, _, target in ROWS:
        med = statistics.median(times[label])
        verdict = ""
        if target is not None:
            ok = med <= target
            failed += not ok
            verdict = f"<= {target:.2f} s {'ok' if ok else 'MISSED'}"
        print(f"{label:40} {med:9.3f} {min(times[label]):7.3f} {med - base:+12.3f} "
              f"{statistics.median(cpu[label]):6.3f}  {verdict}")
    print(f"({args.reps} repetitions each, interleaved; medians; cpu: the child's user + system time; load "
          f"average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
