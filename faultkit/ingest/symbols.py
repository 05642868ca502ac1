"""C++ symbol names as people read them.

Tools print kernels mangled (`_ZN5graph4scan10WarpPrefixILi32EE9inclusiveEPi` in cuda-memcheck's
hazard reports, code-object symbols) or demangled (`graph::scan::WarpPrefix<32>::inclusive(int*)`);
the readers turn the first into the second so that one kernel has one name across the evidence.
The demangler itself (libstdc++'s, through cxxfilt) has one owner, `faultkit.demangle`, which the
reports and the terminal lines use too.
"""

from __future__ import annotations

from ..demangle import demangled as demangle

__all__ = ["demangle"]
