"""What an argv really runs: the machine program behind a `#!` script, a console-script entry point
(`vllm`, `torchrun`: a `#!.../python` script) or a pyenv shim (a bash script that ends in
`pyenv exec`), and the argv that runs it with the script's arguments.

Used where faultkit must name the program itself: a debugger can only start a machine program (gdb
says "not in executable format" for a script and never runs it), and the same-command guard
compares a command with running processes, which show the interpreter, never the script's name.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field

ELF_MAGIC = b"\x7fELF"
MAX_HOPS = 8                     # a `#!` chain longer than this is a loop (the kernel allows 4)
# A pyenv shim (`pyenv init` writes one per command): `exec "<root>/libexec/pyenv" exec "$program" "$@"`.
PYENV_SHIM = re.compile(r'exec\s+"(?P<pyenv>[^"]+/libexec/pyenv)"\s+exec\s+"\$program"')


@dataclass
class Program:
    argv: list[str]                          # what to exec: a machine program first
    chain: list[str] = field(default_factory=list)     # what was resolved, in words, one hop each
    env: dict[str, str] = field(default_factory=dict)  # what the resolved hop would have set (pyenv's PATH)
    problem: str | None = None               # why no machine program could be named (then argv is the input)

    @property
    def program(self) -> str:
        return os.path.realpath(self.argv[0])


def _on_path(name: str, env: dict[str, str]) -> str | None:
    if "/" in name:
        return name if os.path.exists(name) else None
    return shutil.which(name, path=env.get("PATH", os.defpath))


def _head(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(4096)
    except OSError:
        return b""


def _shebang(head: bytes) -> list[str] | None:
    """The interpreter and its argument of a `#!` line, as the kernel splits it (one argument at most,
    the rest of the line); `env -S` splits it further, as env does."""
    if not head.startswith(b"#!"):
        return None
    line = head[2:].split(b"\n", 1)[0].decode(errors="replace").strip()
    if not line:
        return None
    interp, _, arg = line.partition(" ")
    words = [interp] + ([arg.strip()] if arg.strip() else [])
    if os.path.basename(interp) == "env" and len(words) == 2:
        rest = words[1].split()
        if rest and rest[0] in ("-S", "--split-string"):
            rest = rest[1:]
        words = [interp, *rest]
    return words


def _pyenv_program(shim_text: str, name: str, env: dict[str, str]) -> tuple[str | None, str | None]:
    """(the real program a pyenv shim runs for `name`, why not), from `pyenv which` in this environment."""
    m = PYENV_SHIM.search(shim_text)
    if not m:
        return None, None
    try:
        r = subprocess.run([m["pyenv"], "which", name], capture_output=True, text=True, timeout=20,
                           env={**env, "PYENV_ROOT": env.get("PYENV_ROOT") or m["pyenv"].rsplit("/libexec/", 1)[0]},
                           stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"`pyenv which {name}` failed: {exc}"
    path = r.stdout.strip().splitlines()[-1] if r.returncode == 0 and r.stdout.strip() else None
    if not path:
        return None, f"`pyenv which {name}` found none ({(r.stderr or r.stdout).strip()[:200]})"
    return path, None


def resolve(argv: list[str], env: dict[str, str] | None = None) -> Program:
    """The machine program `argv` runs, following `#!` lines and pyenv shims; `problem` says why
    where none can be named (a script without a `#!`, an interpreter that does not exist, a loop)."""
    env = dict(os.environ if env is None else env)
    if not argv:
        return Program([], problem="no command")
    current, chain, added = list(argv), [], {}
    for _ in range(MAX_HOPS):
        path = _on_path(current[0], {**env, **added})
        if path is None:
            return Program(list(argv), chain, added, f"{current[0]}: not found")
        head = _head(path)
        if head.startswith(ELF_MAGIC):
            return Program([path, *current[1:]], chain, added)
        shim, why = _pyenv_program(head.decode(errors="replace"), os.path.basename(current[0]), {**env, **added})
        if why:
            return Program(list(argv), chain, added, f"{path} is a pyenv shim: {why}")
        if shim:
            chain.append(f"{path} is a pyenv shim for {shim}")
            bin_dir = os.path.dirname(shim)
            root = env.get("PYENV_ROOT") or PYENV_SHIM.search(head.decode(errors="replace"))["pyenv"].rsplit(
                "/libexec/", 1)[0]
            if bin_dir.startswith(root.rstrip("/") + "/"):        # pyenv exec puts a version's bin first
                added["PATH"] = bin_dir + os.pathsep + {**env, **added}.get("PATH", os.defpath)
            current = [shim, *current[1:]]
            continue
        interp = _shebang(head)
        if interp is None:
            return Program(list(argv), chain, added,
                           f"{path} is neither a machine program nor a `#!` script (a shell would run it with sh)")
        chain.append(f"{path} is a script run by {' '.join(interp)}")
        if os.path.basename(interp[0]) == "env":
            words = [w for w in interp[1:] if not w.startswith("-")]
            if not words:
                return Program(list(argv), chain, added, f"{path}: `#!{' '.join(interp)}` names no program")
            interp = words
        current = [*interp, path, *current[1:]]
    return Program(list(argv), chain, added, f"{argv[0]}: more than {MAX_HOPS} `#!` hops (a loop?)")
