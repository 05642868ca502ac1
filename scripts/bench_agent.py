"""What the in-process agent costs a decode loop: bare, the default agent (segments) and
--alloc-history (every block), side by side in one run, on a random-weight 6-layer GPT-2
(transformers, nothing downloaded), batch 4.

- eager: 160 new tokens with the KV cache, the worst case for allocation traffic (hundreds of
  tensor allocations per step);
- graph: one forward over a fixed 64-token window captured in a CUDA graph and replayed (a
  CUDA-graph server allocates almost nothing per step).
With --inprocess N, one more process (tracker attached) alternates N eager windows per mode: tracker
off, segments, blocks (the machine's speed drifts by tens of percent between processes).
Each configuration runs in its own process (the agent is placed at interpreter start, as capture
places it), rounds interleaved; the figures are medians of steps/s.

    python3 scripts/bench_agent.py --rounds 3 --out /tmp/bench-agent
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _workloads():
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=6)).cuda().eval()
    prompt = torch.randint(0, 50000, (4, 16), device="cuda")

    def eager() -> float:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        o = model(prompt, use_cache=True)
        past, tok = o.past_key_values, o.logits[:, -1:].argmax(-1)
        for _ in range(160):
            o = model(tok, past_key_values=past, use_cache=True)
            past, tok = o.past_key_values, o.logits[:, -1:].argmax(-1)
        torch.cuda.synchronize()
        return 160 / (time.perf_counter() - t0)
    return eager


def _graph():
    """Built after the eager runs: an eager decode run after a graph capture died silently on the H200."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=6)).cuda().eval()
    window = torch.randint(0, 50000, (4, 64), device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            model(window, use_cache=False)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        model(window, use_cache=False)

    def graph() -> float:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(300):
            g.replay()
        torch.cuda.synchronize()
        return 300 / (time.perf_counter() - t0)
    return graph


def child(reps: int) -> None:
    import torch
    with torch.no_grad():
        eager = _workloads()
        out = {"eager": statistics.median([eager() for _ in range(reps + 1)][1:])}
        graph = _graph()
        out["graph"] = statistics.median([graph() for _ in range(reps + 1)][1:])
    print("RESULT " + json.dumps(out), flush=True)


def inprocess(windows: int) -> None:
    """One process with the tracker attached (--alloc-history): windows alternate between the tracker
    off (its callback returns at once; the resolver thread paused), segments and blocks, so the
    machine's drift between processes (tens of percent) falls on every mode alike. What 'off' still
    pays: torch building each event for an attached tracker."""
    import torch
    with torch.no_grad():
        eager = _workloads()          # starts CUDA: the tracker attaches
        eager()
    rt = sys.modules.get("_faultkit_agent_runtime")
    lib = rt._state.get("lib") if rt else None
    if lib is None:
        print("RESULT " + json.dumps({"error": "the agent's tracker is not attached", "header": rt and rt._state.get("header")}))
        return
    resolver = rt._state.get("resolver")
    modes = {"off": 0, "segments": 1, "blocks": 2}
    rates: dict = {m: {"eager": []} for m in modes}
    with torch.no_grad():
        for w in range(windows):
            for m in (list(modes) if w % 2 == 0 else list(modes)[::-1]):
                lib.fk_set_mode(modes[m])
                if resolver is not None:
                    resolver.paused = m == "off"
                rates[m]["eager"].append(eager())
    lib.fk_set_mode(-1)
    print("RESULT " + json.dumps(rates), flush=True)


def run(cfg: str, out: Path, reps: int, extra: list[str] = ()) -> dict:
    from faultkit.capture.agent import agent_env
    env = dict(os.environ)
    d = Path(tempfile.mkdtemp(dir=out, prefix=cfg + "-"))
    if cfg != "bare":
        env.update(agent_env(d, cfg == "blocks", {}))
    p = subprocess.run([sys.executable, __file__, "--child", "--reps", str(reps), *extra], env=env, capture_output=True,
                       text=True, timeout=600)
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
    res = json.loads(line[7:]) if line else {"error": f"exit {p.returncode}: {p.stderr[-2000:]}"}
    heads = list((d / "agent").glob("*.json"))
    if heads:
        res["agent"] = [json.loads(h.read_text()).get("alloc") for h in heads]
        rings = list((d / "agent").glob("*.alloc.ring"))
        if rings:
            from faultkit.agent import ring
            data = rings[0].read_bytes()
            hdr, _ = ring.read_header(data)
            recs, torn = ring.read_records(data, hdr["capacity"])
            res["ring_records"] = len(recs)
            res["ring_head"] = hdr["head"] if hdr else None
            res["ring_bytes"] = len(data)
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=None)
    ap.add_argument("--inprocess", type=int, default=0, metavar="WINDOWS",
                    help="also the in-process alternation, with this many windows per mode")
    a = ap.parse_args()
    if a.child:
        inprocess(a.inprocess) if a.inprocess else child(a.reps)
        return
    out = Path(a.out or tempfile.mkdtemp(prefix="bench-agent-"))
    out.mkdir(parents=True, exist_ok=True)
    configs = ["bare", "segments", "blocks"]
    results: dict = {c: [] for c in configs}
    for r in range(a.rounds):
        for c in (configs if r % 2 == 0 else configs[::-1]):
            res = run(c, out, a.reps)
            results[c].append(res)
            print(f"round {r} {c}: {json.dumps(res)[:600]}", flush=True)
    print("\n| configuration | eager decode steps/s (median) | vs bare | CUDA-graph steps/s (median) | vs bare |")
    print("|---|---|---|---|---|")
    med = {c: {m: statistics.median([x[m] for x in results[c] if m in x] or [float('nan')]) for m in ("eager", "graph")}
           for c in configs}
    names = {"bare": "bare", "segments": "default agent (segments)", "blocks": "--alloc-history (blocks)"}
    for c in configs:
        print(f"| {names[c]} | {med[c]['eager']:.1f} | {med[c]['eager'] / med['bare']['eager']:.3f} | "
              f"{med[c]['graph']:.1f} | {med[c]['graph'] / med['bare']['graph']:.3f} |")
    if a.inprocess:
        res = run("blocks", out, a.reps, ["--inprocess", str(a.inprocess)])
        results["inprocess"] = res
        if "off" in res:
            print(f"\nIn one process, {a.inprocess} alternating windows per mode (medians, steps/s):")
            print("| tracker | eager decode | vs off |")
            print("|---|---|---|")
            off = statistics.median(res["off"]["eager"])
            for m in ("off", "segments", "blocks"):
                e = statistics.median(res[m]["eager"])
                print(f"| {m} | {e:.1f} | {e / off:.3f} |")
        else:
            print("in-process run failed:", json.dumps(res)[:1500])
    (out / "bench.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
