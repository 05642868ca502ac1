"""A throwaway PostgreSQL server for the registry's tests: Debian's package, a cluster in a temporary
folder, a Unix socket only (nothing listens on the network), stopped at the end."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
from pathlib import Path


def _bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


def why_not() -> str | None:
    if _bin("initdb") is None or _bin("pg_ctl") is None:
        return "PostgreSQL server not installed (Debian: apt-get install postgresql)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and no 'postgres' user to run the server as"
    return None


class Server:
    def __init__(self, folder: Path):
        self.folder = folder
        self.data = folder / "data"
        self.user = None
        if os.geteuid() == 0:           # initdb refuses root: the package's own user runs it
            self.user = "postgres"
            pw = pwd.getpwnam("postgres")
            os.chown(folder, pw.pw_uid, pw.pw_gid)
        self.dsn = f"host={folder} port=5432 user=postgres dbname=postgres"

    def _run(self, *cmd: str) -> subprocess.CompletedProcess:
        argv = list(cmd) if self.user is None else ["runuser", "-u", self.user, "--", *cmd]
        return subprocess.run(argv, capture_output=True, text=True, timeout=120)

    def start(self) -> None:
        r = self._run(_bin("initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")
        if r.returncode:
            raise RuntimeError(f"initdb failed: {r.stderr[-500:]}")
        opts = f"-c listen_addresses='' -c unix_socket_directories={self.folder} -c fsync=off"
        r = self._run(_bin("pg_ctl"), "-D", str(self.data), "-o", opts, "-l", str(self.folder / "log"), "-w", "start")
        if r.returncode:
            raise RuntimeError(f"pg_ctl start failed: {r.stderr[-500:]} {(self.folder / 'log').read_text()[-500:]}")

    def stop(self) -> None:
        self._run(_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
