"""Did a trial's server start at all? A command that does not exist, a file that is not executable,
a script that is not there, a server that never became ready: each ends with a nonzero status,
and counted as a crash one typo in one arm reads as "fix crashes more often (p < 0.001)"."""

from __future__ import annotations

import re

# The shell's own statuses (POSIX, "Exit Status for Commands"): 127 not found, 126 found but not
# executable. A command run without a shell that cannot be spawned is said the same way.
NOT_FOUND, NOT_EXECUTABLE = 127, 126
# CPython's own message for `python missing.py` (exit 2) and `python -m missing` (exit 1).
PYTHON_NO_SCRIPT = re.compile(r"can't open file .*No such file or directory|No module named \S+$", re.M)
PYTHON_NO_SCRIPT_STATUS = (1, 2)
# A program that refused its arguments: argparse and click print a usage line and exit 2 (a typo in
# an arm's flags is the commonest way an arm "crashes every time").
USAGE_STATUS = 2
USAGE_LINE = re.compile(r"^(?:usage|Usage): ", re.M)
USAGE_ERROR = re.compile(r"^(?:\S+: )?(?:error|Error): .*$", re.M)
HEAD = 4096                # the start-up lines that say why


def start_failure(exit_code: int | None, ended_by: str, output: str, waited_for_ready: bool, ready: bool,
                  fault_line: str | None) -> str | None:
    """Why the server did not start, in words, or None when it did (or may have: a crash signal or
    a fault line before readiness is a crash, as the bug can strike during start-up)."""
    said = _first_line(output)
    if fault_line:
        return None
    if ended_by == "server-exit" and exit_code == NOT_FOUND:
        return f"command not found (exit status 127{': ' + said if said else ''})"
    if ended_by == "server-exit" and exit_code == NOT_EXECUTABLE:
        return f"command not executable (exit status 126{': ' + said if said else ''})"
    if ended_by == "server-exit" and exit_code in PYTHON_NO_SCRIPT_STATUS:
        m = PYTHON_NO_SCRIPT.search(output[-HEAD:])
        if m:
            return f"script not found (exit status {exit_code}: {m.group(0)})"
    if ended_by == "server-exit" and exit_code == USAGE_STATUS and USAGE_LINE.search(output[:HEAD]):
        m = USAGE_ERROR.search(output[:HEAD])
        return f"the command refused its arguments (exit status 2{': ' + m.group(0).strip()[:200] if m else ''})"
    if waited_for_ready and not ready:
        if ended_by == "timeout":
            return "never became ready before the trial's timeout (no --ready-pattern match, port not listening)"
        if ended_by == "server-exit" and exit_code is not None and exit_code > 0:
            return (f"exited with status {exit_code} before it became ready"
                    f"{': ' + _last_line(output) if _last_line(output) else ''}")
    return None


def _first_line(text: str) -> str:
    return next((ln.strip()[:200] for ln in text[:HEAD].splitlines() if ln.strip()), "")


def _last_line(text: str) -> str:
    return next((ln.strip()[:200] for ln in reversed(text[-HEAD:].splitlines()) if ln.strip()), "")
