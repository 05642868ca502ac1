"""faultkit's own regular expressions, compiled once per installation instead of once per run (issue #35).

A text-only triage compiles about 330 patterns (the parsers' record patterns, the prefilter's anchor
sets): about 60 ms of its ~230 ms of CPU, every run. Python keeps no compiled pattern across
processes, but what `re` compiles is a list of integers (the matcher's code) that `_sre.compile`
takes back: this module keeps those lists in one marshal file in the user's cache folder
(private_files.cache_dir(), 0700), keyed by the pattern's text and flags, and rebuilds a pattern from
it in microseconds. The file's name carries the interpreter's bytecode tag and the matcher's MAGIC,
so another Python never reads it; `_sre.compile` validates the code it is given, and any entry that
fails (or a file that does not read) is compiled afresh, as `re.compile` would.

Only patterns that are the program's own text go here (a module's constant, the prefilter's declared
anchors): never one built from the user's data, which must not land on disk (callers choose: see
lazy_re). tests/test_re_cache.py checks that a rebuilt pattern equals `re.compile`'s, that a second
run compiles none of them, and that a broken file changes no result.
"""

from __future__ import annotations

import atexit
import marshal
import os
import re
import sys

from . import lazy_re
from .private_files import cache_dir, write_private

try:                                  # CPython's matcher and the compiler steps `re.compile` runs
    import _sre
    from re import _compiler, _parser
    TAG = f"{sys.implementation.cache_tag}-{_sre.MAGIC}-{_sre.CODESIZE}"
except (ImportError, AttributeError):  # pragma: no cover - another implementation: compile each run
    TAG = None

# past this (the patterns of many faultkit versions, ~0.5 MB each), the file keeps this run's alone:
# reading it costs every start ~1.6 ms per MB
MAX_BYTES = 2 << 20

# (pattern text, flags) -> (flags, code, groups - 1, groupindex, indexgroup): _sre.compile's arguments
_entries: dict | None = None
_used: set = set()
STATS = {"reused": 0, "compiled": 0}   # this run's (tests count them)


def path() -> str | None:
    """The cache file, or None where there is no cache folder to be had (no home, read-only)."""
    if TAG is None:
        return None
    try:
        return os.path.join(cache_dir(), f"re-{TAG}.marshal")
    except OSError:
        return None


def _load() -> dict:
    global _entries
    if _entries is None:
        _entries = {}
        p = path()
        try:
            with open(p, "rb") as f:                  # type: ignore[arg-type]
                data = marshal.loads(f.read())        # (marshal.load(f) reads in small steps: 50x slower)
            if isinstance(data, dict):
                _entries = data
        except (OSError, TypeError, ValueError, EOFError):
            pass                                      # none yet, or not readable: compile afresh
        if _entries is not None:
            atexit.register(_save)
    return _entries


def compile(pattern: str | bytes, flags: int = 0) -> re.Pattern:  # noqa: A001 - re's name, on purpose
    """`re.compile(pattern, flags)`, from the cache where this installation compiled it before."""
    if TAG is None or not isinstance(flags, int):
        return re.compile(pattern, flags)
    entries = _load()
    key = (pattern, int(flags))
    entry = entries.get(key)
    if entry is not None:
        try:
            compiled = _sre.compile(pattern, *entry)
            STATS["reused"] += 1
            _used.add(key)
            return compiled
        except Exception:                             # a damaged entry: the matcher refused its code
            entries.pop(key, None)
    try:
        # re._compiler.compile's own steps, keeping the code it hands _sre
        parsed = _parser.parse(pattern, flags)
        code = [int(c) for c in _compiler._code(parsed, flags)]    # (named constants: plain ints marshal)
        groupindex = dict(parsed.state.groupdict)
        indexgroup = [None] * parsed.state.groups
        for name, i in groupindex.items():
            indexgroup[i] = name
        entry = (int(flags | parsed.state.flags), code, parsed.state.groups - 1, groupindex, tuple(indexgroup))
        compiled = _sre.compile(pattern, *entry)
    except re.error:
        raise
    except Exception:                                 # pragma: no cover - re's internals changed: no cache
        return re.compile(pattern, flags)
    entries[key] = entry
    _used.add(key)
    STATS["compiled"] += 1
    return compiled


def _save() -> None:
    """At exit, where this run compiled something new: the file replaced whole (another process
    writing at once loses nothing but its own new entries, compiled again next time)."""
    if not STATS["compiled"] or _entries is None:
        return
    p = path()
    if p is None:
        return
    try:
        data = marshal.dumps(_entries)
        if len(data) > MAX_BYTES:
            data = marshal.dumps({k: _entries[k] for k in _used if k in _entries})
        write_private(p, data)                        # whole or not at all, 0600
    except (OSError, ValueError):                     # a full or read-only disk: next run compiles again
        pass


# the parsers' own lazy patterns compile through the cache from here on (lazy_re.compile says which are own)
lazy_re.own_compile = compile
