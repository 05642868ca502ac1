"""The in-process agent's black box: the allocator's events, the faulting process's memory map and
its threads' stacks, read from its rings after the process died."""

from __future__ import annotations

from .source import Source

SOURCE = Source("agent", "the in-process agent's black box: who owned the fault address",
                json_keys=("black_box",), sections=("Black box: the fault address's owner and every thread at the abort",))
