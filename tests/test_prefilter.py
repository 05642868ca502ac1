"""The prefilter keeps every line a parser could use.

Three checks, from the narrowest to the widest: each anchored pattern cannot match without one of
its anchors (proved on the pattern's syntax tree, not on samples); every pattern of a parser module
is declared (anchored, or a continuation read as context); and every corpus file parsed through
its excerpt gives the records the whole file does. The block scanner itself is checked against a
plain line-by-line reference over random files and block sizes."""

from __future__ import annotations

import dataclasses
import io
import random
import re
from pathlib import Path

import pytest

from faultkit.ingest import debugger, kernel_log, prefilter, runtime_log
from faultkit.lazy_re import is_pattern
from faultkit.ingest.text import decode

try:
    import re._constants as C
    import re._parser as P
except ImportError:          # Python 3.10
    import sre_constants as C
    import sre_parse as P

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
MODULES = {prefilter.RUNTIME: runtime_log, prefilter.KERNEL: kernel_log, prefilter.DEBUGGER: debugger}
MAX_SET = 256


def _cross(a: set[str] | None, b: set[str] | None) -> set[str] | None:
    if a is None or b is None or len(a) * len(b) > MAX_SET:
        return None
    return {x + y for x in a for y in b}


def _covered(nodes, good):
    """For a sequence of regex nodes: (exact strings it matches where few, whether every match
    holds a good literal, the literals every match starts with, those it ends with)."""
    run: set[str] = {""}          # literals of the current run of exact nodes
    ok, pre, exact = False, None, {""}
    seen_inexact = False
    for op, av in nodes:
        ex, sub_ok, npre, nsuf = _node(op, av, good)
        ok = ok or sub_ok
        if ex is not None and (joined := _cross(run, ex)) is not None:
            run = joined
            exact = _cross(exact, ex) if exact is not None else None
            continue
        # the run ends here: with the next node's leading literals it is one required piece
        piece = _cross(run, npre if npre is not None else {""})
        for cand in (piece, run):
            if cand and "" not in cand and good(cand):
                ok = True
        if not seen_inexact:
            pre = piece if piece is not None else run
        seen_inexact, exact = True, None
        run = set(ex) if ex is not None else (set(nsuf) if nsuf else {""})
    if run and "" not in run and good(run):
        ok = True
    if not seen_inexact:
        pre = run
    return exact, ok, pre, run


def _node(op, av, good):
    if op is C.LITERAL:
        return {chr(av)}, False, None, None
    if op is C.AT or op in (C.ASSERT, C.ASSERT_NOT):
        return {""}, False, None, None   # zero-width: the literals on both sides stay adjacent
    if op is C.IN:
        chars = set()
        for iop, iav in av:
            if iop is C.LITERAL:
                chars.add(chr(iav))
            elif iop is C.RANGE and iav[1] - iav[0] < 16:
                chars |= {chr(c) for c in range(iav[0], iav[1] + 1)}
            else:
                return None, False, None, None
        return chars, False, None, None
    if op is C.SUBPATTERN:
        return _covered(av[-1], good)
    if op is C.BRANCH:
        parts = [_covered(b, good) for b in av[1]]
        exact = set().union(*(p[0] for p in parts)) if all(p[0] is not None for p in parts) else None
        ok = all(p[1] for p in parts)
        pre = set().union(*(p[2] for p in parts)) if all(p[2] is not None for p in parts) else None
        suf = set().union(*(p[3] for p in parts)) if all(p[3] is not None for p in parts) else None
        small = lambda x: x if x is not None and len(x) <= MAX_SET else None  # noqa: E731
        return small(exact), ok, small(pre), small(suf)
    if op in (C.MAX_REPEAT, C.MIN_REPEAT, getattr(C, "POSSESSIVE_REPEAT", None)):
        lo, hi, body = av
        ex, ok, pre, suf = _covered(body, good)
        if lo == 0:
            return ({""} | ex if ex is not None and hi == 1 else None), False, None, None
        if lo == hi == 1:
            return ex, ok, pre, suf
        return None, ok, pre, suf
    return None, False, None, None


def covered(pattern: re.Pattern, anchors) -> bool:
    good = lambda lits: all(any(a in s for a in anchors) for s in lits)  # noqa: E731
    tree = P.parse(pattern.pattern, pattern.flags)
    return _covered(list(tree), good)[1]


def test_checker_tells_a_missing_anchor():
    assert covered(re.compile(r"(?:HIP|CUDA) error: \w+"), ["HIP error: ", "CUDA error: "])
    assert not covered(re.compile(r"(?:HIP|CUDA|ROCm) error: \w+"), ["HIP error: ", "CUDA error: "])
    assert not covered(re.compile(r"(?:Memory access fault)?x"), ["Memory access fault"])
    assert covered(re.compile(r"[Aa]borting with"), ["borting with"])


@pytest.mark.parametrize("guard", [g for g in prefilter.GUARDS if g.pattern is not None],
                         ids=lambda g: f"{g.reader}:{g.pattern.pattern[:50]}")
