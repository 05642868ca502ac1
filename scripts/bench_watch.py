#!/usr/bin/env python3
"""`faultkit watch` idle and in a storm, beside `tail -F` of the same file (the anchor: a follower that
does nothing with what it reads).

    python scripts/bench_watch.py [--idle 20] [--storm 10] [--rate 10000]

Idle: CPU over --idle seconds with nothing written (target < 1% of a core). Storm: --rate Xid lines a
second for --storm seconds (target: bounded memory, every line counted, one incident).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LINE = ("[ 38.591266] NVRM: Xid (PCI:0000:00:06): 31, pid=581, name=python3, channel 0x0000000a, intr 00000000. "
        "MMU Fault: ENGINE GRAPHICS GPC0 GPCCLIENT_T1_12 faulted @ 0x838c_74800000. Fault is of type FAULT_PDE "
        "ACCESS_TYPE_VIRT_READ\n")
TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TICK


def hwm_mb(pid: int) -> float:
    for ln in Path(f"/proc/{pid}/status").read_text().splitlines():
        if ln.startswith("VmHWM:"):
            return int(ln.split()[1]) / 1024
    return 0.0


def measure(cmd, log: Path, idle: float, storm: float, rate: int) -> dict:
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(3)                      # start-up (imports) is not idle time
    c0 = cpu_s(p.pid)
    time.sleep(idle)
    idle_pct = 100 * (cpu_s(p.pid) - c0) / idle
    c1, t1 = cpu_s(p.pid), time.time()
    with open(log, "a") as fh:
        for _ in range(int(storm * 10)):
            fh.write(LINE * (rate // 10))
            fh.flush()
            time.sleep(0.1)
    time.sleep(2)
    storm_pct = 100 * (cpu_s(p.pid) - c1) / (time.time() - t1)
    out = {"idle_cpu_pct": idle_pct, "storm_cpu_pct": storm_pct, "peak_rss_mb": hwm_mb(p.pid)}
    p.terminate()
    p.wait(timeout=30)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--idle", type=float, default=20)
    ap.add_argument("--storm", type=float, default=10)
    ap.add_argument("--rate", type=int, default=10000)
    a = ap.parse_args()
    d = Path(tempfile.mkdtemp(prefix="faultkit-bench-watch-"))
    rows = {}
    for name in ("tail -F", "faultkit watch"):
        log = d / f"{name.split()[0]}.log"
        log.write_text("")
        cmd = (["tail", "-F", str(log)] if name == "tail -F" else
               [sys.executable, "-m", "faultkit.cli", "watch", "-q", "--kernel-log", str(log), "--spool", str(d / "spool"),
                "--quiet-after", "5s", "--node", "bench"])
        rows[name] = measure(cmd, log, a.idle, a.storm, a.rate)
    incidents = [json.loads((f / "manifest.json").read_text()) for f in (d / "spool").iterdir() if f.is_dir()]
    print(f"idle {a.idle:g} s, then {a.rate:,} Xid lines/s for {a.storm:g} s")
    print(f"{'':<16} {'idle CPU':>9} {'storm CPU':>10} {'peak RSS':>9}")
    for name, r in rows.items():
        print(f"{name:<16} {r['idle_cpu_pct']:>8.2f}% {r['storm_cpu_pct']:>9.1f}% {r['peak_rss_mb']:>7.0f}MB")
    print(f"incidents opened: {len(incidents)}; signs counted: {sum(i['signs'] for i in incidents):,} "
          f"of {int(a.rate * a.storm):,} lines written")


if __name__ == "__main__":
    main()
