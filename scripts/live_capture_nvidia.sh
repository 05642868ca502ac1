#!/bin/sh
# Live end-to-end run of faultkit on an NVIDIA machine (how the H200 runs in docs/live-h200.md
# were made): capture the toy server's GPU fault under cuda-gdb attached to each worker, under
# cuda-gdb following forks, and under compute-sanitizer; triage each bundle.
# Usage: scripts/live_capture_nvidia.sh OUTDIR [all|attach|inline|sanitizer|follow]
set -u
O=${1:?output folder}
mkdir -p "$O"
run() {  # name, server arguments, faultkit capture arguments...
    name=$1; sargs=$2; shift 2
    echo "=== $name: faultkit capture $*"
    t0=$(date +%s)
    python3 -m faultkit.cli capture -o "$O/$name" "$@" -- python3 scripts/gpu_fault_server.py $sargs
    echo "capture rc=$? in $(( $(date +%s) - t0 )) s"
    python3 -m faultkit.cli triage "$O/$name" --format json -o "$O/$name-triage.json"
    python3 -m faultkit.cli triage "$O/$name" -o "$O/$name-triage.md"
    python3 -c "import json,sys; v=json.load(open(sys.argv[1]))['verdict']; print('VERDICT', v['level'], v['kernel'])" "$O/$name-triage.json"
    ps -eo pid,cmd | grep -c "[g]pu_fault_server" | sed 's/^/survivors: /'
}
nvidia-smi -L; cuda-gdb --version | head -1; compute-sanitizer --version | tail -1
case "${2:-all}" in
all|attach) run attach "--fault-after 45" --with cuda-gdb --attach-workers --timeout 180s --command-deadline 150s ;; esac
case "${2:-all}" in
all|inline) run inline "--inline --fault-after 10" --with cuda-gdb --timeout 150s --command-deadline 120s ;; esac
case "${2:-all}" in
all|sanitizer) run sanitizer "--fault-after 45" --with sanitizer --timeout 150s ;; esac
case "${2:-all}" in
all|follow) run follow "--fault-after 45" --with cuda-gdb --timeout 120s --command-deadline 120s ;; esac
