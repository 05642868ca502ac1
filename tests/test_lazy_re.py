"""faultkit/lazy_re.py: the parsers' patterns compile at their first use, and otherwise behave as
re's compiled patterns (issue #35: a text triage's start-up).

What the laziness could break, each checked here: a bad pattern now fails at its first use instead
of at import (every lazy pattern of the package is compiled below); a module that touches a
pattern's compiled side at import loses the saving (a fresh interpreter imports every lazy module
and counts compiled patterns); `m.re` is the compiled pattern, so `m.re is PAT` is never true (the
source of every lazy module is read for it); re's module functions get a lazy pattern.
"""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import re
import subprocess
import sys

import pytest

import faultkit
from faultkit import lazy_re
from faultkit.lazy_re import LazyPattern
from tests.conftest import ROOT


def _lazy_modules() -> list[str]:
    """Every faultkit module that takes its `re` from lazy_re, found from the source (not a list)."""
    out = []
    for info in pkgutil.walk_packages(faultkit.__path__, "faultkit."):
        spec = importlib.util.find_spec(info.name)
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            continue
        with open(spec.origin, encoding="utf-8") as fh:
            if re.search(r"^from \.+ import lazy_re as re\b", fh.read(), re.M):
                out.append(info.name)
    return out


LAZY = _lazy_modules()


def test_the_parsers_use_it():
    # the modules whose patterns were most of the start-up's compiling (importtime, issue #35)
    assert {"faultkit.ingest.runtime_log", "faultkit.ingest.kernel_log", "faultkit.ingest.debugger",
            "faultkit.analyze.waits", "faultkit.redact"} <= set(LAZY)


def test_every_lazy_pattern_of_the_package_compiles():
    for name in LAZY:
        importlib.import_module(name)
    assert len(lazy_re.MADE) > 200          # the parsers define a few hundred
    bad = []
    for p in lazy_re.MADE:
        try:
            p.compiled()
        except re.error as exc:
            bad.append(f"{p.pattern!r}: {exc}")
    assert not bad, bad


def test_importing_the_lazy_modules_compiles_none_of_their_patterns():
    """In a fresh interpreter: a module that asked a pattern for its compiled side at import (its
    .flags, .groupindex, a match at module level) would compile it there and lose the saving."""
    code = (f"import importlib, json\nfrom faultkit import lazy_re\n"
            f"for m in {LAZY!r}: importlib.import_module(m)\n"
            f"print(json.dumps([len(lazy_re.MADE), [p.pattern for p in lazy_re.MADE if p.is_compiled]]))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    made, compiled = json.loads(p.stdout.splitlines()[-1])
    assert made > 200 and compiled == [], compiled


def test_no_lazy_module_compares_a_match_s_pattern_by_identity():
    # `m.re` is the compiled pattern, never the module's LazyPattern: `m.re == PAT` is right
    offenders = []
    for name in LAZY:
        path = importlib.util.find_spec(name).origin
        with open(path, encoding="utf-8") as fh:
            for no, line in enumerate(fh, 1):
                if re.search(r"\.re\s+is\b|\bis\s+(?:not\s+)?\w+\.re\b", line.split("#")[0]):
                    offenders.append(f"{path}:{no}: {line.strip()}")
    assert not offenders, offenders


def test_a_lazy_pattern_is_compiled_at_its_first_use_and_then_answers_as_re_does():
    p = lazy_re.compile(r"node-(?P<node>\d+)", re.I)
    assert not p.is_compiled and p.pattern == r"node-(?P<node>\d+)"
    m = p.search("Memory access fault by GPU NODE-12 on address 0x1000")
    assert p.is_compiled and m["node"] == "12"
    real = re.compile(r"node-(?P<node>\d+)", re.I)
    assert p.flags == real.flags and p.groups == 1 and p.groupindex == {"node": 1}
    text = "node-1 node-22 x"
    assert p.findall(text) == ["1", "22"] and p.sub("N", text) == "N N x"
    assert [x.span() for x in p.finditer(text)] == [(0, 6), (7, 14)]
    assert p.fullmatch("node-3")["node"] == "3" and p.match("x node-1") is None
    # a match's pattern is the compiled one; it equals the lazy one (what the parsers compare)
    assert m.re == p and p == m.re and m.re in (lazy_re.compile("other"), p)
    assert p == lazy_re.compile(r"node-(?P<node>\d+)", re.I) and p != lazy_re.compile(r"node-(?P<node>\d+)")
    assert hash(p) == hash(lazy_re.compile(r"node-(?P<node>\d+)", re.I))


def test_re_s_module_functions_take_a_lazy_pattern():
    p = lazy_re.compile(r"0x[0-9a-f]+")
    assert lazy_re.sub(p, "ADDR", "at 0x7f00 and 0x10") == "at ADDR and ADDR"
    assert lazy_re.findall(p, "0x1 0x2") == ["0x1", "0x2"]
    assert lazy_re.search(p, "x 0xab")[0] == "0xab" and lazy_re.match(p, "0xab y")[0] == "0xab"
    assert lazy_re.split(p, "a0x1 b") == ["a", " b"] and lazy_re.fullmatch(p, "0x1")
    assert [m[0] for m in lazy_re.finditer(p, "0x1 0x2")] == ["0x1", "0x2"]
    assert lazy_re.compile(p) is p and lazy_re.M == re.M and lazy_re.escape("a.b") == re.escape("a.b")


def test_a_bad_pattern_raises_re_s_error_at_its_first_use():
    p = lazy_re.compile(r"(unclosed")
    with pytest.raises(re.error):
        p.search("x")
    assert isinstance(p, LazyPattern) and lazy_re.is_pattern(p) and lazy_re.is_pattern(re.compile("x"))
