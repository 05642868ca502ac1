"""Render every corpus file, the sample incidents (traces/) and the recorded live bundles
(tests/data/live_*) to JSON, Markdown and a timeline (trace-event JSON) in a folder outside the
repository, so that a change of behaviour shows as a diff between two runs:
    python scripts/render_all.py OUT_DIR [CORPUS]
    diff -r BEFORE_DIR AFTER_DIR
Each input is triaged in place (no copies: the paths in the output are the same at every run);
cores are not opened (a debugger present on one machine and not another is no change).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from faultkit.export.report import render_json, render_markdown  # noqa: E402
from faultkit.export.timeline import build_timeline, write_json  # noqa: E402
from faultkit.triage import TriageOptions, triage  # noqa: E402


def inputs(corpus: Path) -> list[Path]:
    found = sorted(p for p in corpus.rglob("*") if p.is_file()) if corpus.is_dir() else []
    found += sorted(p for p in (ROOT / "traces").iterdir() if p.is_dir())
    found += sorted(p.parent for p in (ROOT / "tests" / "data").glob("live_*/**/manifest.json"))
    return found


def main() -> None:
    out = Path(sys.argv[1])
    corpus = Path(sys.argv[2]) if len(sys.argv) > 2 else ROOT.parent / "shared" / "corpus"
    for path in inputs(corpus):
        rel = str(path.relative_to(corpus) if path.is_relative_to(corpus) else path.relative_to(ROOT))
        dest = out / rel.replace("/", "__")
        dest.mkdir(parents=True, exist_ok=True)
        try:
            inc = triage([str(path)], TriageOptions(open_cores=False))
            (dest / "report.json").write_text(render_json(inc))
            (dest / "report.md").write_text(render_markdown(inc))
            write_json(build_timeline(inc, None), str(dest / "timeline.json"))
        except Exception as e:  # noqa: BLE001 - a crash is a result to diff too
            (dest / "crash.txt").write_text(f"{type(e).__name__}: {e}\n")
    print(f"rendered into {out}")


if __name__ == "__main__":
    main()
