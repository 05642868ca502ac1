"""What one evidence source declares: its words, how its text is recognised and read, the facts it
adds to the incident, its claims, and where the report shows it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from ..analyze.incident import Incident
from ..ingest.prefilter import GUARDS
from ..judge import Claim
from ..model import Fault


@dataclass(frozen=True)
class Anchor:
    """Literal words that a line of this source contains. `stop`: a line with them means the GPU or
    the process died, so a capture or a trial ends on it."""
    word: str
    stop: bool = False

@dataclass(frozen=True)
class TextInput:
    """One text file as a source reads it."""
    name: str
    text: str
    kinds: frozenset[str]          # every kind the registry recognised in it
    from_core: bool = False        # a debugger's transcript of a GPU core (a fact the caller knows)

@dataclass(frozen=True)
class Setting:
    """What the claims of every source may know about the run besides the incident."""
    rocm_version: str | None = None    # the capture's system record
    ended_by: str | None = None        # how the capture ended (a hang, a timeout, the target's exit)

@dataclass(frozen=True)
class Source:
    """One producer of evidence: what it is and the markers that recognise its text."""
    name: str
    says: str                                        # what it is, in a line (the package's table)
    kind: str | None = None                          # the input kind its markers recognise in a text
    markers: re.Pattern | None = None                # a text holding a match is of `kind`
    anchors: tuple[Anchor, ...] = ()
    reads: frozenset[str] = frozenset()              # kinds of text its parser reads
    parse: Callable[[TextInput], Any] | None = None   # TextInput -> its records (pure)
    gather: Callable[[Incident, Any, TextInput], None] | None = None   # the records' facts into the incident
    faults: Callable[[Incident], list[Fault]] | None = None   # the fault records it states (grouped by the judge)
    claims: Callable[[Incident, Setting], list[Claim]] | None = None  # its say on the verdict: the only channel
    # Where the report shows it. A source that renders itself gives `section` (the parts of one report
    # section: title, paragraphs, bullets, table, code; None where it has nothing to say) and `to_json`
    # (its keys of the JSON report); the others are still drawn by export/report.py under the titles and
    # keys named here.
    section: Callable[[Incident], dict | None] | None = None
    to_json: Callable[[Incident], dict[str, Any]] | None = None
    json_keys: tuple[str, ...] = ()                  # the report's JSON keys it owns
    sections: tuple[str, ...] = ()                   # the report's sections it owns (titles)

    @property
    def stop_words(self) -> tuple[str, ...]:
        return tuple(a.word for a in self.anchors if a.stop)



def anchors(*words: str, stop: bool = False) -> tuple[Anchor, ...]:
    return tuple(Anchor(w, stop) for w in words)


def parser_anchors(reader: str, listed: tuple[Anchor, ...] = ()) -> tuple[Anchor, ...]:
    """The words a parser declared beside its patterns (ingest.prefilter.anchored), not listed yet."""
    have = {a.word for a in listed}
    words = dict.fromkeys(w for g in GUARDS if g.reader == reader for w in g.anchors if w not in have)
    return tuple(Anchor(w) for w in words)
