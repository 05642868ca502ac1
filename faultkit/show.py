"""`faultkit show BUNDLE`: what a capture bundle holds and how the capture went, in a few lines.

The bundle is read through `bundle.collect` (the reader triage uses: folders and archives alike,
file roles from `layout`); the manifest's fields are read by type, so a bundle cut by a crash or
edited by hand shows what it still has and says what it does not.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import layout
from . import redact as redaction
from ._signals import capture_exit_status, exit_words
from .bundle import collect
from .terminal import clean

SCHEMA = "faultkit.show/1"


@dataclass
class BundleSummary:
    path: str
    is_bundle: bool                       # a faultkit manifest was found
    bundle_schema: str | None = None      # the manifest's own schema
    state: str | None = None              # running (cut: faultkit itself died) | finished
    command: str | None = None
    backend: str | None = None
    attached_to_pid: int | None = None
    started: str | None = None            # local time, as a person reads it
    duration_s: float | None = None
    ended_by: str | None = None
    exit: str | None = None               # the target's end in words
    exit_status: int | None = None        # what `faultkit capture` exited with
    fault_line: str | None = None
    env_check: str = "nothing requested"
    env_ok: bool | None = None
    cores: list[dict] = field(default_factory=list)
    cores_armed: bool | None = None
    kernel_log: str = "unknown"
    kernel_log_readable: bool | None = None
    tools: dict[str, str] = field(default_factory=dict)
    processes: int = 0
    files: int = 0
    bytes: int = 0
    warnings: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"schema": SCHEMA, **asdict(self)}


def _get(d, key: str, kinds, default=None):
    v = d.get(key) if isinstance(d, dict) else None
    if isinstance(v, bool) and bool not in (kinds if isinstance(kinds, tuple) else (kinds,)):
        return default
    return v if isinstance(v, kinds) else default


def summarise(path: str) -> BundleSummary:
    inputs = collect([path])
    # the record as written (its fields already type-checked): the summary walks it field by field
    m = inputs.manifest.to_json() if inputs.manifest is not None else {}
    s = BundleSummary(path=path, is_bundle=inputs.captured, problems=[str(p) for p in inputs.problems])
    # an archive is summarised by what it holds, as its folder would be (members counted as they were read)
    s.files, s.bytes = inputs.archived if inputs.archived[0] else _sizes(Path(path))
    if not inputs.captured:
        return s
    s.bundle_schema = _get(m, "schema", str)
    s.state = _get(m, "state", str)
    s.command, s.backend = _get(m, "command", str), _get(m, "backend", str)
    s.attached_to_pid = _get(m, "attached_to_pid", int)
    start, end = _get(_get(m, "start", dict, {}), "wall", (int, float)), _get(_get(m, "end", dict, {}), "wall",
                                                                                 (int, float))
    if start is not None:
        try:
            s.started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(start))
        except (OverflowError, OSError, ValueError):
            s.problems.append(f"{layout.MANIFEST}: start time {start!r} is not a time")
    if start is not None and end is not None and end >= start:
        s.duration_s = round(end - start, 3)
    s.ended_by = _get(m, "ended_by", str)
    code = _get(m, "exit_code", int)
    s.exit = _get(m, "exit", str) or (exit_words(code) if s.state == "finished" else None)
    if s.state == "finished":
        s.exit_status = capture_exit_status(inputs.manifest)
    elif s.state == "running":
        s.warnings.append("the capture never finished (faultkit was killed, or the machine went down): the bundle "
                          "holds what was written until then")
    s.fault_line = _get(m, "fault_line", str)
    _env(s, m)
    _cores(s, m, inputs.cores)
    _kernel(s, m)
    tools = _get(_get(m, "system", dict, {}), "tools", dict, {})
    s.tools = {k: v for k, v in tools.items() if isinstance(k, str) and isinstance(v, str)}
    s.processes = len(inputs.environ)
    s.warnings += [w for w in _get(m, "warnings", list, []) if isinstance(w, str)]
    s.warnings += [w for w in _get(_get(m, "coredump", dict, {}), "warnings", list, []) if isinstance(w, str)]
    _redacted(s)
    return s


def _redacted(s: BundleSummary) -> None:
    """A manifest written with --no-redact, by an older faultkit or by hand may hold secrets: what show
    prints or emits is redacted again."""
    for k, v in vars(s).items():
        if isinstance(v, str):
            setattr(s, k, redaction.text(v))
        elif isinstance(v, list):
            setattr(s, k, [redaction.text(x) if isinstance(x, str) else x for x in v])


def _env(s: BundleSummary, m: dict) -> None:
    from .capture.proctree import describe_env_check
    check = m.get("env_check")
    if check is None:
        return
    if not isinstance(check, dict) or not isinstance(check.get("ok"), bool):
        s.env_check = "the manifest's env_check is not readable"
        return
    s.env_ok = check["ok"]
    s.env_check = describe_env_check(check)


def _cores(s: BundleSummary, m: dict, on_disk: list[str]) -> None:
    armed = _get(m, "coredump", dict)
    if armed is not None:       # {"armed": false, ...} when not armed, else what was armed per runtime
        s.cores_armed = _get(armed, "armed", bool, armed.get("cuda") is True or armed.get("rocm") is True)
    listed = [c for c in _get(m, "cores", list, []) if isinstance(c, dict)]
    for c in listed:
        s.cores.append({"name": os.path.basename(str(c.get("path") or "")), "size": _get(c, "size", int),
                        "platform": _get(c, "platform", str), "opened_with": _get(c, "analysed_with", str)})
    known = {c["name"] for c in s.cores}
    for p in on_disk:                               # cores the manifest does not list (a cut capture)
        if os.path.basename(p) not in known:
            try:
                size = os.path.getsize(p)
            except OSError:
                size = None
            s.cores.append({"name": os.path.basename(p), "size": size, "platform": None, "opened_with": None})


def _kernel(s: BundleSummary, m: dict) -> None:
    k = _get(m, "kernel_log", dict, {})
    problem = _get(k, "problem", str)
    follow = _get(k, "follow", str)
    readable = _get(k, "readable", bool)
    if problem or readable is False:
        s.kernel_log_readable = False
        s.kernel_log = problem or "not readable"
    elif follow == layout.KERNEL_FOLLOW:
        s.kernel_log_readable = True
        size = _get(_get(m, "files", dict, {}), layout.KERNEL_FOLLOW, int)     # as the capture left it
        s.kernel_log = f"followed: {layout.KERNEL_FOLLOW}" + (f" ({size:,} bytes)" if size is not None else "")
    elif follow:
        # not followed live; the snapshot after the capture may still hold its lines
        after = _get(k, "after", str)
        s.kernel_log_readable = after == layout.KERNEL_AFTER
        s.kernel_log = f"not followed ({follow})" + (f"; snapshot {after}" if after == layout.KERNEL_AFTER else
                                                    f"; no snapshot either ({after})" if after else "")


def _sizes(root: Path) -> tuple[int, int]:
    if root.is_file():
        return 1, root.stat().st_size
    n = total = 0
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = Path(dirpath) / f
            if not p.is_symlink() and p.is_file():
                n, total = n + 1, total + p.stat().st_size
    return n, total


def _human(n: int | None) -> str:
    if n is None:
        return "size unknown"
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:,} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"


def render_text(s: BundleSummary) -> str:
    if not s.is_bundle:
        lines = [f"{s.path}: not a faultkit capture bundle (no readable manifest.json); {s.files} file(s), "
                 f"{_human(s.bytes)}", f"  triage reads it anyway: faultkit triage {s.path}"]
        return _lines(lines + [f"  problem: {p}" for p in s.problems])
    how = s.ended_by or s.state or "unknown"
    dur = f" after {s.duration_s:.1f} s" if s.duration_s is not None else ""
    status = f" (faultkit capture exited {s.exit_status})" if s.exit_status is not None else ""
    lines = [f"bundle:   {s.path} ({s.state or 'state unknown'}, {s.files} files, {_human(s.bytes)})",
             f"command:  {s.command or '?'}" + (f" (--with {s.backend})" if s.backend and s.backend != "none" else "")
             + (f" (followed pid {s.attached_to_pid})" if s.attached_to_pid else ""),
             f"ended:    {how}{dur}: {s.exit or 'exit unknown'}{status}" + (f", started {s.started}" if s.started
                                                                               else "")]
    if s.fault_line:
        lines.append(f"fault:    {s.fault_line[:160]}")
    lines.append(f"env:      {s.env_check}")
    if s.cores:
        shown = ", ".join(f"{c['name']} ({_human(c['size'])}" + (f", {c['platform']}" if c["platform"] else "")
                          + (f", opened with {os.path.basename(c['opened_with'])}" if c["opened_with"] else "")
                          + ")" for c in s.cores[:4])
        lines.append(f"cores:    {len(s.cores)}: {shown}" + (", ..." if len(s.cores) > 4 else ""))
    else:
        lines.append("cores:    none" + (" (GPU core dumps were armed)" if s.cores_armed else
                                         " (GPU core dumps not armed)" if s.cores_armed is False else ""))
    lines.append(f"kernel:   {s.kernel_log}")
    found = sorted(k for k, v in s.tools.items() if v != "not installed")
    missing = sorted(k for k, v in s.tools.items() if v == "not installed")
    if s.tools:
        lines.append(f"tools:    {', '.join(found) or 'none found'}" + (f"; not installed: {', '.join(missing)}"
                                                                       if missing else ""))
    lines.append(f"procs:    {s.processes} process record(s) in {layout.ENVIRON}")
    lines += [f"warning:  {w}" for w in s.warnings]
    lines += [f"problem:  {p}" for p in s.problems]
    lines.append(f"next:     faultkit triage {s.path}")
    return _lines(lines)


def _lines(lines: list[str]) -> str:
    """One terminal line each: evidence inside (a command, a file name, a log line) drives no terminal."""
    return "".join(clean(ln) + "\n" for ln in lines)


def render_json(s: BundleSummary) -> str:
    return json.dumps(s.to_json(), indent=2) + "\n"
