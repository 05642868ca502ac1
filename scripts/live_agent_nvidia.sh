#!/bin/sh
# The in-process agent on an NVIDIA machine (how docs/live-h200.md's agent runs were made):
# build the allocator tracker, capture the three memory faults of scripts/agent_fault_demo.py
# (use-after-free of a released pool, a read past a live block, a wild pointer) and triage them,
# then the agent's cost (scripts/bench_agent.py).
# Usage: scripts/live_agent_nvidia.sh OUTDIR [build|faults|hang|bench|all]
set -u
O=${1:?output folder}
mkdir -p "$O"
export FAULTKIT_AGENT_CACHE=${FAULTKIT_AGENT_CACHE:-$O/agent-cache}
case "${2:-all}" in all|build)
    python3 -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'abi', torch._C._GLIBCXX_USE_CXX11_ABI, sys.version.split()[0])"
    g++ --version | head -1
    echo "=== build"; python3 faultkit/agent/build.py ;; esac
triage() {
    python3 -m faultkit.cli triage "$O/$1" --format json -o "$O/$1-triage.json"
    python3 -m faultkit.cli triage "$O/$1" -o "$O/$1-triage.md"
    python3 -c "
import json,sys
d=json.load(open(sys.argv[1])); v=d['verdict']; print('VERDICT', v['level'], v['kernel'])
bb=d.get('black_box') or {}
for o in bb.get('owners') or []: print('OWNER', o.get('verdict'), '|', o.get('text'))
for p in bb.get('processes') or []:
    for t in p.get('threads_at_abort') or []: print('THREAD', t.get('thread'), t.get('mark') or '', '|', ' <- '.join(t.get('frames', [])[:3]))
" "$O/$1-triage.json"
    sed -n '1,25p' "$O/$1-triage.md"
}
case "${2:-all}" in all|faults)
    for c in uaf oob wild; do
        echo "=== $c: faultkit capture -- python3 scripts/agent_fault_demo.py --case $c"
        python3 -m faultkit.cli capture -q -o "$O/$c" -- python3 scripts/agent_fault_demo.py --case $c
        echo "capture rc=$?"; grep -h "reads at" "$O/$c/server.log"; ls -la "$O/$c/agent"
        for f in "$O/$c"/agent/*.stacks.txt; do echo "--- $f"; head -30 "$f"; done
        cat "$O/$c"/agent/*.sites.tsv | head -20
        triage $c
    done
    echo "=== oob with --alloc-history"
    python3 -m faultkit.cli capture -q --alloc-history -o "$O/oob-blocks" -- python3 scripts/agent_fault_demo.py --case oob
    echo "capture rc=$?"; grep -h "reads at" "$O/oob-blocks/server.log"; triage oob-blocks ;; esac
case "${2:-all}" in all|hang)
    echo "=== hang: faultkit capture --timeout 30s -- python3 scripts/gpu_fault_server.py --hang --fault-after 5"
    python3 -m faultkit.cli capture -q --timeout 30s -o "$O/hang" -- python3 scripts/gpu_fault_server.py --hang --fault-after 5
    echo "capture rc=$?"; python3 -c "import json,sys; m=json.load(open(sys.argv[1])); print('STACKS_ASKED', m.get('stacks_asked'))" "$O/hang/manifest.json"
    for f in "$O/hang"/agent/*.stacks.txt; do echo "--- $f"; head -12 "$f"; done; triage hang ;; esac
case "${2:-all}" in all|bench)
    echo "=== cost"; python3 scripts/bench_agent.py --rounds ${ROUNDS:-3} --out "$O/bench" ;; esac
