"""The gdb-family debuggers faultkit drives, one table each: which one a binary is, what it is
asked at a live fault stop and in a core, and how it must be handled. Capture (live and core
opening) and triage (opening cores found among the inputs) read them from here."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Debugger:
    flavor: str                  # also its usual binary name
    platform: str                # "cuda" | "rocm" | "host"
    harvest: tuple[str, ...]     # at a live fault stop; bounded (thousands of waves make `bt full` huge)
    core_commands: tuple[str, ...] = ()    # in `-batch` on a GPU core ({core}: its path)
    attach_delay_s: float = 0.0  # wait after a worker opens the GPU before attaching


TABLE = {
    "rocgdb": Debugger("rocgdb", "rocm",
                       ("info inferiors", "info agents", "info queues", "info dispatches -full", "info dispatches",
                        "show amdgpu precise-memory", "info threads", "bt full 12", "x/24i $pc-64", "info registers",
                        "info sharedlibrary", "thread apply all bt 24"),
                       ("set pagination off", "set width 0", "info agents", "info queues", "info dispatches",
                        "info threads", "bt", "x/12i $pc-32", "info sharedlibrary")),
    # attaching cuda-gdb during CUDA start-up hung it on the H200: it waits after a worker opens the GPU
    "cuda-gdb": Debugger("cuda-gdb", "cuda",
                         ("info inferiors", "info cuda kernels", "info cuda devices", "bt full 12", "x/12i $errorpc-64",
                          "x/4i $pc", "info threads", "info sharedlibrary", "thread apply all bt 24"),
                         ("set pagination off", "set width 0", "target cudacore {core}", "info cuda kernels",
                          "info cuda devices", "bt", "x/12i $errorpc-64", "x/4i $pc", "info registers"),
                         attach_delay_s=15.0),
    "gdb": Debugger("gdb", "host",
                    ("info inferiors", "info threads", "bt full 12", "x/12i $pc-32", "info registers",
                     "info sharedlibrary", "thread apply all bt 24", "info dispatches")),
}


def flavor_of(binary: str) -> str:
    """Which debugger a binary is, from its name (`/opt/rocm/bin/rocgdb`, `cuda-gdb-12.4`, `gdb`)."""
    name = os.path.basename(binary)
    return next((f for f in ("cuda-gdb", "rocgdb") if f in name), "gdb")


def debugger_of(binary: str) -> Debugger:
    return TABLE[flavor_of(binary)]
