"""Telling a kernel (a device entry point) from a device function by the signs a name carries.

A launch (`<<<...>>>`), a dispatch row, a kernel descriptor or the outermost device frame show an
entry point; these are read where they appear (debug_stop, the sanitizer's claims). What a bare
name can show by itself is the other way round: that it is NOT an entry point. A lambda's
`operator()` is called by the kernel PyTorch launched around it; the device libraries' helpers
(ROCm's OCML/OCKL, CUDA's libdevice `__nv_`, the runtimes' assert handlers) are only ever called.
"""

from __future__ import annotations

import re

# the sign, in words, for each way a name shows it is called, not launched
HELPER_SIGNS: tuple[tuple[re.Pattern, str], ...] = (
    (re.compile(r"(?:^|::|\s)operator\s*\(\)|\{lambda|<lambda|\(lambda\)|__lambda"), "a lambda's operator(): called by the kernel around it"),
    (re.compile(r"^(?:[\w:<>, ]*\s)?__(?:ocml|ockl|ocml_native|irif)_\w+"), "a ROCm device-library helper (OCML/OCKL prefix)"),
    (re.compile(r"^(?:[\w:<>, ]*\s)?__nv_\w+"), "a CUDA libdevice helper (__nv_ prefix)"),
    (re.compile(r"^(?:[\w:<>, ]*\s)?(?:__assert_fail|__assertfail|__hip_assert|__device_assert)\b"),
     "the runtime's assert handler"),
    (re.compile(r"\b__device__\b"), "declared __device__"),
    # a __global__ function is never a class member: a name qualified by a class template
    # (`WarpPrefix<32>::inclusive(int*)`) or const-qualified (`Reduce<...>::run() const`) is a method
    (re.compile(r">::~?\w+\s*\(|>::operator\b"), "a member of a class template (a kernel is never a class member)"),
    (re.compile(r"\)\s*const\s*$"), "a const member function (a kernel is never a class member)"),
)


def helper_sign(name: str) -> str | None:
    """Why `name` is a device function and not a kernel, or None where the name does not say."""
    for rx, why in HELPER_SIGNS:
        if rx.search(name):
            return f"not an entry point: {why}"
    return None
