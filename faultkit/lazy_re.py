"""The `re` module's API, except that `compile()` waits for the pattern's first use (issue #35).

The log parsers define a few hundred patterns at import; a triage of a pasted log tries a few dozen
of them, and compiling all of them was about a third of every start's imports. A module that says
`from .. import lazy_re as re` gets a `LazyPattern` from `re.compile(...)`: its text (`.pattern`)
is there at once (patterns are built from other patterns' text, and ingest/prefilter reads it), and
the first match/search/... compiles it and binds the compiled pattern's methods on the instance, so
every later call costs what a compiled pattern's does. A bad pattern still raises `re.error`, at its
first use instead of at import: tests/test_lazy_re.py compiles every lazy pattern of the package.
The module-level functions (`re.sub(PAT, ...)`, ...) take lazy patterns too; everything else is re's.
"""

from __future__ import annotations

import re as _re
import sys
from re import *  # noqa: F401,F403 - the flags, escape, error, Pattern, Match: re's own
from typing import Any

# what a compiled pattern answers, bound on the instance at its first use
_BOUND = ("match", "search", "fullmatch", "finditer", "findall", "sub", "subn", "split", "scanner", "flags",
          "groups", "groupindex")
# how the program's own patterns (`own`) compile: re's compile, until faultkit.re_cache (the parsers'
# prefilter imports it) puts its compile from the cache here; re_cache imports this module, not the reverse
own_compile = _re.compile
# every lazy pattern made, so that tests/test_lazy_re.py can compile them all (a bad pattern fails there)
MADE: list[LazyPattern] = []


class LazyPattern:
    """A pattern compiled at its first use; otherwise an `re.Pattern`."""

    def __init__(self, pattern: str | bytes, flags: int = 0, own: bool = False):
        self.pattern = pattern
        self._flags = flags
        self._own = own          # the program's own text (a module's constant): kept compiled across runs
        MADE.append(self)

    @property
    def is_compiled(self) -> bool:
        return "_compiled" in self.__dict__

    def compiled(self) -> _re.Pattern:
        c = self.__dict__.get("_compiled")
        if c is None:
            c = (own_compile if self._own else _re.compile)(self.pattern, self._flags)
            for name in _BOUND:
                self.__dict__[name] = getattr(c, name)
            self.__dict__["_compiled"] = c
        return c

    def __getattr__(self, name: str) -> Any:
        # only called for what the instance does not hold yet: the compiled pattern's methods before
        # the first use. Private and protocol names (copy, pickle) are not the pattern's.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.compiled(), name)

    def __eq__(self, other: object) -> bool:        # as re.Pattern's: the same text and flags
        if isinstance(other, LazyPattern):
            return (self.pattern, self._flags) == (other.pattern, other._flags)
        if isinstance(other, _re.Pattern):
            return self.compiled() == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.pattern, self._flags))

    def __repr__(self) -> str:
        return f"lazy_re.compile({self.pattern!r}{f', {self._flags!r}' if self._flags else ''})"


def compile(pattern: Any, flags: int = 0) -> LazyPattern:  # noqa: A001 - re's name, on purpose
    if isinstance(pattern, LazyPattern):
        if flags:
            raise ValueError("cannot process flags argument with a compiled pattern")
        return pattern
    if isinstance(pattern, _re.Pattern):
        return LazyPattern(pattern.pattern, pattern.flags)
    if not isinstance(pattern, (str, bytes)):
        raise TypeError("first argument must be string or compiled pattern")
    # made by a module's own code at import (its constants): the program's text, never the user's
    # data (a pattern a function builds may hold a secret being redacted), so re_cache may keep it
    return LazyPattern(pattern, flags, own=sys._getframe(1).f_code.co_name == "<module>")


def _real(pattern: Any) -> Any:
    return pattern.compiled() if isinstance(pattern, LazyPattern) else pattern


def match(pattern, string, flags=0):
    return _re.match(_real(pattern), string, flags)


def fullmatch(pattern, string, flags=0):
    return _re.fullmatch(_real(pattern), string, flags)


def search(pattern, string, flags=0):
    return _re.search(_real(pattern), string, flags)


def sub(pattern, repl, string, count=0, flags=0):
    return _re.sub(_real(pattern), repl, string, count, flags)


def subn(pattern, repl, string, count=0, flags=0):
    return _re.subn(_real(pattern), repl, string, count, flags)


def split(pattern, string, maxsplit=0, flags=0):
    return _re.split(_real(pattern), string, maxsplit, flags)


def findall(pattern, string, flags=0):
    return _re.findall(_real(pattern), string, flags)


def finditer(pattern, string, flags=0):
    return _re.finditer(_real(pattern), string, flags)


def is_pattern(value: object) -> bool:
    """A compiled pattern or a lazy one (the tests that look for every pattern of a module)."""
    return isinstance(value, (_re.Pattern, LazyPattern))
