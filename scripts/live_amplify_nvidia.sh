#!/bin/sh
# faultkit amplify on an NVIDIA GPU (for docs/live-h200.md's amplify section): the planted, intermittent
# use-after-free of scripts/uaf_server.py on CUDA (torch's caching allocator, a Triton gather through a
# stale table address), amplified by caching off and by the agent's poison and release, the agent's hold-back, and a
# check that poison and hold-back change nothing a correct program computes. Prints what the docs need.
# Usage: scripts/live_amplify_nvidia.sh [OUTDIR] [build|uaf|hold|nochange|all|ten|done|diag]   (OUTDIR defaults to $OUT)
# Budget: about 7 minutes on one H200 (build ~1 min once, uaf ~4 min, hold ~1.5 min, nochange ~30 s; a crashed
# trial waits the few seconds the driver takes to write its core); the sections can be run one at a time.
# `done` is issue 34's whole Done-when check in one device call (about 6 minutes, at most 9): a cold agent cache,
# ten plain trials and ten of one amplified arm (ARM, default poison) without early stop, triage of every amplified
# crash (its fault address, the faulting instruction and registers from the saved cuda-gdb transcript), and the
# figures: plain <= 1/10, the arm >= 9/10, the block named, the wait against plain trials alone.
# `diag` (about 5 minutes, at most 8): 2 rounds of poison, release and caching-off against plain, every crashed
# trial triaged (triage.md), and ONE tarball $OUT/amplify-diag.tgz (< 15 MiB) of the crashed trials with their
# rings cut to header and records (scripts/amplify_diag_pack.py), for a test to replay triage's block naming.
set -u
O=${1:-${OUT:?give an output folder}}
mkdir -p "$O"
export FAULTKIT_AGENT_CACHE=${FAULTKIT_AGENT_CACHE:-$O/agent-cache}
PY=${PYTHON:-python3}
FK="$PY -m faultkit.cli"
T0=$(date +%s)
stamp() { echo "=== [$(( $(date +%s) - T0 )) s] $*"; }
SAMPLE="$PY scripts/uaf_server.py"
what=${2:-all}
DEVICE=${DEVICE:-cuda}       # DEVICE=cpu runs the same steps on the CPU stand-in (how the script itself is tested)

summary() {    # per trial: arm, outcome, how it ended, seconds, env check; then the report
    $PY - "$1" <<'EOF'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
for p in sorted(out.glob("trial-*/result.json")):
    r = json.loads(p.read_text())
    env = r["env"]
    print("TRIAL", r["index"], r["arm"], r["outcome"], r["ended_by"], f"{r['duration_s']:.1f}s", r["exit"],
          "env-ok" if env["ok"] else f"env-NOT-ok {env['mismatches'][:1]}", "|", (r.get("fault_line") or "")[:150])
    for c in r.get("cores") or []:
        print("  CORE", c.get("path"), c.get("size"), "bytes,", c.get("how_found"))
rep = json.loads((out / "amplify-report.json").read_text())
for a in rep["arms"]:
    print("ARM", a["arm"], f"{a['crashes']}/{a['trials']}", a["state"], "after round", a["stopped_after_round"],
          "median ttc", a["median_time_to_crash_s"], "not counted", len(a["not_counted"]), "|",
          "; ".join(a.get("reached_proof") or []))
    for x in a["not_counted"]:
        print("  NOT COUNTED", x)
    for b in a.get("black_box") or []:
        print("  BLACK BOX", b)
print("WAITING", json.dumps(rep["waiting"]))
for c in rep["checkers"]:
    print("CHECKER", json.dumps(c))
for s in rep["skipped"]:
    print("SKIPPED", s)
EOF
    cat "$1/amplify-report.md"
}

headers() {    # the agent's record in each process of one trial: what it armed, what it filled
    $PY - "$1" <<'EOF'
import json, sys, pathlib
for p in sorted(pathlib.Path(sys.argv[1]).glob("agent/*.json")):
    h = json.loads(p.read_text())
    print("HEADER", p.name, "armed", h.get("armed"), "torch", h.get("torch"), "alloc", (h.get("alloc") or {}).get("mechanism"),
          "poison", h.get("amplify_poison"), "amplify", h.get("amplify"), "failures", h.get("failures"))
EOF
}

case "$what" in all|build)
    stamp "versions"
    $PY -c "import torch, triton, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__, 'python', sys.version.split()[0], 'gpu', torch.cuda.get_device_name(0))"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -2
    g++ --version | head -1
    command -v compute-sanitizer || echo "compute-sanitizer: not on PATH"
    stamp "build the agent's tracker and poison library (cached in $FAULTKIT_AGENT_CACHE)"
    # `amplify run` builds them itself before its first trial, into the same cache; built here, the
    # sections' own builds say "(0.0 s)" and the build time is measured apart
    $PY faultkit/agent/build.py --poison
    ;; esac

