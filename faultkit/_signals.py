"""Exit statuses in words, shared by capture and trials."""

from __future__ import annotations

import signal

# Signals a debugger stops on as a fault, and what each means when a GPU wave raised it (ROCm
# reports its memory violations, address errors, illegal instructions and traps as these).
FAULT_SIGNALS = {"SIGSEGV": "gpu-memory-violation", "SIGBUS": "gpu-address-error", "SIGABRT": "gpu-trap",
                 "SIGILL": "gpu-illegal-instruction", "SIGFPE": "gpu-arithmetic-exception"}


def exit_words(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    if code > 128:
        try:
            return f"exit {code} ({signal.Signals(code - 128).name} in a shell)"
        except ValueError:
            pass
    return f"exit {code}"
