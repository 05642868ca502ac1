"""Benchmark: rocprofv3 trace ingest against pandas, and triage with and without a huge trace.

Generates a ROCm 7.x kernel_trace.csv with N dispatches (default 5,000,000, about 865 MB) inside a
capture-style bundle whose runtime fault line comes right after the last dispatch, then measures,
each in a fresh process (wall time and peak RSS from wait4):

  1. pandas.read_csv of the whole file
  2. faultkit's full ingest of the file (read_trace_paths, no window)
  3. faultkit triage of the bundle without the trace
  4. faultkit triage of the bundle with the trace (reads only the window before the fault)

Targets (issue 3): triage with the trace at most 0.5 s slower than without it and at most 300 MB
peak RSS; full ingest within 1.5x pandas' time and no more memory.

    python scripts/bench_ingest.py [--rows 5000000] [--fault-at 0.8] [--repeat 3] [--dir /tmp/fk-bench] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HEADER = ('"Kind","Agent_Id","Queue_Id","Stream_Id","Thread_Id","Dispatch_Id","Kernel_Id","Kernel_Name",'
          '"Correlation_Id","Start_Timestamp","End_Timestamp","LDS_Block_Size","Scratch_Size","VGPR_Count",'
          '"Accum_VGPR_Count","SGPR_Count","Workgroup_Size_X","Workgroup_Size_Y","Workgroup_Size_Z","Grid_Size_X",'
          '"Grid_Size_Y","Grid_Size_Z"\n')
KERNELS = ["void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
           "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)",
           "_fwd_grouped_kernel_stage1", "rmsnorm_kernel(float*, float const*, int)",
           "Cijk_Ailk_Bljk_HHS_BH_MT128x128x32_MI32x32x8x1_SN_1LDSB1", "paged_attention_ll4mi_QKV_mfma16_kernel"]
T0 = 5_000_000_000_000        # boottime ns of the first dispatch
STEP = 20_000                 # a dispatch every 20 µs


def generate(root: Path, rows: int, fault_at: float = 1.0) -> Path:
    """`fault_at`: where in the trace the fault falls (1.0: after the last dispatch; 0.8: one rank
    faulted and the others ran on for the last fifth of the trace)."""
    bundle = root / "bundle"
    trace = bundle / "rocprofv3" / "host" / "4242_kernel_trace.csv"
    key = f"{rows} {fault_at}"
    if trace.exists() and (bundle / "rows.txt").read_text() == key:
        return bundle
    trace.parent.mkdir(parents=True, exist_ok=True)
    t = time.monotonic()
    with open(trace, "w") as fh:
        fh.write(HEADER)
        chunk = []
        for i in range(1, rows + 1):
            s = T0 + i * STEP
            chunk.append(f'"KERNEL_DISPATCH","Agent 1",{1 + i % 4},{1 + i % 4},4243,{i},{10 + i % 5},'
                         f'"{KERNELS[i % 5]}",{i},{s},{s + 15_000},0,0,64,0,32,256,1,1,{256 * (1 + i % 64)},1,1\n')
            if len(chunk) == 100_000:
                fh.write("".join(chunk))
                chunk = []
        fh.write("".join(chunk))
    (bundle / "rocprofv3" / "host" / "4242_agent_info.csv").write_text(
        '"Node_Id","Logical_Node_Id","Agent_Type","Name","Product_Name"\n0,0,"CPU","cpu","EPYC"\n'
        '2,1,"GPU","gfx942","MI300X"\n')
    fault = T0 + (int(rows * fault_at) + 1) * STEP
    (bundle / "server.log").write_text(
        "server started\nMemory access fault by GPU node-2 (Agent handle: 0x55d1) on address 0x7f0000001000. "
        "Reason: Page not present or supervisor privilege.\n")
    (bundle / "server.times.tsv").write_text(f"1\t1.0\t{T0}\t{T0}\n2\t2.0\t{fault}\t{fault}\n")
    (bundle / "manifest.json").write_text(json.dumps({"schema": "faultkit.bundle/1", "command": "bench",
                                                      "start": {"wall": 1.0, "monotonic_ns": T0, "boottime_ns": T0}}))
    (bundle / "rows.txt").write_text(key)
    print(f"generated {rows:,} dispatches ({trace.stat().st_size / 1e6:.0f} MB) in {time.monotonic() - t:.1f} s")
    return bundle


def measure(code: str) -> tuple[float, float, str]:
    """Run `code` in a fresh interpreter: wall seconds, peak RSS in MB, its stdout."""
    t = time.monotonic()
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - t
    if p.returncode:
        raise SystemExit(f"benchmark step failed ({p.returncode}):\n{code}")
    return wall, usage.ru_maxrss / 1024, out.strip()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--dir", default="/tmp/fk-bench")
    ap.add_argument("--keep", action="store_true", help="keep the generated bundle")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each step (the median is reported)")
    ap.add_argument("--fault-at", type=float, default=1.0,
                    help="where the fault falls in the trace, as a fraction (0.8: mid-file, the other ranks ran on)")
    args = ap.parse_args()
    root = Path(args.dir)
    bundle = generate(root, args.rows, args.fault_at)
    trace = bundle / "rocprofv3" / "host" / "4242_kernel_trace.csv"
    bare = root / "bare"
    if bare.exists():
        shutil.rmtree(bare)
    shutil.copytree(bundle, bare, ignore=shutil.ignore_patterns("rocprofv3"))
    repo = str(Path(__file__).resolve().parent.parent)
    pre = f"import sys; sys.path.insert(0, {repo!r}); "
    steps = {
        "pandas.read_csv (whole file)": f"import pandas as pd; df = pd.read_csv({str(trace)!r}); print(len(df))",
        "faultkit full ingest": pre + f"from faultkit.ingest.traces import read_trace_paths; "
                                      f"t = read_trace_paths([{str(trace)!r}]); print(len(t.dispatches))",
        "faultkit triage, no trace": pre + f"from faultkit.triage import build; from faultkit.bundle import "
                                           f"collect; i = build(collect([{str(bare)!r}])); print(i.verdict.level)",
        "faultkit triage, with trace": pre + f"from faultkit.triage import build; from faultkit.bundle import "
                                             f"collect; i = build(collect([{str(bundle)!r}])); "
                                             f"print(i.verdict.level, i.traces.to_json()['rows']['dispatches'])",
    }
    # Each step runs --repeat times, the steps taking turns (a shared machine's load then falls on
    # all of them alike); the median wall time and the largest peak RSS are reported.
    runs: dict[str, list] = {name: [] for name in steps}
    for _ in range(args.repeat):
        for name, code in steps.items():
            runs[name].append(measure(code))
    res = {}
    for name, rs in runs.items():
        walls = sorted(r[0] for r in rs)
        res[name] = (walls[len(walls) // 2], max(r[1] for r in rs), rs[-1][2])
        w, m, out = res[name]
        spread = f" (runs {', '.join(f'{x:.2f}' for x in walls)})" if len(walls) > 1 else ""
        print(f"{name:32s} {w:7.2f} s  {m:8.0f} MB peak RSS   ({out}){spread}")
    pd_w, pd_m, _ = res["pandas.read_csv (whole file)"]
    fi_w, fi_m, _ = res["faultkit full ingest"]
    t0_w, _, _ = res["faultkit triage, no trace"]
    t1_w, t1_m, _ = res["faultkit triage, with trace"]
    print()
    print(f"triage cost of the trace: {t1_w - t0_w:+.2f} s (target <= 0.5 s), peak {t1_m:.0f} MB (target <= 300 MB)")
    print(f"full ingest vs pandas: {fi_w / pd_w:.2f}x time (target <= 1.5x), {fi_m / pd_m:.2f}x memory (target <= 1x)")
    if not args.keep:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
