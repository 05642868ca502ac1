"""Benchmark: the paste front end (faultkit.ingest.normalize) on many distinct lines of one width.

Every line of such a paste is a possible terminal cut (its length is the width), so each junction asks
whether a record runs on across it: the case that cost ~1 ms per line while every parser's record
pattern and anchor was asked one by one. Measured beside an anchor, the time Python takes to run one
compiled pattern over every line of the same text (what touching each line costs on this machine), so
the ratio says how many such passes the front end is worth, whatever the machine's speed.

    python scripts/bench_normalize.py [--lines 200000] [--width 100] [--repeat 3]

Prints one JSON line: the medians (CPU seconds) of faultkit and of the anchor, their ratio, and
microseconds per line.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from faultkit.ingest.normalize import normalize  # noqa: E402


def paste(lines: int, width: int) -> str:
    """`lines` distinct lines of exactly `width` characters: a training log's progress lines."""
    out = []
    for i in range(lines):
        s = f"INFO step {i:07d} loss 0.{i % 997:03d} lr 3.0e-4 tokens/s {(i * 7919) % 100000:05d} worker gpu{i % 8} "
        out.append((s + "abcdefghij" * (width // 10 + 1))[:width])
    return "\n".join(out) + "\n"


def anchor(text: str) -> None:
    rx = re.compile(r"step (\d+) loss")
    for line in text.split("\n"):
        rx.search(line)


def timed(fn, text: str) -> float:
    t = time.process_time()
    fn(text)
    return time.process_time() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=200_000)
    ap.add_argument("--width", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    text = paste(a.lines, a.width)
    normalize(paste(2, a.width))             # (the pattern databases are built once, at first use)
    fk = statistics.median(timed(normalize, text) for _ in range(a.repeat))
    base = statistics.median(timed(anchor, text) for _ in range(a.repeat))
    print(json.dumps({"lines": a.lines, "width": a.width, "faultkit_s": round(fk, 3), "anchor_s": round(base, 3),
                      "ratio": round(fk / base, 1) if base else None, "us_per_line": round(fk / a.lines * 1e6, 1)}))


if __name__ == "__main__":
    main()
