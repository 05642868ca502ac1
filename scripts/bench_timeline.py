"""Benchmark: Perfetto export of N slices, the perfetto package's TraceProtoBuilder against faultkit.

Both write the same N kernel slices (begin and end TrackEvents with an interned name) on one track;
the speed is slices per second and the size bytes per slice (faultkit with and without
`compressed_packets`). `--end-to-end` also generates an N-dispatch bundle (bench_ingest.py's
generator) and times `faultkit timeline --window all` and `faultkit timeline --check` on it in fresh
processes, stage by stage, with peak RSS; `--bundle DIR` times an existing bundle.
Targets (issue 35): end to end >= 1M slices/s and >= 2x TraceProtoBuilder alone (measured in the same
run, printed beside it), <= 40 bytes/slice; --check of 1M slices <= 5 s (issue 15).

    python scripts/bench_timeline.py [-n 1000000] [--end-to-end] [--bundle /tmp/fk-bench/bundle]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from faultkit.export.pftrace import PftraceWriter  # noqa: E402
from faultkit.export.pftrace_check import check_trace  # noqa: E402

NAMES = ["gemm", "rmsnorm", "paged_attention", "silu_and_mul", "rotary_embedding"]


def with_perfetto_builder(n: int, path: str) -> float:
    from perfetto.trace_builder.proto_builder import TraceProtoBuilder
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TrackEvent, TracePacket
    t = time.perf_counter()
    b = TraceProtoBuilder()
    p = b.add_packet()
    p.track_descriptor.uuid = 1
    p.track_descriptor.name = "queue 1"
    p = b.add_packet()
    p.trusted_packet_sequence_id = 1
    p.sequence_flags = TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
    for i, name in enumerate(NAMES):
        e = p.interned_data.event_names.add()
        e.iid, e.name = i + 1, name
    for i in range(n):
        start = 1_000_000_000 + i * 20_000
        p = b.add_packet()
        p.timestamp = start
        p.trusted_packet_sequence_id = 1
        p.sequence_flags = TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
        p.track_event.type = TrackEvent.TYPE_SLICE_BEGIN
        p.track_event.track_uuid = 1
        p.track_event.name_iid = i % len(NAMES) + 1
        p = b.add_packet()
        p.timestamp = start + 15_000
        p.trusted_packet_sequence_id = 1
        p.sequence_flags = TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
        p.track_event.type = TrackEvent.TYPE_SLICE_END
        p.track_event.track_uuid = 1
    with open(path, "wb") as fh:
        fh.write(b.serialize())
    return time.perf_counter() - t


def with_faultkit(n: int, path: str, compress: bool = True) -> float:
    t = time.perf_counter()
    starts = 1_000_000_000 + np.arange(n, dtype=np.int64) * 20_000
    w = PftraceWriter(path, compress=compress)
    track = w.track("queue 1")
    w.slices(track, starts, starts + 15_000, NAMES, np.arange(n) % len(NAMES))
    w.close()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=1_000_000)
    ap.add_argument("--bundle", help="also time `faultkit timeline` on this bundle")
    ap.add_argument("--end-to-end", action="store_true", help="generate an N-dispatch bundle and time the CLI on it")
    args = ap.parse_args()
    n = args.n
    with tempfile.TemporaryDirectory() as d:
        runs = (("perfetto TraceProtoBuilder", with_perfetto_builder), ("faultkit", with_faultkit),
                ("faultkit, uncompressed", lambda n, p: with_faultkit(n, p, compress=False)))
        speeds = {}
        for label, fn in runs:
            path = os.path.join(d, f"{label.split()[0]}.pftrace")
            secs = fn(n, path)
            speeds[label] = n / secs
            size = os.path.getsize(path)
            res = check_trace(Path(path).read_bytes(), keep_names=False)
            print(f"{label:28s} {n / secs / 1e6:6.2f} M slices/s  {size / n:6.1f} bytes/slice  "
                  f"({secs:.2f} s, checker: {'ok' if res.ok and res.slices == n else res.errors[:2]})")
        if args.end_to_end:
            end_to_end(n, d, speeds["perfetto TraceProtoBuilder"])
        if args.bundle:
            out = os.path.join(d, "bundle.pftrace")
            for window in ("30s", "all"):
                t = time.perf_counter()
                subprocess.run([sys.executable, "-m", "faultkit.cli", "timeline", args.bundle, "-o", out,
                                "--window", window], check=True, capture_output=True,
                               cwd=str(Path(__file__).resolve().parent.parent))
                print(f"faultkit timeline --window {window:4s} {time.perf_counter() - t:6.2f} s  "
                      f"{os.path.getsize(out) / 1e6:.1f} MB")


STAGES = """
import sys, time, resource
clock = lambda: (time.perf_counter(), time.process_time())      # process_time: every thread's CPU
marks = [clock()]
from faultkit.triage import TriageOptions, triage
from faultkit.export.timeline import build_timeline, write_pftrace
marks.append(clock())
inc = triage([sys.argv[1]], TriageOptions(read_all=True))
marks.append(clock())
tl = build_timeline(inc, None)
marks.append(clock())
size = write_pftrace(tl, sys.argv[2])
marks.append(clock())
# VmHWM, not ru_maxrss: Linux keeps ru_maxrss across fork and exec, so it would report this
# benchmark's own size (the builder's million messages) when that is larger than the child's peak
hwm = [line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:")]
print(" ".join(f"{b[0] - a[0]:.2f}/{b[1] - a[1]:.2f}" for a, b in zip(marks, marks[1:])), size,
      f"{int(hwm[0]) / 1024 if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}")
"""


def _run_timed(cmd: list[str], **kw) -> tuple[float, float]:
    """Wall and CPU seconds (user + system, every thread) of one child process: on a shared
    machine the wall time is mostly the others' load, the CPU time is the work itself."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, **kw)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def end_to_end(n: int, d: str, builder_per_s: float) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_ingest import generate
    bundle = generate(Path(d) / "e2e", n)
    out = os.path.join(d, "e2e.pftrace")
    repo = str(Path(__file__).resolve().parent.parent)
    # as a user runs it again: Python's bytecode cache written (a sandbox may switch it off with
    # PYTHONDONTWRITEBYTECODE, which adds the compiling of every module to each run) and the
    # trace in the page cache; after one warm-up run, the median of three is reported
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    walls, cpus = [], []
    for _ in range(4):
        wall, cpu = _run_timed([sys.executable, "-m", "faultkit.cli", "timeline", str(bundle), "-o", out,
                                "--window", "all"], cwd=repo, env=env)
        walls.append(wall)
        cpus.append(cpu)
    wall = sorted(walls[1:])[1]
    size = os.path.getsize(out)
    print(f"faultkit timeline --window all, {n:,} dispatches: {wall:.2f} s end to end = {n / wall / 1e3:.0f}k "
          f"slices/s (target >= 1000k) = {n / wall / builder_per_s:.2f}x TraceProtoBuilder alone in this run "
          f"(target >= 2), {size / n:.1f} bytes/slice (target <= 40); "
          f"runs {', '.join(f'{w:.2f}' for w in walls[1:])} s after a warm-up; CPU (user + system) "
          f"{sorted(cpus[1:])[1]:.2f} s median, runs {', '.join(f'{c:.2f}' for c in cpus[1:])} s; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    stages = subprocess.run([sys.executable, "-c", STAGES, str(bundle), out], check=True, capture_output=True,
                            text=True, cwd=repo, env={**env, "PYTHONPATH": repo}).stdout.split()
    imp, ingest, layout, export, _, rss = stages
    print(f"  stages (wall/CPU s): imports {imp}, triage with the trace (ingest + analyses) {ingest}, layout "
          f"{layout}, export {export}; peak RSS {rss} MB")
    checks = [_run_timed([sys.executable, "-m", "faultkit.cli", "timeline", "--check", out], cwd=repo, env=env)
              for _ in range(3)]
    print(f"faultkit timeline --check: {sorted(c[0] for c in checks)[1]:.2f} s median (target <= 5 s); "
          f"runs {', '.join(f'{c[0]:.2f}' for c in checks)} s; CPU {sorted(c[1] for c in checks)[1]:.2f} s median")


if __name__ == "__main__":
    main()