case "$what" in all|uaf)
    stamp "uaf: plain vs caching-off vs poison vs release, at most 7 rounds, the sample crashing about 1 in 10 plain"
    rm -rf "$O/uaf"
    $FK amplify run --arm caching-off --arm poison --arm release --site uaf_server:decode_step -n 7 --port 30123 \
        --timeout 120s \
        --client "$SAMPLE --client --port 30123 --requests 5" -o "$O/uaf" -- \
        $SAMPLE --port 30123 --device $DEVICE
    echo "amplify rc=$?"
    summary "$O/uaf"
    first=$(ls -d "$O"/uaf/trial-*-poison 2>/dev/null | head -1)
    [ -n "$first" ] && { echo "--- agent headers of $first"; headers "$first"; }
    crashed=$($PY -c "
import json,glob
for p in sorted(glob.glob('$O/uaf/trial-*-release/result.json')) + sorted(glob.glob('$O/uaf/trial-*-caching-off/result.json')):
    if json.load(open(p))['outcome']=='crash': print(p.rsplit('/',1)[0]); break")
    if [ -n "$crashed" ]; then
        echo "--- triage of $crashed"; $FK triage "$crashed" | sed -n '1,40p'
        ls -la "$crashed" "$crashed/cores" "$crashed/agent" 2>&1 | head -30
    fi ;; esac

case "$what" in ten)     # not in "all" (about 4 minutes): the issue's 10 plain against 10 amplified, no early stop
    stamp "ten: plain vs release, all 10 rounds (--no-early-stop)"
    rm -rf "$O/ten"
    $FK amplify run --arm release --site uaf_server:decode_step -n 10 --no-early-stop --port 30125 --timeout 120s \
        --client "$SAMPLE --client --port 30125 --requests 3" -o "$O/ten" -- \
        $SAMPLE --port 30125 --device $DEVICE
    echo "amplify rc=$?"
    summary "$O/ten" ;; esac

case "$what" in done)    # not in "all": issue 34's Done-when in one call
    ARM=${ARM:-poison}
    export FAULTKIT_AGENT_CACHE="$O/done-cache"      # cold: amplify builds the agent's libraries before trial 1
    rm -rf "$O/done" "$FAULTKIT_AGENT_CACHE"
    stamp "done: plain vs $ARM, all 10 rounds (--no-early-stop), the sample's defaults (--reuse-rate 0.05 --seed 1)"
    $PY -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0], 'gpu', torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)"
    timeout 420 $FK amplify run --arm "$ARM" --site uaf_server:decode_step -n 10 --no-early-stop --port 30126 \
        --timeout 90s --client "$SAMPLE --client --port 30126 --requests 3" -o "$O/done" -- \
        $SAMPLE --port 30126 --device $DEVICE
    echo "amplify rc=$?"
    [ -f "$O/done/amplify-report.json" ] || $FK amplify report "$O/done" -f json -o "$O/done/amplify-report.json"
    [ -f "$O/done/amplify-report.md" ] || $FK amplify report "$O/done" -o "$O/done/amplify-report.md"
    summary "$O/done"
    first=$(ls -d "$O"/done/trial-*-"$ARM" 2>/dev/null | head -1)
    [ -n "$first" ] && { echo "--- agent headers of $first"; headers "$first"; }
    stamp "done: triage of every crashed $ARM trial"
    mkdir -p "$O/done-transcripts"
    for t in $(ls -d "$O"/done/trial-*-"$ARM" 2>/dev/null); do
        grep -q '"outcome": "crash"' "$t/result.json" || continue
        echo "--- TRIAGE $(basename "$t")"
        timeout 60 $FK triage "$t" -f json -o "$t/triage.json" >/dev/null 2>&1
        $PY - "$t/triage.json" <<'EOF2'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except (OSError, ValueError) as exc:
    print("  no triage report:", exc); sys.exit(0)
v = r.get("verdict") or {}
print("  VERDICT", v.get("level"), v.get("kernel"))
for o in (r.get("black_box") or {}).get("owners", [])[:3]:
    print("  OWNER", o.get("verdict"), "|", o.get("text"))
    for n in o.get("notes") or []:
        print("    NOTE", n)
