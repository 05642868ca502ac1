"""One tarball of an amplify run's crashed trials, small enough to come back from the device machine
(scripts/live_amplify_nvidia.sh diag; issue 34's rings, which the `done` run could not bring back: a
ring is allocated in full, 64 MiB on the H200, and files over 4 MiB stay on the machine).

    python3 scripts/amplify_diag_pack.py RUN_FOLDER OUT.tgz [--limit-mib 15]

Kept: the run's amplify.json, plan.json, rounds.json and amplify-report.{json,md}; for each crashed
trial (whatever its arm) its result.json, server.log and server.times.tsv (the fault line and its
arrival stamps: the fault's time), kernel.log, the agent's headers, site tables and stack dumps,
each allocation ring CUT to its header and its whole records (faultkit.agent.ring.cut: the never
written slots left off), the cores' debugger transcripts (cores/*.txt) and triage.md where the
script wrote one. Left out: the cores themselves (80 MB each), environ.json, client logs, and the
trials that did not crash. PACK.tsv in the tarball lists every ring cut (bytes before and after,
records kept, torn). Exits 1 when the tarball would pass the limit (it is then not written).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tarfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from faultkit.agent import files as agent_files  # noqa: E402
from faultkit.agent import ring  # noqa: E402

RUN_FILES = ("amplify.json", "plan.json", "rounds.json", "amplify-report.json", "amplify-report.md")
TRIAL_FILES = ("result.json", "server.log", "server.times.tsv", "kernel.log", "triage.md")
AGENT_KINDS = (agent_files.HEADER, agent_files.SITES, agent_files.STACKS)


def crashed_trials(run: Path) -> list[Path]:
    out = []
    for r in sorted(run.glob("trial-*/result.json")):
        try:
            if json.loads(r.read_text()).get("outcome") == "crash":
                out.append(r.parent)
        except (OSError, ValueError):
            continue
    return out


def members(run: Path) -> tuple[list[tuple[str, bytes]], list[str]]:
    """(name in the tarball, bytes) of everything kept, and PACK.tsv's rows."""
    top = run.name
    out: list[tuple[str, bytes]] = []
    rows = ["file\tbytes\tcut_bytes\trecords\ttorn"]
    for n in RUN_FILES:
        if (run / n).is_file():
            out.append((f"{top}/{n}", (run / n).read_bytes()))
    for t in crashed_trials(run):
        base = f"{top}/{t.name}"
        for n in TRIAL_FILES:
            if (t / n).is_file():
                out.append((f"{base}/{n}", (t / n).read_bytes()))
        for f in sorted((t / agent_files.DIR).glob("*")) if (t / agent_files.DIR).is_dir() else []:
            kind = agent_files.split(f.name)
            if kind is None or not f.is_file():
                continue
            if kind[1] in AGENT_KINDS:
                out.append((f"{base}/{agent_files.DIR}/{f.name}", f.read_bytes()))
            elif kind[1] in (agent_files.ALLOC_RING, agent_files.LAUNCH_RING):
                data = f.read_bytes()
                try:
                    small, kept, torn = ring.cut(data)
                except ValueError as exc:        # said in PACK.tsv, the rest still packed
                    rows.append(f"{base}/{agent_files.DIR}/{f.name}\t{len(data)}\t-\t-\t-\tnot packed: {exc}")
                    continue
                out.append((f"{base}/{agent_files.DIR}/{f.name}", small))
                rows.append(f"{base}/{agent_files.DIR}/{f.name}\t{len(data)}\t{len(small)}\t{kept}\t{torn}")
        for f in sorted((t / "cores").glob("*.txt")) if (t / "cores").is_dir() else []:
            out.append((f"{base}/cores/{f.name}", f.read_bytes()))
    return out, rows


def pack(run: Path, dest: Path, limit: int) -> tuple[int, int, list[str]]:
    """Writes the tarball; returns (its size, members, PACK.tsv rows). Raises OverflowError past `limit`."""
    kept, rows = members(run)
    kept.append((f"{run.name}/PACK.tsv", ("\n".join(rows) + "\n").encode()))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in kept:
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    size = buf.tell()
    if size > limit:
        raise OverflowError(f"{size:,} bytes: over the {limit:,}-byte limit; nothing written")
    dest.write_bytes(buf.getvalue())
    return size, len(kept), rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--limit-mib", type=float, default=15)
    a = ap.parse_args(argv)
    if not (a.run / "plan.json").is_file():
        print(f"{a.run}: no plan.json: not an amplify run's folder", file=sys.stderr)
        return 2
    try:
        size, n, rows = pack(a.run, a.out, int(a.limit_mib * (1 << 20)))
    except OverflowError as exc:
        print(f"{a.out}: {exc}", file=sys.stderr)
        return 1
    print(f"PACKED {a.out} {size:,} bytes, {n} files, {len(crashed_trials(a.run))} crashed trial(s)")
    for r in rows[1:]:
        print("RING", r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
