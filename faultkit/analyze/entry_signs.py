"""Telling a kernel (a device entry point) from a device function by the signs a name carries.

A launch (`<<<...>>>`), a dispatch row, a kernel descriptor or the outermost device frame show an
entry point; these are read where they appear (debug_stop, the sanitizer's claims). What a bare
name can show by itself is the other way round: that it is NOT an entry point. A lambda's
`operator()` is called by the kernel PyTorch launched around it; the device libraries' helpers
(ROCm's OCML/OCKL, CUDA's libdevice `__nv_`, the runtimes' assert handlers) are only ever called.

Not a sign: a `void` return type (a `__global__` function returns void too) and template parameter
placeholders in the parameter list (`(T1 *, T1 *)`: a CUB kernel prints them as well, NVIDIA/cudf#15258's
`DeviceReduceSingleTileKernel<...>(T2, T3, T4, T5, T6)`).
"""

from __future__ import annotations

import re

from ..judge.names import kernel_name

CLONE = re.compile(r"^\[clone (?P<into>[^\]]+)\]\s*(?P<function>\S.*)$")

MEMBER = "a member of a class template (a kernel is never a class member)"

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
    # (`<unnamed>::k(...)` is the anonymous namespace, not a template: nvFuser's kernels, Fuser#2632)
    (re.compile(r"(?<!<unnamed)>::~?\w+\s*\(|(?<!<unnamed)>::operator\b"), MEMBER),
    (re.compile(r"\)\s*const\s*$"), "a const member function (a kernel is never a class member)"),
    # nvcc compiles a noinline device function into each kernel that calls it; compute-sanitizer prints
    # that copy as `[clone K(...)] f(...)` (H200, 2025.3.1: tests/data/live_h200_sanitizer)
    (CLONE, "compute-sanitizer shows it as a device function's copy compiled into the kernel in its bracket"),
)

# A helper of a library or of one file: a load/store/reduce/warp/block-shaped name inside an anonymous
# namespace or a library's internals (nvFuser's jitted `<unnamed>::loadGeneric<float, (int)4>`, CUB's
# `LoadDirectBlocked`, ATen's `memory::detail`). Kernels live in the same namespaces
# (`at::native::<unnamed>::indexSelectLargeIndex`, `cub::DeviceReduceKernel`), so a name is put up as a
# helper only by its verb, and never where it says it is a kernel.
_ANON = ("<unnamed>", "(anonymous namespace)")                       # the sanitizer's and gdb's spellings
_INTERNAL_SCOPES = {"<anon>", "detail", "internal", "impl", "memory"}     # anywhere in the scope
_LIBRARIES = {"cub", "cute", "thrust", "cooperative_groups"}               # the scope's first name
_HELPER_VERB = re.compile(r"^(?:load|store|ld|st|fetch|read|write|reduce|warp|block|thread|shfl|shuffle|atomic|"
                          r"welford|vectorized_load|vectorized_store)(?:[A-Z0-9_]|$)", re.I)
_SAYS_KERNEL = re.compile(r"kernel", re.I)


def _top_level(name: str) -> str:
    """The name without its template arguments: the signs are the function's own, not those of the
    types it is instantiated with (vLLM's `reshape_and_cache_flash_kernel<__nv_bfloat16, ...>` is no
    libdevice helper, ATen's `elementwise_kernel<128, 4, ...[lambda(int) (instance 1)]>` no lambda)."""
    for anon in _ANON:
        name = name.replace(anon, anon.replace("<", "{").replace(">", "}"))
    out, depth = [], 0
    for ch in name:
        if ch == "<":
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out).replace("{unnamed}", "<unnamed>")


def _flat_words(name: str) -> list[str]:
    """The signature without template arguments or parameters, in words: the return type's words
    (if printed) then the qualified name. `void <unnamed>::loadGeneric<float, (int)4>(T1 *, T1 *)` ->
    ['<anon>::loadGeneric'] (kernel_name drops a leading `void`)."""
    for anon in _ANON:
        name = name.replace(anon, "{anon}")
    flat, depth = [], 0
    for ch in kernel_name(name):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(depth - 1, 0)
        elif depth == 0:
            flat.append(ch)
    return "".join(flat).replace("{anon}", "<anon>").replace("*", " ").replace("&", " ").split()


def _scope_and_base(name: str) -> tuple[list[str], str]:
    """The function's enclosing names and its own name: (['<anon>'], 'loadGeneric')."""
    words = _flat_words(name)
    parts = (words[-1] if words else "").split("::")
    return parts[:-1], parts[-1]


def _template_member(name: str) -> bool:
    """A name qualified by a class template at the top level (`Foo<int>::bar<float>(...)`): the
    table's pattern needs `(` right after the member's name and misses a member template; a template
    argument's own `Policy<...>::Policy600` (inside a kernel's `<...>`) is not the kernel's scope."""
    key, depth, start = kernel_name(name), 0, 0
    for i, ch in enumerate(key):
        if ch == "<":
            if depth == 0:
                start = i
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
            if depth == 0 and key.startswith("::", i + 1) and not key.startswith("<unnamed>", start):
                return True
    return False


def _return_type(name: str) -> str | None:
    """The return type a demangled template function's signature prints (`__half cub::...::Apply<...>(...)`),
    None where none is printed or it is void. A `__global__` function returns void, so any other is a
    device function's; `void` itself tells nothing."""
    if "(" not in name or name.lstrip().startswith("["):
        return None          # a bare name (a table's, a debugger's) or a clone's bracket: no type before it
    words = _flat_words(name)
    ret = " ".join(words[:-1])
    return ret if ret and ret != "void" and "operator" not in words[-1] else None


def _library_helper(name: str) -> bool:
    scope, base = _scope_and_base(name)
    internal = bool(_INTERNAL_SCOPES.intersection(scope)) or bool(scope and scope[0] in _LIBRARIES)
    return internal and bool(_HELPER_VERB.match(base)) and not _SAYS_KERNEL.search(base)


def helper_sign(name: str, by_shape: bool = True) -> str | None:
    """Why `name` is a device function and not a kernel, or None where the name does not say.
    `by_shape=False` where the format itself shows an entry point (a dispatch row, a ptxas entry
    function): the helper-shaped-name sign is a reading of a name, and yields to such a format."""
    top = _top_level(name)
    for rx, why in HELPER_SIGNS:
        if rx.search(top):
            return f"not an entry point: {why}"
    if _template_member(name):
        return f"not an entry point: {MEMBER}"
    ret = _return_type(name)
    if ret:
        return f"not an entry point: it returns {ret} (a __global__ function returns void)"
    if by_shape and _library_helper(name):
        return "not an entry point: a helper-shaped name (load, store, reduce, warp ...) in an anonymous namespace or a library's internals"
    return None


def unclone(name: str) -> tuple[str, str | None]:
    """(the function, the function it was cloned into) of compute-sanitizer's `[clone K(...)] f(...)`;
    (name, None) for any other name."""
    m = CLONE.match(name.strip())
    return (m["function"].strip(), m["into"].strip()) if m else (name, None)
