"""C++ symbol names as people read them.

Tools print kernels mangled (`_ZN5graph4scan10WarpPrefixILi32EE9inclusiveEPi` in cuda-memcheck's
hazard reports, code-object symbols) or demangled (`graph::scan::WarpPrefix<32>::inclusive(int*)`);
the C++ runtime's own demangler (abi::__cxa_demangle, through cxxfilt) turns the first into the second
so that one kernel has one name across the evidence.
"""

from __future__ import annotations

import re

try:
    import cxxfilt
except (ImportError, OSError):      # no libstdc++ to load: names stay as printed
    cxxfilt = None

ITANIUM = re.compile(r"_Z[A-Za-z0-9_$.]+")


def demangle(name: str | None) -> str | None:
    """The demangled form of an Itanium-mangled name; None if `name` is not one or does not demangle."""
    if not name or cxxfilt is None or not ITANIUM.fullmatch(name):
        return None
    try:
        out = cxxfilt.demangle(name)
    except Exception:                # cxxfilt.InvalidName, or a failure inside the C++ runtime
        return None
    return out if out and out != name else None
