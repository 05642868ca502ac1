"""The wrap join's junction test in one pass (issue 33 item 8): a paste of many distinct lines of one
width, each a possible terminal cut, normalizes at a fraction of a millisecond a line; and the one-pass
prefilter (find_patterns: Hyperscan over every record pattern and anchor) gives the very text that
trying every pattern gives, on every corpus file pasted through the wraps people paste with."""

from __future__ import annotations

import time

import pytest

from faultkit.ingest import normalize as front
from faultkit.ingest.normalize import normalize

from .paste_transforms import TRANSFORMS
from .test_paste_metamorphic import corpus_texts

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from bench_normalize import paste  # noqa: E402

WRAPS = [t for t in TRANSFORMS if "wrap" in t]


class _AnyMay:
    def may(self, text):
        return None


def fast(text: str) -> str:
    """The front end with its one-pass prefilter (built now, as a long paste has it built)."""
    front.RECORD_PATTERNS.find("")
    front.RECORD_PATTERNS.asked = max(front.RECORD_PATTERNS.asked, front.RECORD_PATTERNS.PAYS)
    front._continues.cache_clear()
    return str(normalize(text))


@pytest.fixture
def every_pattern(monkeypatch):
    """The front end with the prefilter answering "any may": every pattern is tried, as before it."""
    def run(text: str) -> str:
        front.RECORD_PATTERNS.find("")                 # (its table built)
        with monkeypatch.context() as m:
            m.setattr(front.RECORD_PATTERNS, "pre", _AnyMay())
            front._continues.cache_clear()
            try:
                return str(normalize(text))
            finally:
                front._continues.cache_clear()
    return run


def test_the_prefilter_changes_no_join_on_the_corpus(every_pattern):
    texts = corpus_texts()
    if not texts:
        pytest.skip("the shared corpus (../shared/corpus) is not here")
    changed = []
    for _, name, text in texts:
        for t in WRAPS:
            pasted = TRANSFORMS[t](text)
            if fast(pasted) != every_pattern(pasted):
                changed.append(f"{t} {name}")
    assert not changed, changed[:20]


def test_the_prefilter_changes_no_join_on_lines_of_one_width(every_pattern):
    text = paste(300, 100) + "HIP error: an illegal memory access was encountered at the end of a line of one wi\n" \
        "dth\n"
    assert fast(text) == every_pattern(text)


def test_distinct_lines_of_one_width_normalize_fast():
    fast(paste(2, 100))                                 # (the database is built once a paste has asked enough)
    text = paste(3000, 100)
    t = time.process_time()
    out = normalize(text)
    spent = time.process_time() - t
    assert str(out).count("\n") == text.count("\n")      # none of them is a record's rest
    # (every pattern asked one by one took ~2.5 ms a line on this machine: 7 s here)
    assert spent < 3.0, f"{spent:.1f} s for 3000 lines"


def test_the_word_led_table_names_every_word_led_pattern_that_matches():
    # every corpus line (and each with a blank before it): a word-led continuation that matches it is named
    texts = corpus_texts()
    if not texts:
        pytest.skip("the shared corpus (../shared/corpus) is not here")
    front.RECORD_PATTERNS.find("")
    led = [p for p, word in front.RECORD_PATTERNS.conts if word]
    seen = 0
    for _, _, text in texts:
        for line in text.splitlines():
            body = line.lstrip("= ")           # (compute-sanitizer's lines, read without their head)
            for t in (body, "  " + body):
                named = {p for _, p in front.RECORD_PATTERNS.word_led(t)}
                for p in led:
                    if p.search(t):
                        seen += 1
                        assert p in named, (p.pattern[:40], t[:80])
    assert seen > 50
