#!/bin/sh
# Live GPU core dumps on an NVIDIA machine (how docs/live-h200.md's core-dump runs were made):
# 1. a default capture of the toy server's illegal address (nothing attached; the core dump is armed),
# 2. a hung server (a spinning kernel) ended by --timeout, named from the user-triggered dumps,
# 3. the capture's cost: bare / default capture / cuda-gdb attached, side by side.
# Usage: scripts/live_coredump_nvidia.sh OUTDIR [fault|hang|bench|all]
set -u
O=${1:?output folder}
mkdir -p "$O"
nvidia-smi -L; cuda-gdb --version | head -1
triage() {
    python3 -m faultkit.cli triage "$O/$1" --format json -o "$O/$1-triage.json"
    python3 -m faultkit.cli triage "$O/$1" -o "$O/$1-triage.md"
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); v=d['verdict']; print('VERDICT', v['level'], v['kernel']); [print('CORE', c['path'], c['platform'], c['pid'], c['size'], c['analysed_with']) for c in d['cores']]; [print('STOP', s['kernel'], s['faulting_instruction'], s['pc']) for s in d['debugger_stops']]; [print('FAULT', f['source'], f['kind'], f['address']) for f in d['faults']]" "$O/$1-triage.json"
    ps -eo pid,cmd | grep -c "[g]pu_fault_server" | sed 's/^/survivors: /'
}
case "${2:-all}" in all|fault)
    echo "=== fault: faultkit capture -- python3 scripts/gpu_fault_server.py --fault-after 2"
    t0=$(date +%s.%N)
    python3 -m faultkit.cli capture -o "$O/fault" -- python3 scripts/gpu_fault_server.py --fault-after 2
    echo "capture rc=$? in $(python3 -c "import time,sys; print(round(time.time()-float(sys.argv[1]),1))" $t0) s"
    ls -la "$O/fault" "$O/fault/cores"; triage fault ;; esac
case "${2:-all}" in all|hang)
    echo "=== hang: faultkit capture --timeout 60s -- python3 scripts/gpu_fault_server.py --hang --fault-after 5"
    python3 -m faultkit.cli capture --timeout 60s -o "$O/hang" -- python3 scripts/gpu_fault_server.py --hang --fault-after 5
    echo "capture rc=$?"; ls -la "$O/hang/cores"; python3 -c "import json,sys; m=json.load(open(sys.argv[1])); print('HANG_DUMPS', m.get('hang_dumps'))" "$O/hang/manifest.json"
    triage hang ;; esac
case "${2:-all}" in all|bench)
    echo "=== overhead"; python3 scripts/bench_capture_overhead.py --seconds 50 --window 20 ;; esac
