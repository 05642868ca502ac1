"""Benchmark: how fast a target can print under `faultkit capture`, beside the same target bare.

The target writes SIZE MiB of 1 KiB lines to its stdout as fast as it can and records how long its
own writes took (the time it was held up). Bare, its stdout is a file (what a capture records
into); recorded, it runs under `faultkit capture -q` (recording only) and under `faultkit capture`
with the live mirror going to /dev/null. Prints MB/s per row, medians of --repeat runs, and each
row's ratio to bare, and the CPU seconds per GiB spent beyond the bare target's own (what faultkit
costs beyond start-up, a figure that a busy machine disturbs less than the wall clock; with the
mirror it includes the summary's triage of the larger log). The goal (issues #28, #35): >= 1 GB/s
recorded, or >= 0.8 of bare. The rows are interleaved, one of each per repetition.

    python scripts/bench_capture_throughput.py [--size 1024] [--repeat 5]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

WRITER = r"""
import os, sys, time
size_mib, report = int(sys.argv[1]), sys.argv[2]
block = (b"x" * 1023 + b"\n") * 1024            # 1 MiB of 1 KiB lines
t = time.monotonic()
for _ in range(size_mib):
    view = memoryview(block)
    while view:
        view = view[os.write(1, view):]
with open(report, "w") as fh:
    fh.write(f"{time.monotonic() - t:.6f}")
"""


def _run(cmd: list[str], **kw) -> float:
    """Run to the end; the CPU seconds it and its waited-for children used."""
    proc = subprocess.Popen(cmd, **kw)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime


def one(kind: str, size: int, work: Path, i: int) -> tuple[float, float]:
    report = work / f"{kind}.{i}.seconds"
    writer = [sys.executable, "-c", WRITER, str(size), str(report)]
    if kind == "bare":
        with open(work / f"bare.{i}.log", "wb") as out:
            cpu = _run(writer, stdout=out)
    else:
        bundle = work / f"{kind}.{i}"
        quiet = ["-q"] if kind == "recorded" else []
        with open(os.devnull, "wb") as null:
            cpu = _run([sys.executable, "-m", "faultkit.cli", "capture", *quiet, "--no-coredump", "-o",
                        str(bundle), "--", *writer], stdout=null, stderr=subprocess.DEVNULL,
                       cwd=Path(__file__).resolve().parent.parent)
        got = (bundle / "server.log").stat().st_size if size else 0
        if got != size << 20:
            raise SystemExit(f"{kind}: the bundle holds {got} bytes of {size << 20}")
    seconds = float(report.read_text())
    for p in work.glob(f"*.{i}*"):               # keep the disk free between runs
        if p.is_file():
            p.unlink()
        else:
            subprocess.run(["rm", "-rf", str(p)], check=False)
    return seconds, cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=1024, help="MiB the target writes")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    kinds = ("bare", "recorded", "recorded+mirror")
    runs: dict[str, list] = {k: [] for k in kinds}
    empty: dict[str, list] = {k: [] for k in kinds}
    with tempfile.TemporaryDirectory(prefix="fk-bench-") as tmp:
        work = Path(tmp)
        # Interleaved: each repetition runs every row once, so a load that comes and goes on a shared
        # machine falls on all rows alike and the ratios hold.
        for i in range(args.repeat):
            for kind in kinds:
                runs[kind].append(one(kind, args.size, work, i))
                # The same run writing nothing: start-up, and for the mirror row the summary's triage.
                empty[kind].append(one(kind, 0, work, 1000 + i)[1])
    rows = {k: (args.size * (1 << 20) / statistics.median(t for t, _ in runs[k]) / 1e6,
                statistics.median(c for _, c in runs[k]) - statistics.median(empty[k])) for k in kinds}
    bare, bare_cpu = rows["bare"]
    print(f"target writes {args.size} MiB of 1 KiB lines; median of {args.repeat} interleaved runs")
    for kind, (mbs, cpu) in rows.items():
        extra = (f"   target {cpu / (args.size / 1024):5.2f} CPU s/GiB" if kind == "bare" else
                 f"   faultkit {(cpu - bare_cpu) / (args.size / 1024):5.2f} CPU s/GiB")
        print(f"  {kind:16} {mbs:8.0f} MB/s   {mbs / bare:5.2f} of bare{extra}")


if __name__ == "__main__":
    main()