def test_every_match_of_an_anchored_pattern_holds_an_anchor(guard):
    assert covered(guard.pattern, guard.anchors), \
        f"{guard.pattern.pattern!r} can match a line without any of {guard.anchors}"


def _module_patterns(module):
    for name, value in vars(module).items():
        if name.startswith("__"):
            continue
        items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else [value]
        for item in items:
            for x in (item if isinstance(item, tuple) else (item,)):
                if is_pattern(x):       # the parsers' patterns compile at first use (faultkit/lazy_re.py)
                    yield name, x


@pytest.mark.parametrize("reader", MODULES)
def test_every_pattern_of_a_parser_is_declared(reader):
    declared = {id(g.pattern) for g in prefilter.GUARDS if g.reader == reader} | prefilter.CONTINUATIONS.get(reader,
                                                                                                           set())
    missing = sorted({name for name, p in _module_patterns(MODULES[reader]) if id(p) not in declared}
                     - {"MAY_MATTER"})
    assert not missing, (f"patterns of {MODULES[reader].__name__} without anchors: {missing}; declare them with "
                         f"prefilter.anchored(...) or prefilter.continuation(...) next to the pattern")


def _records(log) -> dict:
    d = dataclasses.asdict(log)
    d.pop("problems", None)
    return d


def _excerpt_of(data: bytes):
    sc = prefilter.scan(io.BytesIO(data), "x")
    text, _ = decode(sc.data, "x")
    return prefilter.excerpt(text, sc.stretches, sc.lines)


def _corpus_files():
    if not CORPUS.is_dir():
        return []
    return sorted(p for p in CORPUS.rglob("*") if p.is_file() and p.suffix in (".txt", ".log", ".md")
                  and p.stat().st_size < 4 << 20)


PARSERS = {"runtime": runtime_log.parse_runtime_log, "kernel": kernel_log.parse_kernel_log,
           "debugger": debugger.parse_debugger}


@pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpus is absent")
@pytest.mark.parametrize("parser", PARSERS)
def test_every_corpus_file_read_through_its_excerpt_gives_the_same_records(parser):
    parse = PARSERS[parser]
    differ = []
    for path in _corpus_files():
        data = path.read_bytes()
        whole, _ = decode(data, path.name)
        if _records(parse(whole, path.name)) != _records(parse(_excerpt_of(data), path.name)):
            differ.append(str(path.relative_to(CORPUS)))
    assert not differ, f"{parser}: the excerpt loses records of {differ}"


def _reference(data: bytes):
    pattern, after_of = prefilter._scanner()
    lines = data.split(b"\n") if data else []
    if data.endswith(b"\n"):
        lines.pop()
    want = [False] * len(lines)
    for i, line in enumerate(lines):
        for m in pattern.finditer(line):
            a = after_of.get(m.group(0)) or after_of.get(m.group(0).lower(), prefilter.AFTER)
            for k in range(max(0, i - prefilter.BEFORE), min(len(lines), i + a + 1)):
                want[k] = True
    return [(i + 1, lines[i]) for i in range(len(lines)) if want[i]], len(lines)


def _kept(data: bytes):
    sc = prefilter.scan(io.BytesIO(data), "x")
    e = prefilter.excerpt(sc.data.decode(), sc.stretches, sc.lines)
    out, hint = [], 0
    for idx, line in enumerate(sc.data.split(b"\n") if sc.stretches else []):
        no, hint = e.line_no(idx, hint)
        out.append((no, line))
    return out, sc.lines


def test_block_scanner_keeps_the_lines_a_line_by_line_reading_would(monkeypatch):
    rng = random.Random(28)
    shapes = [b"Memory access fault by GPU node-1 on address 0x0.", b"Traceback (most recent call last):",
              b"INFO decode batch #queue-req: 0", b"", b"x" * 40]
    for trial in range(600):
        block = rng.choice([7, 16, 64, 300, 1 << 20])
        monkeypatch.setattr(prefilter, "BLOCK", block)
        lines = [rng.choices(shapes, weights=[2, 1, 40, 10, 20])[0] for _ in range(rng.randint(0, 150))]
        data = b"\n".join(lines) + (b"\n" if rng.random() < 0.5 else b"")
        assert _kept(data) == _reference(data), f"trial {trial}, block {block}"


def test_big_log_excerpt_holds_the_fault_at_its_file_line():
    filler = b"[2026-11-20 10:17:42 TP0] Decode batch. #running-req: 12, cuda graph: True, #queue-req: 0\n"
    fault = b"Memory access fault by GPU node-2 (Agent handle: 0x5) on address 0x7f00. Reason: Unknown.\n"
    data = filler * 200_000 + fault + filler * 1000
    ex = _excerpt_of(data)
    log = runtime_log.parse_runtime_log(ex, "big.log")
    assert [(f.kind, f.origin.line, f.address) for f in log.faults] == [("vm-fault", 200_001, 0x7f00)]
    assert len(ex) < 64 * len(filler)          # the filler is not held