EOF2
        for x in "$t"/cores/*.txt; do
            [ -f "$x" ] || continue
            cp "$x" "$O/done-transcripts/$(basename "$t")-$(basename "$x")"
            grep -E '^(\*>|=>)|^(errorpc|pc) ' "$x" | head -4 | sed 's/^/  SASS /'
            grep -E '^R[0-9]+ ' "$x" | awk '{printf "%s=%s ", $1, $2} END {print ""}' | sed 's/^/  REGS /'
        done
    done
    stamp "done: the figures"
    $PY - "$O/done/amplify-report.json" "$ARM" <<'EOF2'
import json, sys
rep = json.load(open(sys.argv[1]))
arm = sys.argv[2]
a = {x["arm"]: x for x in rep["arms"]}
p, m = a["plain"], a.get(arm) or {}
w = next((x for x in rep["waiting"]["arms"] if x["arm"] == arm), {})
bb = (m.get("black_box") or [""])[0]
print(f"FIGURES plain {p['crashes']}/{p['trials']}  {arm} {m.get('crashes')}/{m.get('trials')}  p={m.get('p_vs_plain')}  "
      f"median ttc {m.get('median_time_to_crash_s')}  waited {w.get('waited_s')} s  plain alone {w.get('plain_alone')}")
print("DONE-WHEN plain <= 1 of 10:", "PASS" if p["trials"] >= 10 and p["crashes"] <= 1 else "FAIL")
print(f"DONE-WHEN {arm} >= 9 of 10:", "PASS" if (m.get("trials") or 0) >= 10 and (m.get("crashes") or 0) >= 9 else "FAIL")
print("DONE-WHEN cause class named:", "PASS" if rep["verdict"]["classes"] else "FAIL", rep["verdict"]["classes"])
print("DONE-WHEN the block named:", "PASS" if bb.startswith("name the block") else "FAIL", "|", bb[:400])
print("DONE-WHEN wait against plain alone:", "PASS" if w.get("plain_alone") else "FAIL")
print("VERDICT", rep["verdict"]["text"])
EOF2
    # With time left (the device call's 9 minutes): two caching-off and two release trials, triaged, for the
    # evidence the third run lacked: their cores' faulting instruction and registers (its lane addresses,
    # 0x11 and 0x8000000091, were in no allocation: a register the kernel reused, or the address itself?)
    if [ $(( $(date +%s) - T0 )) -lt 330 ]; then
        stamp "done (diagnosis): caching-off and release, 2 rounds"
        rm -rf "$O/done-diag"
        timeout 150 $FK amplify run --arm caching-off --arm release --site uaf_server:decode_step -n 2 --no-early-stop \
            --port 30127 --timeout 60s --client "$SAMPLE --client --port 30127 --requests 3" -o "$O/done-diag" -- \
            $SAMPLE --port 30127 --device $DEVICE | tail -3
        for t in $(ls -d "$O"/done-diag/trial-*-caching-off "$O"/done-diag/trial-*-release 2>/dev/null); do
            grep -q '"outcome": "crash"' "$t/result.json" || continue
            echo "--- TRIAGE $(basename "$t")"
            timeout 60 $FK triage "$t" | grep -E "^Decisive finding|^\*\*" | head -3 | sed 's/^/  /'
            for x in "$t"/cores/*.txt; do
                [ -f "$x" ] || continue
                cp "$x" "$O/done-transcripts/diag-$(basename "$t")-$(basename "$x")"
                grep -E '^(\*>|=>)|^(errorpc|pc) ' "$x" | head -4 | sed 's/^/  SASS /'
                grep -E '^R[0-9]+ ' "$x" | awk '{printf "%s=%s ", $1, $2} END {print ""}' | sed 's/^/  REGS /'
                grep -E '^ +0x[0-9a-f]+ <gather_kernel\+[0-9]+>:' "$x" | head -16 | sed 's/^/  DISASM /'
            done
        done
    else
        stamp "done: no time left for the caching-off / release diagnosis"
    fi
    ;; esac

case "$what" in diag)    # not in "all": the rings the done run could not bring back, in one tarball
    # ARMS and ROUNDS default to issue 34's diagnosis (2 rounds of poison, release and caching-off);
    # DEVICE=cpu ARMS=caching-off ROUNDS=1 is how tests/test_amplify_diag_mode.py runs it here
    ARMS=${ARMS:-poison release caching-off}
    ROUNDS=${ROUNDS:-2}
    arms=""; for a in $ARMS; do arms="$arms --arm $a"; done
    rm -rf "$O/diag" "$O/amplify-diag.tgz"
    stamp "diag: plain vs$arms, $ROUNDS round(s) (--no-early-stop), every crash triaged, one tarball"
    timeout 400 $FK amplify run $arms --site uaf_server:decode_step -n "$ROUNDS" --no-early-stop --port 30128 \
        --timeout 60s --client "$SAMPLE --client --port 30128 --requests 3" -o "$O/diag" -- \
        $SAMPLE --port 30128 --device $DEVICE
    echo "amplify rc=$?"
    [ -f "$O/diag/amplify-report.md" ] || $FK amplify report "$O/diag" -o "$O/diag/amplify-report.md"
    [ -f "$O/diag/amplify-report.json" ] || $FK amplify report "$O/diag" -f json -o "$O/diag/amplify-report.json"
    summary "$O/diag"
    for t in $(ls -d "$O"/diag/trial-* 2>/dev/null); do
        grep -q '"outcome": "crash"' "$t/result.json" 2>/dev/null || continue
        echo "--- TRIAGE $(basename "$t")"
        # a trial keeps its cores but no transcript: saved beside each core as a capture does (the tarball
        # carries the transcripts, not the 80 MB cores), and triage reads the saved one
        timeout 120 $PY scripts/save_core_transcripts.py "$t" | sed 's/^/  /'
        timeout 90 $FK triage "$t" -o "$t/triage.md" >/dev/null 2>&1 || echo "  triage rc=$?"
        grep -E "^Decisive finding|^\*\*(certain|likely|candidate|unknown)\*\*|^\*\*(freed|live|past-end|none|no-map|not-an-address)\*\*" \
            "$t/triage.md" 2>/dev/null | head -6 | cut -c1-600 | sed 's/^/  /'
        for x in "$t"/cores/*.txt; do
            [ -f "$x" ] || continue
            grep -E '^(\*>|=>)' "$x" | head -2 | sed 's/^/  SASS /'
            grep -E '^R[0-9]+ ' "$x" | awk '{printf "%s=%s ", $1, $2} END {print ""}' | sed 's/^/  REGS /'
        done
    done
    stamp "diag: the tarball"
    $PY scripts/amplify_diag_pack.py "$O/diag" "$O/amplify-diag.tgz" --limit-mib 15
    echo "pack rc=$?"
    ls -la "$O/amplify-diag.tgz" 2>&1
    ;; esac

case "$what" in all|hold)
    stamp "hold: the table reused on every trial (--reuse-rate 1); hold-back at decode_step, at most 5 rounds"
    rm -rf "$O/hold"
    $FK amplify run --arm hold-back --site uaf_server:decode_step -n 5 --port 30124 --timeout 120s \
        --client "$SAMPLE --client --port 30124 --requests 3" -o "$O/hold" -- \
        $SAMPLE --port 30124 --device $DEVICE --reuse-rate 1
    echo "amplify rc=$?"
    summary "$O/hold"
    first=$(ls -d "$O"/hold/trial-*-hold-back 2>/dev/null | head -1)
    [ -n "$first" ] && headers "$first" ;; esac

case "$what" in all|nochange)
    stamp "nochange: the sample without its bug, 20 requests, plain / poison / hold-back: checksums and time"
    rm -rf "$O/nochange"; mkdir -p "$O/nochange"
    reqs=$($PY -c "import json; print(''.join(json.dumps({'id': i}) + chr(10) for i in range(20)), end='')")
    for mode in plain poison hold; do
        case $mode in plain) extra="";; poison) extra="FAULTKIT_AMPLIFY_POISON=0x7f";; hold) extra="FAULTKIT_AMPLIFY_HOLD=uaf_server:decode_step";; esac
        s=$(date +%s.%N)
        printf "%s" "$reqs" | env $extra PYTHONPATH="$PWD/faultkit/agent/site" FAULTKIT_AGENT_DIR="$O/nochange/$mode/agent" \
            $PY scripts/uaf_server.py --worker --device $DEVICE --no-bug > "$O/nochange/$mode.out" 2> "$O/nochange/$mode.err"
        rc=$?
        e=$(date +%s.%N)
        echo "NOCHANGE $mode rc=$rc seconds=$($PY -c "print(round($e - $s, 2))") last=$(tail -1 "$O/nochange/$mode.out")"
        headers "$O/nochange/$mode" | head -3
    done
    cmp -s "$O/nochange/plain.out" "$O/nochange/poison.out" && echo "NOCHANGE poison: identical checksums" || echo "NOCHANGE poison: CHECKSUMS DIFFER"
    cmp -s "$O/nochange/plain.out" "$O/nochange/hold.out" && echo "NOCHANGE hold: identical checksums" || echo "NOCHANGE hold: CHECKSUMS DIFFER"
    ;; esac
stamp "done; folders under $O:"; ls "$O"
