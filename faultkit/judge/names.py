"""One kernel, many spellings: tools print the same kernel differently, and evidence agrees only
when the names are compared as the same kernel."""

from __future__ import annotations

import re

_LAUNCH = re.compile(r"<<<.*?>>>")


def kernel_key(name: str) -> str:
    """A comparison key: cuda-gdb prints Triton's `triton__0d1d2d` as `triton.0d1d2d`; ROCclr and
    the sanitizer print a signature (`void k<float>(float*, int)`), debuggers print `k<float>`."""
    return kernel_name(name).replace("__", ".")


def kernel_name(name: str) -> str:
    """The kernel's name without its launch configuration, return type or parameter list."""
    key = _LAUNCH.sub("", name).strip()
    if key.startswith("void "):
        key = key[5:]
    depth, cut = 0, len(key)
    for i, ch in enumerate(key):     # the parameter list is the first '(' outside template brackets
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(depth - 1, 0)
        elif ch == "(" and depth == 0 and i > 0:
            cut = i
            break
    return key[:cut].strip()


# Names only a launched entry point carries: LLVM names each OpenMP target region's kernel
# `__omp_offloading_<dev>_<file>_<function>_l<line>`; no device function gets that prefix.
ENTRY_PREFIXES = ("__omp_offloading_",)


def is_entry_name(name: str | None) -> bool:
    return bool(name) and kernel_name(name).startswith(ENTRY_PREFIXES)


def same_kernel(a: str | None, b: str | None) -> bool:
    return a is not None and b is not None and kernel_key(a) == kernel_key(b)
