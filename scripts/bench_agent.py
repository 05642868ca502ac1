"""What the in-process agent costs a decode loop: bare, the default agent (segments) and
--alloc-history (every block), side by side in one run, on a random-weight 6-layer GPT-2
(transformers, nothing downloaded), batch 4.

- eager: 160 new tokens with the KV cache, the worst case for allocation traffic (hundreds of
  tensor allocations per step);
- graph: one forward over a fixed 64-token window captured in a CUDA graph and replayed (a
  CUDA-graph server allocates almost nothing per step).
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


def child(reps: int) -> None:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=6)).cuda().eval()
    out = {}
    with torch.no_grad():
        prompt = torch.randint(0, 50000, (4, 16), device="cuda")
        rates = []
        for _ in range(reps + 1):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            o = model(prompt, use_cache=True)
            past, tok = o.past_key_values, o.logits[:, -1:].argmax(-1)
            for _ in range(160):
                o = model(tok, past_key_values=past, use_cache=True)
                past, tok = o.past_key_values, o.logits[:, -1:].argmax(-1)
            torch.cuda.synchronize()
            rates.append(160 / (time.perf_counter() - t0))
        out["eager"] = statistics.median(rates[1:])
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
        rates = []
        for _ in range(reps + 1):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(300):
                g.replay()
            torch.cuda.synchronize()
            rates.append(300 / (time.perf_counter() - t0))
        out["graph"] = statistics.median(rates[1:])
    print("RESULT " + json.dumps(out), flush=True)


def run(cfg: str, out: Path, reps: int) -> dict:
    from faultkit.capture.agent import agent_env
    env = dict(os.environ)
    d = Path(tempfile.mkdtemp(dir=out, prefix=cfg + "-"))
    if cfg != "bare":
        env.update(agent_env(d, cfg == "blocks", {}))
    p = subprocess.run([sys.executable, __file__, "--child", "--reps", str(reps)], env=env, capture_output=True,
                       text=True, timeout=600)
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
    res = json.loads(line[7:]) if line else {"error": p.stderr[-2000:]}
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
    a = ap.parse_args()
    if a.child:
        child(a.reps)
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
    (out / "bench.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
