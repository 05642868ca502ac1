"""Kernel names as a person reads them: Itanium C++ names (`_ZN2at6native...`) demangled by
libstdc++'s own demangler (through the `cxxfilt` package), the raw name where it is not mangled,
is not valid, or no demangler is available. The one owner of demangling: the readers (ingest.symbols)
name kernels with it where they match names across tools, the reports, timelines and terminal lines
show names with it."""

from __future__ import annotations

import functools
import re

# `.kd` is the kernel descriptor's symbol; a mangled name may carry a clone suffix (`.cold`, `.isra.0`)
MANGLED = re.compile(r"^(?P<name>_Z[A-Za-z0-9_$.]+?)(?P<suffix>\.kd)?$")
MAX_LEN = 4096               # longer is not a symbol; the demangler's work grows with the name


@functools.lru_cache(maxsize=1)
def _demangler():
    """The package, loaded at the first mangled name (it loads libstdc++ through ctypes, which
    `faultkit --help` and a triage without C++ names need not pay); None where it cannot load."""
    try:
        import cxxfilt
    except Exception:        # noqa: BLE001 - ImportError, or OSError/AttributeError from ctypes
        return None
    return cxxfilt


@functools.lru_cache(maxsize=4096)
def demangled(name: str | None) -> str | None:
    """The demangled form of a mangled name, else None (not mangled, not valid, no demangler)."""
    if not name or len(name) > MAX_LEN:
        return None
    m = MANGLED.match(name)
    if not m or (lib := _demangler()) is None:
        return None
    try:
        out = lib.demangle(m["name"], external_only=True)
    except Exception:        # noqa: BLE001 - InvalidName, or an encoding the library refuses
        return None
    if not out or out == m["name"]:
        return None
    return out + (m["suffix"] or "")


def display_name(name):
    """What to show for a kernel name: demangled where it can be, else as given."""
    return demangled(name) or name if isinstance(name, str) else name
