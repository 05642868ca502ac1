"""Every writing verb on a full filesystem and into a read-only folder (issue 36): one clear line
naming the file, exit 1, no traceback, nothing half-written, and every result that fits kept
(dump's stacks printed, capture refused before its target starts, watch going on and counting the
incident). A real tmpfs filled to its last pages and a real read-only bind mount (root: permissions
would not stop it); skipped where mounting is not allowed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUNDLE = ROOT / "tests" / "data" / "live_h200_tp2_fault"


def _mount(args: list[str]) -> bool:
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


@pytest.fixture
def full(tmp_path):
    """A 64 KiB tmpfs filled to its last byte."""
    mnt = tmp_path / "full"
    mnt.mkdir()
    if not _mount(["-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)]):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        with open(mnt / "filler", "wb", buffering=0) as fh:
            try:
                while True:
                    fh.write(b"\0" * 1024)
            except OSError:
                pass
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


@pytest.fixture
def read_only(tmp_path):
    src, mnt = tmp_path / "src", tmp_path / "ro"
    src.mkdir()
    mnt.mkdir()
    if not (_mount(["--bind", str(src), str(mnt)]) and _mount(["-o", "remount,ro,bind", str(mnt)])):
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
        pytest.skip("cannot make a read-only bind mount here (needs root)")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def cli(*args, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "faultkit.cli", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def clean_refusal(r: subprocess.CompletedProcess, path: Path, why: str) -> None:
    assert r.returncode == 1, (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr[-2000:]
    assert str(path) in r.stderr and why in r.stderr, r.stderr[-2000:]


def leftovers(folder: Path) -> list[str]:
    """Temporaries a writer left (PrivateFile's `.NAME.*.part`)."""
    return [str(p) for p in folder.rglob("*.part")]


WHY = {"full": "No space left on device", "read_only": "Read-only file system"}


@pytest.mark.parametrize("where", ["full", "read_only"])
def test_pack_capture_trials_say_the_file_and_leave_nothing_half_written(request, where):
    out = request.getfixturevalue(where)
    why = WHY[where]
    r = cli("pack", BUNDLE, "-o", out / "p.tar.gz")
    clean_refusal(r, out / "p.tar.gz", why)
    assert not (out / "p.tar.gz").exists()
    r = cli("capture", "--no-coredump", "-o", out / "cap", "--", "sh", "-c", "echo started > /dev/null")
    clean_refusal(r, out / "cap", why)
    assert "nothing was started" in r.stderr or "cannot make the bundle folder" in r.stderr, r.stderr
    assert not (out / "cap").exists()           # the same -o works once there is room
    r = cli("trials", "run", "-n", "1", "-o", out / "trials", "--arm", "a=true", "--arm", "b=true", "--timeout", "5s")
    clean_refusal(r, out / "trials", why)
    assert leftovers(out) == []


@pytest.mark.parametrize("where", ["full", "read_only"])
def test_dump_prints_its_stacks_when_its_folder_cannot_keep_them(request, where):
    out = request.getfixturevalue(where)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)  # fk_dump_full"])
    try:
        r = cli("dump", "--pid", sleeper.pid, "--samples", "1", "-o", out / "dump")
    finally:
        sleeper.kill()
        sleeper.wait()
    clean_refusal(r, out / "dump", WHY[where])
    assert f"pid {sleeper.pid}" in r.stdout and "time.sleep" in r.stdout, r.stdout[-2000:]   # the stacks, whole
    assert leftovers(out) == []


def test_a_registry_that_could_not_be_created_is_not_left_empty(full, tmp_path):
    db = full / "reg.duckdb"
    r = cli("registry", "add", BUNDLE, "--db", db)
    assert r.returncode == 1 and "Traceback" not in r.stderr and WHY["full"] in r.stderr, r.stderr
    assert not db.exists() and not Path(str(db) + ".wal").exists()
    # an empty file from such a failure (as faultkit left it before) is no registry: it is made anew
    empty = tmp_path / "empty.duckdb"
    empty.write_bytes(b"")
    r = cli("registry", "add", BUNDLE, "--db", empty)
    assert r.returncode == 0 and "1 incident(s), 1 new" in r.stderr, r.stderr


@pytest.mark.parametrize("where", ["full", "read_only"])
def test_watch_goes_on_counts_and_prints_the_incident(request, tmp_path, where):
    out = request.getfixturevalue(where)
    if where == "read_only":                     # a spool that exists, on a filesystem now read-only
        (tmp_path / "src" / "spool").mkdir()
    spool = out / "spool"
    prom = spool.parent / "m.prom"
    r = cli("watch", "--mode", "npd", "--from-start", "--quiet-after", "0s", "--spool", spool, "--textfile", prom,
            "--kernel-log", BUNDLE / "kernel.log")
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr[-2000:]
    assert r.returncode == 1, r.stderr              # NPD's "problem": the incident was seen
    # the kernel log's own Xids (13 and 31 on the H200 of this bundle) are counted and printed
    assert "GPU incident: xid-13" in r.stdout and "xid-31" in r.stdout, r.stdout
    assert f"problem: {spool / '.cursors.json'}: not written ({WHY[where]})" in r.stderr, r.stderr
    assert f"problem: {prom}: not written ({WHY[where]})" in r.stderr, r.stderr
    assert not spool.exists() or not [p for p in spool.iterdir() if p.is_dir()]    # no empty incident folder


def test_a_capture_whose_disk_fills_keeps_its_first_manifest_and_says_so(tmp_path):
    """A disk with room for the first manifest and not much more: the target runs to its end, the
    loss is said, no traceback."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if not _mount(["-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)]):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        with open(mnt / "filler", "wb") as fh:
            fh.write(b"\0" * (52 << 10))
        r = cli("capture", "--no-coredump", "-o", mnt / "b", "--", "sh", "-c", "seq 1 20000; echo done > /dev/null")
        assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr[-3000:]
        m = json.loads((mnt / "b" / "manifest.json").read_text())
        assert m["schema"] == "faultkit.bundle/1"
        assert r.returncode in (0, 1), r.stderr[-2000:]
        assert "could not be written" in r.stderr or "disk full" in " ".join(m.get("warnings") or []), r.stderr
        assert leftovers(mnt) == []
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
