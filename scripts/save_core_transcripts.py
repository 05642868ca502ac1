"""Open each GPU core of trial folders in its debugger and save the transcript beside it, as a capture
does (`cores/<core>.<debugger>.txt`, faultkit.core_debugger.open_core): a trial of `faultkit trials` /
`amplify` keeps its cores but no transcript, and triage of a folder that is not a capture opens a core
in memory only, so the H200's `done` run brought back no transcript (its cores, 80 MB each, stay on
the machine). Used by scripts/live_amplify_nvidia.sh diag before it triages and packs.

    python3 scripts/save_core_transcripts.py TRIAL_FOLDER... [--debugger PATH]

Prints one line per core: SAVED <transcript> (<seconds> s), KEPT <transcript> (already there), or
NOT OPENED <core>: <why>. Host cores and files that are not cores are passed over.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from faultkit import layout  # noqa: E402
from faultkit.capture.coredump import may_be_core  # noqa: E402
from faultkit.core_debugger import debugger_for, open_core  # noqa: E402
from faultkit.ingest.core_file import HOST, inspect_core  # noqa: E402


def save(trial: Path, debugger: str | None) -> list[str]:
    lines = []
    cores = trial / layout.CORES_DIR
    for path in sorted(cores.iterdir()) if cores.is_dir() else []:
        if not path.is_file() or not may_be_core(path.name):
            continue
        core = inspect_core(path)
        if core is None or core.platform == HOST:
            continue
        saved = sorted(cores.glob(f"{path.name}.*.txt"))
        if saved:
            lines.append(f"KEPT {saved[0]}")
            continue
        tool = debugger_for(core, debugger)
        if tool is None:
            lines.append(f"NOT OPENED {path}: no debugger for a {core.platform} core on PATH")
            continue
        op = open_core(core, tool, save_dir=cores)
        lines.append(f"SAVED {op.transcript_path} ({op.seconds} s)" if op.transcript_path else
                     f"NOT OPENED {path}: {'; '.join(op.problems) or 'no transcript'}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trials", nargs="+", type=Path)
    ap.add_argument("--debugger", help="the debugger binary (default: cuda-gdb / rocgdb on PATH)")
    a = ap.parse_args(argv)
    for t in a.trials:
        for line in save(t, a.debugger):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
