#!/bin/sh
# Live `capture --pid` on an NVIDIA machine (docs/live-h200.md): a toy GPU server started outside
# faultkit with its output in a file, then
# 1. followed plainly (its output, processes, kernel log; nothing armed, the server never stopped),
# 2. followed with cuda-gdb attached to its GPU workers (the fault stops in the debugger),
# and a default capture of the same server as a regression check of the console and the timeline.
# Usage: scripts/live_pid_nvidia.sh OUTDIR
set -u
O=${1:?output folder}
mkdir -p "$O"
nvidia-smi -L; cuda-gdb --version | head -1
summary() {
    python3 -m faultkit.cli triage "$O/$1" --format json -o "$O/$1-triage.json"
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); v=d['verdict']; print('VERDICT', v['level'], v['kernel']); [print('FAULT', f['source'], f['kind'], f['address'], f['pid']) for f in d['faults'][:6]]; [print('STOP', s['kernel'], s['pc']) for s in d['debugger_stops'][:3]]" "$O/$1-triage.json"
    python3 -c "import json,sys; m=json.load(open(sys.argv[1])); print('MANIFEST', m['ended_by'], m.get('exit'), m.get('followed'), m['coredump'].get('armed'), [(d.get('pid'), d.get('state')) for d in m.get('debuggers', [])])" "$O/$1/manifest.json"
    python3 -m faultkit.cli timeline "$O/$1" -o "$O/$1.pftrace" && python3 -m faultkit.cli timeline --check "$O/$1.pftrace"
}
for mode in plain cuda-gdb; do
    echo "=== --pid, $mode"
    python3 scripts/gpu_fault_server.py --fault-after 45 > "$O/server-$mode.out" 2>&1 &
    SP=$!
    sleep 12
    if [ "$mode" = plain ]; then W=""; else W="--with cuda-gdb"; fi
    python3 -m faultkit.cli capture --pid $SP $W --timeout 150s -o "$O/pid-$mode"
    echo "capture rc=$?"
    kill -0 $SP 2>/dev/null && echo "server $SP still running after the capture (expected when it did not die)"
    kill -9 $SP 2>/dev/null; pkill -9 -f gpu_fault_server 2>/dev/null; sleep 2
    summary "pid-$mode"
done
echo "=== default capture (console and timeline regression)"
python3 -m faultkit.cli capture -o "$O/default" -- python3 scripts/gpu_fault_server.py --fault-after 2 > "$O/default-console.txt" 2>&1
echo "capture rc=$?"; tail -4 "$O/default-console.txt"
summary default
