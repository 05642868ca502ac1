"""The evidence seam: one module per evidence source, each exporting one `Source` (source.py).

A source declares its anchors (the literal words of its patterns; `stop=True` on those whose line
means the GPU or the process died, so a capture or a trial ends on it), the markers that recognise
its text, its parse (text -> typed records, pure), the facts those records add to the incident
(`gather`), its claims (the only channel to the verdict: judge/ alone decides) and the report's
JSON keys and sections it owns. Everything that asks "which sources are there" reads REGISTRY:
kind detection (`detect_kinds`), the capture's and trials' fault words (`stop_words`, read by
fault_lines.py), the order of triage's parsing and of the claims handed to the judge.

Adding a source (a new producer):
1. Write `sources/<name>.py` exporting `SOURCE = Source(...)`: its markers and anchors (stop words
   tagged), its parse (delegate to a parser in ingest/ that declares its patterns' anchors with
   `ingest.prefilter.anchored`), its gather and its claims (a `Claim` per say, with a kind of
   `judge.claims.BASES`; add a row there where the kind is new).
2. Add it to REGISTRY below, where its claims should break ties (what a tool watched first).
3. Its tests, against real evidence (../shared/corpus) where there is some. Nothing else changes:
   no second list of words, no edit to triage's order or to the judge.
"""

from __future__ import annotations

from typing import Any

from ..analyze.incident import Incident
from ..ingest.text import ANSI
from ..judge import Claim
from ..model import Fault
from . import (agent, capture, cores, debugger, kernel_log, kernel_mentions, runtime_log, sanitizer, sanitizer_findings,
               stacks, traces)
from .source import Anchor, Setting, Source, TextInput

# In the order their claims are handed to the judge, which is the order ties are broken: what a
# tool watched first (a sanitizer, a debugger), then what a producer printed, then what was inferred.
REGISTRY: tuple[Source, ...] = (sanitizer.SOURCE, sanitizer_findings.SOURCE, debugger.SOURCE, runtime_log.SOURCE,
                                kernel_log.SOURCE, traces.SOURCE, cores.SOURCE, stacks.SOURCE, agent.SOURCE, capture.SOURCE,
                                kernel_mentions.SOURCE)

# A text file in which no log's markers are found is read as the target's output, unless it is a
# kernel log (whose lines the runtime log's parser would only misread).
FALLBACK, UNLESS = runtime_log.SOURCE.kind, kernel_log.SOURCE.kind


def detect_kinds(text: str) -> set[str]:
    """Kinds of evidence in a text file, decided from its content, not its name. A file may hold
    several (a pasted issue with both the server's stderr and its dmesg)."""
    sample = text if len(text) < 4_000_000 else text[:2_000_000] + text[-2_000_000:]
    if "\x1b" in sample:
        sample = ANSI.sub("", sample)
    kinds = {s.kind for s in REGISTRY if s.markers is not None and s.markers.search(sample)}
    if UNLESS not in kinds and kinds != {stacks.SOURCE.kind}:     # a py-spy dump file is no server output
        kinds.add(FALLBACK)
    return kinds


def read(inc: Incident, text: TextInput) -> dict[str, Any]:
    """Every source that reads a text of these kinds parses it and gathers its records into the
    incident; returns each one's records by source name (a debugger's transcript is judged on its own)."""
    out: dict[str, Any] = {}
    for s in REGISTRY:
        if s.parse is not None and s.reads & text.kinds:
            out[s.name] = records = s.parse(text)
            if s.gather is not None:
                s.gather(inc, records, text)
    return out


def faults(inc: Incident) -> list[Fault]:
    """The fault records each source states by itself (the logs' faults are matched across the
    runtime and the kernel log first: analyze/faults.py)."""
    return [f for s in REGISTRY if s.faults is not None for f in s.faults(inc)]


def sections(inc: Incident) -> list[dict]:
    """The report sections of the sources that render themselves, in the registry's order."""
    return [p for s in REGISTRY if s.section is not None for p in [s.section(inc)] if p is not None]


def to_json(inc: Incident) -> dict[str, Any]:
    """The JSON keys of the sources that render themselves."""
    out: dict[str, Any] = {}
    for s in REGISTRY:
        if s.to_json is not None:
            out.update(s.to_json(inc))
    return out


def claims(inc: Incident, setting: Setting) -> list[Claim]:
    """Every source's claims, in the registry's order: the judge's only input."""
    return [c for s in REGISTRY if s.claims is not None for c in s.claims(inc, setting)]


def stop_words() -> tuple[str, ...]:
    """Every source's words whose line means the GPU or the process died."""
    return tuple(dict.fromkeys(w for s in REGISTRY for w in s.stop_words))


__all__ = ["Anchor", "REGISTRY", "Setting", "Source", "TextInput", "claims", "detect_kinds", "faults", "read", "sections",
           "stop_words", "to_json"]
