"""Did an amplifier reach the processes that run the GPU work? A trial whose amplifier did not is not
counted: its outcome says nothing about the amplifier.

Three kinds of proof, all read from the trial's own folder:
- variables: trials' check in /proc (`result.env`: every GPU process, or every process where none
  opened a GPU, had each variable; a process gone before it could be read is not proof);
- the agent's amplifiers: the header of the process (`agent/<pid>.json`) lists it as armed, in every
  GPU process (where none opened a GPU: in at least one process), and a call-site amplifier was hit
  at one of its sites at least once;
- a framework's flag: it is in the command line of a process of the trial (environ.json).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from .. import layout
from ..agent import files as agent_files
from ..trials.records import TrialResult
from .arms import Amplifier


@dataclass
class Reach:
    ok: bool
    why: str = ""                          # when not: in words
    proof: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"ok": self.ok, "why": self.why, "proof": self.proof}


def _records(tdir: Path) -> list[dict]:
    try:
        data = json.loads((tdir / layout.ENVIRON).read_text())
        return [r for r in data if isinstance(r, dict)] if isinstance(data, list) else []
    except (OSError, ValueError, RecursionError):     # nested past the parser: no records, said by reach
        return []


def agent_headers(tdir: Path) -> dict[int, dict]:
    out = {}
    d = tdir / agent_files.DIR
    try:
        names = sorted(p.name for p in d.iterdir())
    except OSError:
        return out
    for n in names:
        parsed = agent_files.split(n)
        if parsed is None or parsed[1] != agent_files.HEADER:
            continue
        try:
            h = json.loads((d / n).read_text())
        except (OSError, ValueError, RecursionError):
            continue
        if isinstance(h, dict):
            out[parsed[0]] = h
    return out


def check(amp: Amplifier | None, result: TrialResult, tdir: Path) -> Reach:
    proof: list[str] = []
    if result.env.wanted:
        if not result.env.ok:
            if result.env.mismatches:
                m = result.env.mismatches[0]
                return Reach(False, f"variable {m.get('variable')} did not reach pid {m.get('pid')} "
                                    f"({(m.get('cmdline') or '')[:80]})")
            return Reach(False, "no process lived long enough for its environment to be read: not verified")
        proof.append(f"variables verified in /proc of {len(result.env.checked)} {result.env.scope}")
    if amp is None:
        return Reach(True, proof=proof)
    records = _records(tdir)
    if amp.agent:
        headers = agent_headers(tdir)
        gpu = [r["pid"] for r in records if r.get("gpu") and isinstance(r.get("pid"), int)]
        for want in amp.agent:
            having = [pid for pid, h in headers.items() if want in (h.get("armed") or [])]
            if gpu:
                missing = [pid for pid in gpu if pid not in having]
                if missing:
                    return Reach(False, f"the agent did not arm {want} in GPU process {missing[0]}"
                                        + _agent_note(headers.get(missing[0]), want))
            elif not having:
                note = next((_agent_note(h, want) for h in headers.values() if _agent_note(h, want)), "")
                return Reach(False, f"no process of the trial armed {want}" + (note or
                             (" (no process ran the agent)" if not headers else "")))
            proof.append(f"agent armed {want} in pid {', '.join(map(str, having))}")
        if amp.needs_sites:
            hit = {s: n for h in headers.values() for s, n in ((h.get("amplify") or {}).get("hits") or {}).items()
                   if isinstance(n, int) and n > 0}
            if not hit:
                return Reach(False, "the agent armed it, but no chosen call site ran")
            proof.append("sites hit: " + ", ".join(sorted(hit)))
    if amp.flag:
        if not any(amp.flag in (r.get("cmdline") or []) or amp.flag in " ".join(r.get("cmdline") or [])
                   for r in records):
            return Reach(False, f"no process of the trial has {amp.flag} in its command line")
        proof.append(f"{amp.flag} in the server's command line")
    return Reach(True, proof=proof)


def _agent_note(header: dict | None, want: str) -> str:
    if not header:
        return " (it did not run the agent: not Python, or its environment was cleaned)"
    if want == agent_files.ARMED_RELEASE:
        return " (CUDA never started in it: nothing cached to release)" if "torch" in header else \
            " (the process never imported torch)"
    if want == agent_files.ARMED_POISON:
        note = (header.get("amplify_poison") or {}).get("note")
        if note:
            return f" ({note})"
        failed = [f for f in header.get("failures") or [] if isinstance(f, str)]
        if failed:           # the H200's torch hook raised before it could arm anything: say that, not "no CUDA"
            return f" (the agent failed in it: {failed[0]})"
        if "torch" not in header:
            return " (the process never imported torch)"
        return " (CUDA never started in it)"
    return ""
