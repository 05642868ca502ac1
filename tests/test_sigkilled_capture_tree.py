"""A SIGKILLed `faultkit capture` leaves none of the target's tree running (issue 36: a root target
that wrote itself into the root cgroup outlived it). The target is a real `#!` script that starts a
worker; the worker leaves everything faultkit holds a tree by once faultkit is gone: it writes itself
into the root cgroup (where it may: root here), calls setsid, double-forks and execs with an empty
environment (no marker to find it by, no process group, no parent under faultkit)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

WORKER = """
import os, sys, time
tag, ready = sys.argv[1], sys.argv[2]

def root_cgroup_procs():
    for mount in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        if os.path.exists(mount + "/cgroup.controllers"):
            return mount + "/cgroup.procs"

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        procs = root_cgroup_procs()
        if procs:
            try:                                   # out of faultkit's cgroup, where the user may
                with open(procs, "w") as fh:
                    fh.write(str(os.getpid()))
            except OSError:
                pass
        code = f"open({ready!r}, 'w').close(); import time; time.sleep(300)  # {tag}"
        os.execve(sys.executable, [sys.executable, "-c", code], {})
    os._exit(0)
time.sleep(300)   # {tag}-worker
"""


def _tree_alive(tag: str) -> list[tuple[int, str]]:
    """Processes of this test's tree, by the tag each carries on its command line."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                args = fh.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{name}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if tag in args and state != b"Z" and "pytest" not in args and "faultkit.cli" not in args:
            found.append((int(name), args.strip()))
    return found


def _cgroup_of(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cgroup") as fh:
            return next((line[3:].strip() for line in fh if line.startswith("0::")), "")
    except OSError:
        return ""


def test_sigkilled_capture_leaves_no_process_of_the_tree(tmp_path):
    tag = f"fk_tree_{uuid.uuid4().hex}"
    ready = tmp_path / "ready"
    (tmp_path / "worker.py").write_text(WORKER.replace("{tag}-worker", f"{tag}-worker"))
    script = tmp_path / f"serve-{tag}.sh"          # the shell's command line names it
    script.write_text(f"#!/bin/sh\n{sys.executable} {tmp_path / 'worker.py'} {tag} {ready} &\n"
                      "echo serving\nwait\n")
    script.chmod(0o755)
    out = tmp_path / "b"
    fk = subprocess.Popen([sys.executable, "-m", "faultkit.cli", "capture", "-q", "--timeout", "120s", "-o",
                           str(out), "--", str(script)], cwd=ROOT,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        end = time.monotonic() + 30
        while time.monotonic() < end and not ready.exists():
            time.sleep(0.05)
        assert ready.exists(), "the worker never started"
        time.sleep(1.0)                     # a few of the capture's samples of its tree
        tree = _tree_alive(tag)
        # the tree as started: the script, the worker and the escaped daemon
        assert len(tree) == 3, tree
        daemon = [p for p, args in tree if args.endswith(f"# {tag}")]
        assert len(daemon) == 1
        escaped = _cgroup_of(daemon[0])
        fk.send_signal(signal.SIGKILL)
        fk.wait(10)
        end = time.monotonic() + 15
        while time.monotonic() < end and _tree_alive(tag):
            time.sleep(0.1)
        left = _tree_alive(tag)
        assert not left, f"left running after faultkit was SIGKILLed (daemon in cgroup {escaped!r}): {left}"
        m = json.loads((out / "manifest.json").read_text())
        assert m["state"] == "cut" and daemon[0] in m["killed_leftovers"]
    finally:
        if fk.poll() is None:
            fk.kill()
        for pid, _ in _tree_alive(tag):
            os.kill(pid, signal.SIGKILL)
