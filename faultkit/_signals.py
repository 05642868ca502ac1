"""Exit statuses in words, shared by capture and trials."""

from __future__ import annotations

import signal

# Signals a debugger stops on as a fault, and what each means when a GPU wave raised it (ROCm
# reports its memory violations, address errors, illegal instructions and traps as these).
FAULT_SIGNALS = {"SIGSEGV": "gpu-memory-violation", "SIGBUS": "gpu-address-error", "SIGABRT": "gpu-trap",
                 "SIGILL": "gpu-illegal-instruction", "SIGFPE": "gpu-arithmetic-exception"}


# The target's own crash signals (a CPU crash of the host process): not those a capture sends to stop it.
HOST_CRASH_SIGNALS = {11: "SIGSEGV", 6: "SIGABRT", 7: "SIGBUS", 4: "SIGILL", 8: "SIGFPE"}


def host_crash_signal(code: int | None) -> str | None:
    """The crash signal a process was killed by (exit status -N), or None."""
    if isinstance(code, int) and not isinstance(code, bool) and -code in HOST_CRASH_SIGNALS:
        return HOST_CRASH_SIGNALS[-code]
    return None


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


EXIT_TIMEOUT = 124          # timeout(1)'s status for a limit that ran out
EXIT_TOOL_FAILED = 125      # timeout(1)'s status when it failed itself: here, the debugger died or hung


def capture_exit_status(manifest) -> int:
    """What `faultkit capture` exits with for this bundle, like a shell: the target's exit status,
    128+N for a signal; an interrupted capture 128+signal; a capture whose --timeout or --hang-after
    ran out 124, like timeout(1); one whose debugger died or hung 125 (the capture's own tool failed:
    the program's status is not known, never 0). Also what `faultkit show` reports."""
    if manifest.ended_by == "interrupted":
        try:
            sig = signal.Signals[str(manifest.interrupted_by or "SIGINT")]
        except KeyError:                       # a manifest edited by hand, or another platform's name
            sig = signal.SIGINT
        return 128 + int(sig)
    if manifest.ended_by in ("timeout", "hang"):
        return EXIT_TIMEOUT
    if manifest.ended_by in ("debugger-died", "debugger-hung"):
        return EXIT_TOOL_FAILED
    code = manifest.exit_code
    if not isinstance(code, int) or isinstance(code, bool):
        return 0
    return 128 - code if code < 0 else code
