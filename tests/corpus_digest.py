"""What the corpus snapshot records of each triage: kinds, faults, stops and the verdict, in one
line each (shared by tests/test_corpus_values.py and scripts/snapshot_corpus_values.py)."""

from __future__ import annotations

from pathlib import Path

SNAPSHOT = Path(__file__).parent / "data" / "corpus_snapshot.json"
FOLDERS = ("dmesg", "runtime", "gdb", "gdb/doc_examples", "cuda")


def corpus_text_files(corpus: Path) -> list[str]:
    return sorted(str(p.relative_to(corpus)) for sub in FOLDERS for p in (corpus / sub).glob("*.txt"))


def digest(doc: dict) -> dict:
    faults = []
    for f in doc["faults"]:
        t = [f["kind"]]
        if f["address"]:
            t.append(f["address"])
        if f["pid"] is not None:
            t.append(f"pid={f['pid']}")
        if f["detail"].get("client_name"):
            t.append(f"client={f['detail']['client_name']}")
        if f.get("engine"):
            t.append(f"engine={f['engine']}")
        if f["code"]:
            t.append(f"code={f['code']}")
        faults.append(" ".join(t))
    stops = [f"{s['kind']}:{s['signal'] or s['exception'] or ''}:{'gpu' if s['gpu'] else 'host'}:"
             f"{s['kernel'] or s['function'] or ''}" for s in doc["debugger_stops"]]
    v = doc["verdict"]
    return {"kinds": sorted({k for i in doc["inputs"] for k in i["kinds"]}), "faults": faults, "stops": stops,
            "verdict": [v["level"], v["kernel"] or (v["candidates"][0]["kernel"] if v["candidates"] else None)]}
