"""`capture --pid PID`: a server that already runs. Its output files are followed from their end,
its process tree sampled, its exit noticed; it is never stopped, and nothing is armed that a
runtime reads only at start (GPU core-dump settings, serialization variables): the manifest says so.

Output is readable only where the server writes to files (`python -m sglang... > server.log`):
a pipe or a terminal belongs to whoever holds its other end, and is named as unreadable."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

from .. import layout
from .backends import FaultGrace
from .launcher import LineTee
from .proctree import TreeSampler

NOT_ARMED = ("capture --pid: the server was already running, so the runtimes' GPU core-dump settings "
             "(read at start) could not be armed, and no variable could be given to it; restart it under "
             "`faultkit capture -- COMMAND` for those")


def unfollowed(backend) -> str | None:
    """What of a followed server's output cannot be read (a pipe, a terminal), said at the start:
    the bundle will not have it."""
    while backend is not None and not isinstance(backend, FollowBackend):
        backend = getattr(backend, "target", None)
    if backend is None or not backend.unreadable:
        return None
    return (f"--pid {backend.pid}: its output cannot be followed ({'; '.join(backend.unreadable)}): "
            f"only a file it writes to can be; the bundle has none of that output (start it with its "
            f"output sent to a file, or under `faultkit capture -- COMMAND`)")


class FollowBackend:
    def __init__(self, pid: int, out: Path, grace_s: float):
        self.pid = pid
        self.tee = LineTee(out, layout.SERVER)
        self.files: list[str] = []
        self.unreadable: list[str] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._pipe: tuple[int, int] | None = None
        self.grace = FaultGrace(grace_s)
        self.status: int | None = None     # the followed server's wait status, where it could be read

    def start(self) -> None:
        seen = set()
        opened = []
        for fd in (1, 2):
            link = f"/proc/{self.pid}/fd/{fd}"
            try:
                target = os.readlink(link)
                # Through /proc, not by its name: a deleted log (`rm server.log`, `(deleted)`), or one
                # in the server's own mount namespace (a container), is still the file it writes.
                fh = open(link, "rb")
            except OSError as exc:
                self.unreadable.append(f"fd {fd}: {exc.strerror or exc}")
                continue
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode):
                fh.close()
                self.unreadable.append(f"fd {fd} is {target}: only a file can be followed")
                continue
            if (st.st_dev, st.st_ino) in seen:
                fh.close()
                continue
            seen.add((st.st_dev, st.st_ino))
            self.files.append(target)
            opened.append(fh)
        self._pipe = os.pipe()
        reader = os.fdopen(self._pipe[0], "rb", buffering=0)
        self._threads.append(threading.Thread(target=self.tee.run, args=(reader,), daemon=True))
        for fh in opened:
            self._threads.append(threading.Thread(target=self._follow, args=(fh,), daemon=True))
        for t in self._threads:
            t.start()

    def _follow(self, fh) -> None:
        with fh:
            fh.seek(0, os.SEEK_END)              # what the server writes from now on
            while True:
                stopping = self._stop.is_set()   # read before the last look: what was written before the stop is read
                chunk = fh.read(1 << 16)
                if chunk:
                    try:
                        os.write(self._pipe[1], chunk)
                    except OSError:
                        return
                elif stopping:
                    return                       # drained to the end after the server was gone
                else:
                    try:                         # emptied in place (`: > server.log`, copytruncate): read on from 0
                        if os.fstat(fh.fileno()).st_size < fh.tell():
                            fh.seek(0)
                            continue
                    except OSError:
                        pass
                    self._stop.wait(0.1)

    @property
    def root_pid(self) -> int:
        return self.pid

    @property
    def fault_line(self) -> str | None:
        return self.tee.fault_line

    @property
    def output(self) -> LineTee:
        return self.tee

    @property
    def debuggers(self) -> int:
        return 0

    def step(self, sampler: TreeSampler) -> str | None:
        state, status = _state(self.pid)
        if state != "alive":
            if status is not None:
                self.status = status       # read from /proc while it was a zombie, before its parent reaped it
            return "target-exit"
        return self.grace.step(self.tee)

    def stop(self) -> dict:
        """Ends the following only: the server is not ours to stop."""
        self._stop.set()
        for t in self._threads[1:]:
            t.join(timeout=10)                   # each reads its file to the end first
        if self._pipe is not None:
            os.close(self._pipe[1])
            self._threads[0].join(timeout=5)
        code = None
        if self.status is not None:
            code = os.waitstatus_to_exitcode(self.status)
        followed = {"pid": self.pid, "files": self.files, "unreadable": self.unreadable,
                    "status_from": "/proc (zombie)" if code is not None else None}
        if code is None:
            followed["note"] = ("not faultkit's child: its exit status could not be read (its parent reaped it "
                                "first); the kernel log and cores may still show how it ended")
        return {"exit_code": code, "stopped_with": [], "followed": followed,
                "exit": None if code is not None else "exit status unknown (not faultkit's child)"}


def _state(pid: int) -> tuple[str, int | None]:
    """('alive'|'zombie'|'gone', the wait status a zombie holds, field 52 of its stat (Linux 3.5+))."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return "gone", None
    if fields[0] not in (b"Z", b"X"):
        return "alive", None
    try:
        return "zombie", int(fields[49])
    except (IndexError, ValueError):
        return "zombie", None
