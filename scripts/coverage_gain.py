"""How many kernels faultkit's text parsers name in the corpus, before and after a change.

    .venv/bin/python scripts/coverage_gain.py [--before main] [--corpus ../shared/corpus] [--files]

Runs the runtime-log, kernel-log and debugger parsers of two faultkit trees over every text file
of the corpus (CSV traces are left out: every row of a trace names a kernel, which says nothing
about reading crash text) and counts the distinct kernel names their records carry, per file, and
the fault and error records they return (faults, host errors, asserts, stops, sanitizer reports, Xids).
"Before" is the faultkit package of a git ref (default `main`), unpacked into a temporary
folder with `git archive`; "after" is this checkout. Each tree runs in its own interpreter, so
the two never share an import.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Run inside the interpreter of one tree: prints {file: {"kernels": [...], "device_functions": [...]}}.
# Fields are read with getattr so that a tree without a newer record type still runs.
PROBE = r"""
import json, lzma, sys
from pathlib import Path
from faultkit.sources import detect_kinds
from faultkit.ingest.runtime_log import parse_runtime_log
from faultkit.ingest.kernel_log import parse_kernel_log
from faultkit.ingest.debugger import parse_debugger
from faultkit.ingest.text import decode

def names(records, attr):
    return [getattr(r, attr, None) for r in records or ()]

out = {}
for path in sorted(Path(sys.argv[1]).rglob("*")):
    if not path.is_file() or path.suffix in (".csv", ".xz", ".py", ".sh", ".cu", ".md") or path.name.endswith(".source.txt"):
        continue
    text, _ = decode(path.read_bytes(), str(path))
    # the corpus's own markup (README: "# source:" lines and "# ---" excerpt marks) is not evidence
    text = "\n".join(l for l in text.splitlines() if not l.startswith(("# source:", "# notes:", "# Format:", "# Version:")))
    kinds = detect_kinds(text)
    kernels, device_functions, errors = set(), set(), 0
    if "runtime-log" in kinds:
        rt = parse_runtime_log(text, path.name)
        errors += sum(len(getattr(rt, g, ())) for g in ("faults", "host_errors", "device_asserts", "driver_exceptions"))
        for group, attr in (("faults", "kernel"), ("dispatches", "kernel"), ("waves", "kernel"),
                            ("driver_exceptions", "kernel"), ("hints", "kernel")):
            kernels.update(n for n in names(getattr(rt, group, ()), attr) if n)
        device_functions.update(n for n in names(getattr(rt, "device_asserts", ()), "function") if n)
    if "debugger" in kinds:
        dbg = parse_debugger(text, path.name)
        errors += len(dbg.stops) + len(dbg.sanitizer) + len(getattr(dbg, "sanitizer_findings", ()))
        kernels.update(s.frame.function for s in dbg.stops if s.gpu and s.frame and s.frame.function)
        kernels.update(s.error_function for s in dbg.stops if getattr(s, "error_function", None))
        for group, attr in (("sanitizer", "kernel"), ("dispatches", "kernel"), ("cuda_kernels", "name"),
                            ("sanitizer_findings", "kernel")):
            kernels.update(n for n in names(getattr(dbg, group, ()), attr) if n)
    if "kernel-log" in kinds:
        kl = parse_kernel_log(text, path.name)      # names no kernel
        errors += len(kl.faults) + len(kl.xids)
    out[str(path.relative_to(sys.argv[1]))] = {"kernels": sorted(kernels), "device_functions": sorted(device_functions),
                                               "errors": errors}
print(json.dumps(out))
"""


def _unpack(ref: str, into: Path) -> Path:
    blob = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "faultkit"], check=True,
                          capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(blob)) as tar:
        tar.extractall(into, filter="data")
    return into


def _probe(tree: Path, corpus: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree))
    run = subprocess.run([sys.executable, "-c", PROBE, str(corpus)], env=env, cwd=tree, capture_output=True,
                         text=True)
    if run.returncode:
        sys.exit(f"the parsers of {tree} failed on the corpus:\n{run.stderr[-2000:]}")
    return json.loads(run.stdout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="main", help="git ref whose faultkit is 'before' (default main)")
    ap.add_argument("--corpus", default=str(ROOT.parent / "shared" / "corpus"))
    ap.add_argument("--files", action="store_true", help="list every file whose count changed")
    args = ap.parse_args(argv)
    corpus = Path(args.corpus).resolve()     # each probe runs in its own tree's folder
    if not corpus.is_dir():
        print(f"corpus not found at {corpus}; see shared/corpus/README.md", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        before = _probe(_unpack(args.before, Path(tmp)), corpus)
    after = _probe(ROOT, corpus)
    totals = {"files": len(after), "before": 0, "after": 0, "files_before": 0, "files_after": 0,
              "device_functions_before": 0, "device_functions_after": 0, "errors_before": 0, "errors_after": 0}
    changed = []
    for name in sorted(after):
        b, a = before.get(name, {"kernels": [], "device_functions": []}), after[name]
        totals["before"] += len(b["kernels"])
        totals["after"] += len(a["kernels"])
        totals["files_before"] += bool(b["kernels"])
        totals["files_after"] += bool(a["kernels"])
        totals["device_functions_before"] += len(b.get("device_functions", []))
        totals["device_functions_after"] += len(a["device_functions"])
        totals["errors_before"] += b.get("errors", 0)
        totals["errors_after"] += a["errors"]
        if b != a:
            changed.append((name, b, a))
    print(f"corpus {corpus}: {totals['files']} text files")
    print(f"kernels named (distinct per file, summed): {args.before} {totals['before']}  ->  this tree "
          f"{totals['after']}")
    print(f"files naming at least one kernel:          {args.before} {totals['files_before']}  ->  this tree "
          f"{totals['files_after']}")
    print(f"device functions named (asserts):          {args.before} {totals['device_functions_before']}  ->  "
          f"this tree {totals['device_functions_after']}")
    print(f"fault/error records (faults, host errors, asserts, stops, sanitizer reports, Xids): {args.before} "
          f"{totals['errors_before']}  ->  this tree {totals['errors_after']}")
    if args.files:
        for name, b, a in changed:
            print(f"  {name}: {b['kernels'] + b.get('device_functions', [])} ({b.get('errors', 0)} records) -> "
                  f"{a['kernels'] + a['device_functions']} ({a['errors']} records)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
