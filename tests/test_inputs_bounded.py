"""Issue 28 (memory and archives) and issue 21 B (inputs): each reproducer through the real
readers or CLI. Memory is measured in a child process (its own peak RSS), never in this one."""

from __future__ import annotations

import gzip
import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from faultkit import limits
from faultkit.bundle import collect
from faultkit.export.report import to_json
from faultkit.triage import triage

FAULT = ("Memory access fault by GPU node-2 (Agent handle: 0x55d1) on address 0x7f0000001000. "
         "Reason: Page not present or supervisor privilege.\n")
DMESG = ("[   12.000000] amdgpu 0000:c1:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 ring:24 vmid:9 "
         "pasid:32770, for process py pid 1111 thread py pid 1111)\n"
         "[   12.000010] amdgpu 0000:c1:00.0: amdgpu:   in page starting at address 0x00000000dead0000 from IH "
         "client 0x1b (UTCL2)\n")
CORE_HEAD = b"\x7fELF\x02\x01\x01" + bytes(9) + b"\x04\x00" + bytes(46)     # ELF64 LE, e_type ET_CORE


def cli(*args, stdin: str | None = None, timeout=120, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "faultkit.cli", *args], capture_output=True, text=True,
                          input=stdin, timeout=timeout, env=env)


# The peak of this process's own memory: VmHWM starts again at exec, while ru_maxrss keeps the
# forking parent's (pytest's) peak across it.
PEAK = "int(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1]) // 1024"


def child(code: str, *args, timeout=300, preexec=None) -> dict:
    """Run `code` in a fresh interpreter; it prints one JSON line with what it found and its peak RSS."""
    prog = ("import json, resource, sys\nfrom faultkit.triage import triage\nfrom faultkit.export.report import to_json\n"
            + code + "\nout['rss_mb'] = " + PEAK + "\nprint(json.dumps(out))")
    res = subprocess.run([sys.executable, "-c", prog, *args], capture_output=True, text=True, timeout=timeout,
                         preexec_fn=preexec)
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


class Repeat(io.RawIOBase):
    """`size` bytes of a repeated line, then `tail`: a big member written without holding it."""

    def __init__(self, size: int, line: bytes, tail: bytes = b""):
        self.left, self.line, self.tail = size - len(tail), line, tail
        self.buf = line * (1 << 20 // len(line) + 1)

    def readable(self):
        return True

    def readinto(self, b):
        if self.left > 0:
            n = min(len(b), self.left, len(self.buf))
            b[:n] = self.buf[:n]
            self.left -= n
            return n
        n = min(len(b), len(self.tail))
        b[:n], self.tail = self.tail[:n], self.tail[n:]
        return n


def add(t: tarfile.TarFile, name: str, size: int, line: bytes, tail: bytes = b"") -> None:
    info = tarfile.TarInfo(name)
    info.size = size
    t.addfile(info, io.BufferedReader(Repeat(size, line, tail), 1 << 20))


FILLER = b"[2026-11-20 10:17:42 TP0] Decode batch. #running-req: 12, cuda graph: True, #queue-req: 0\n"


def test_archive_members_are_streamed_not_held(tmp_path):
    """#28: six 250 MB members took 2.1 GB RSS (all held until parsed). Six 64 MB members here:
    the fault in the last one is found, and the peak stays far below what holding them would take."""
    arc = tmp_path / "six.tar.gz"
    with tarfile.open(arc, "w:gz", compresslevel=1) as t:
        for i in range(6):
            add(t, f"b/worker{i}.log", 64 << 20, FILLER, FAULT.encode() if i == 5 else b"")
    out = child("d = to_json(triage([sys.argv[1]])); out = {'faults': [f['address'] for f in d['faults']], "
                "'inputs': [i['name'] for i in d['inputs']]}", str(arc))
    assert out["faults"] == ["0x7f0000001000"]
    assert out["inputs"] == [f"{arc}:b/worker{i}.log" for i in range(6)]     # named by their path in the archive
    assert out["rss_mb"] < 250, out          # 384 MB of members, never all held (163 MB measured alone)


def test_a_core_member_is_copied_with_a_cap_and_removed_after(tmp_path):
    arc = tmp_path / "b.tar.gz"
    # the member's first bytes say it is a core, whatever its name
    with tarfile.open(arc, "w:gz") as t:
        info = tarfile.TarInfo("b/gpucore.1234")
        body = CORE_HEAD + bytes((8 << 20) - len(CORE_HEAD))
        info.size = len(body)
        t.addfile(info, io.BytesIO(body))
        info = tarfile.TarInfo("b/server.log")
        info.size = len(FAULT)
        t.addfile(info, io.BytesIO(FAULT.encode()))
    inputs = collect([str(arc)], limits.Budget(core=1 << 20))
    try:
        assert len(inputs.cores) == 1
        copy = Path(inputs.cores[0])
        assert copy.stat().st_size == 1 << 20                        # capped, not 8 MB
        assert (copy.stat().st_mode & 0o777) == 0o600
        assert inputs.shown[str(copy)] == f"{arc}:b/gpucore.1234"
        assert any("only the first 1,048,576 were copied" in p.message for p in inputs.problems)
    finally:
        inputs.close()
    assert not copy.exists()


def test_copies_out_of_an_archive_are_removed_on_sigterm(tmp_path):
    arc = tmp_path / "b.tar.gz"
    with tarfile.open(arc, "w:gz") as t:
        body = CORE_HEAD + bytes(1 << 20)
        info = tarfile.TarInfo("b/gpucore.9")
        info.size = len(body)
        t.addfile(info, io.BytesIO(body))
    prog = ("import sys, time\nfrom faultkit.bundle import collect\ni = collect([sys.argv[1]])\n"
            "print(i.cores[0], flush=True)\ntime.sleep(60)")
    p = subprocess.Popen([sys.executable, "-c", prog, str(arc)], stdout=subprocess.PIPE, text=True)
    try:
        copy = Path(p.stdout.readline().strip())
        assert copy.exists()
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=30) == -signal.SIGTERM                  # the signal's own ending is kept
    finally:
        if p.poll() is None:
            p.kill()
    assert not copy.exists() and not copy.parent.parent.exists()


def _limit_address_space():
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


def test_archives_are_read_under_a_4_gib_address_space(tmp_path):
    """#28: every member read reserved a 4 GiB buffer, so under `ulimit -v 4G` every .tar.gz failed."""
    arc = tmp_path / "b.tar.gz"
    with tarfile.open(arc, "w:gz") as t:
        info = tarfile.TarInfo("b/server.log")
        info.size = len(FAULT)
        t.addfile(info, io.BytesIO(FAULT.encode()))
    out = child("d = to_json(triage([sys.argv[1]])); out = {'faults': [f['address'] for f in d['faults']], "
                "'problems': d['problems']}", str(arc), preexec=_limit_address_space)
    assert out["faults"] == ["0x7f0000001000"], out


def test_a_member_with_an_over_long_path_does_not_drop_the_others(tmp_path):
    """#28: one member with an over-long path dropped the rest of the archive, fault log included."""
    arc = tmp_path / "b.tar.gz"
    with tarfile.open(arc, "w:gz", format=tarfile.PAX_FORMAT) as t:
        long = "b/cores/" + "/".join(["d" * 200] * 30) + "/gpucore.77"
        body = CORE_HEAD + bytes(4096)
        for name, data in ((long, body), ("b/" + "x" * 5000 + ".log", b"nothing here\n"), ("b/server.log", FAULT.encode())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    doc = to_json(triage([str(arc)]))
    assert [f["address"] for f in doc["faults"]] == ["0x7f0000001000"]
    assert len(doc["cores"]) == 1 and doc["cores"][0]["path"] == f"{arc}:{long}"


def test_a_damaged_member_keeps_the_members_before_it(tmp_path):
    arc = tmp_path / "b.tar.gz"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for name, data in (("b/server.log", FAULT.encode()), ("b/other.log", os.urandom(100_000))):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    arc.write_bytes(gzip.compress(buf.getvalue())[:-2000])           # cut inside the second member
    res = cli("triage", str(arc), "--format", "json")
    doc = json.loads(res.stdout)
    assert [f["address"] for f in doc["faults"]] == ["0x7f0000001000"]
    assert any("archive cut or unreadable" in p for p in doc["problems"])


def test_stdin_is_read_with_dash():
    res = cli("triage", "-", "--format", "json", stdin=DMESG)
    doc = json.loads(res.stdout)
    assert res.returncode == 0, res.stderr
    assert [f["address"] for f in doc["faults"]] == ["0xdead0000"]
    assert [i["name"] for i in doc["inputs"]] == ["<stdin>"]


def test_a_fifo_path_is_read_as_a_stream(tmp_path):
    fifo = tmp_path / "dmesg.pipe"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", f"printf '%s' \"$0\" > {fifo}", DMESG])
    res = cli("triage", str(fifo), "--format", "json", timeout=60)
    writer.wait(timeout=10)
    assert [f["address"] for f in json.loads(res.stdout)["faults"]] == ["0xdead0000"]


@pytest.mark.parametrize("suffix", [".gz", ".xz", ".bz2", ".zst"])
def test_single_compressed_files_are_read_like_archives(tmp_path, suffix):
    import bz2
    import lzma

    import zstandard
    pack = {".gz": gzip.compress, ".xz": lzma.compress, ".bz2": bz2.compress,
            ".zst": zstandard.ZstdCompressor().compress}[suffix]
    f = tmp_path / f"server.log{suffix}"
    f.write_bytes(pack(FAULT.encode()))
    doc = to_json(triage([str(f)]))
    assert [f_["address"] for f_ in doc["faults"]] == ["0x7f0000001000"]
    assert doc["inputs"][0]["name"] == str(f)


def test_a_compressed_bomb_is_read_bounded(tmp_path):
    f = tmp_path / "bomb.log.gz"
    with gzip.open(f, "wb", compresslevel=1) as w:
        block = FILLER * 10_000
        for _ in range(64):
            w.write(block)
        w.write(FAULT.encode())
    inputs = collect([str(f)], limits.Budget(member=8 << 20))
    got = inputs.files[0].log()
    assert got.size == 8 << 20                                        # the bound, not the 60 MB inside
    assert any("over the 8,388,608-byte bound" in p.message for p in got.problems)


def test_corrupt_archive_and_empty_folder_are_unreadable_input(tmp_path):
    (tmp_path / "bad.tar.gz").write_bytes(gzip.compress(b"not a tar archive at all" * 100))
    (tmp_path / "empty").mkdir()
    (tmp_path / "server.log").write_text(FAULT)
    res = cli("triage", str(tmp_path / "bad.tar.gz"), str(tmp_path / "empty"), str(tmp_path / "server.log"),
              "--format", "json")
    assert res.returncode == 1
    assert [f["address"] for f in json.loads(res.stdout)["faults"]] == ["0x7f0000001000"]   # the rest is covered
    assert "bad.tar.gz: archive cut or unreadable" in res.stderr and "empty: an empty folder" in res.stderr


@pytest.mark.skipif(not os.path.exists("/proc/kmsg"), reason="no /proc/kmsg here")
def test_kernel_interface_files_are_refused_by_kind(tmp_path):
    (tmp_path / "server.log").write_text(FAULT)
    res = cli("triage", "/proc/kmsg", "/proc/self/status", str(tmp_path / "server.log"), "--format", "json",
              timeout=60)
    assert res.returncode == 1
    assert "/proc/kmsg: a kernel interface file (proc)" in res.stderr
    assert [f["address"] for f in json.loads(res.stdout)["faults"]] == ["0x7f0000001000"]


def test_links_in_a_folder_never_leave_it(tmp_path):
    b = tmp_path / "b"
    b.mkdir()
    outside = tmp_path / "secret.log"
    outside.write_text(FAULT)
    os.symlink(outside, b / "server.log")
    (b / "real.log").write_text(DMESG)
    os.symlink(b / "real.log", b / "inside.log")
    doc = to_json(triage([str(b)]))
    assert [f["address"] for f in doc["faults"]] == ["0xdead0000", "0xdead0000"]   # real.log and its link inside
    assert any(p.endswith("server.log: a link out of the folder: not followed") for p in doc["problems"])


def test_lock_and_empty_logs_are_not_inputs(tmp_path):
    (tmp_path / "manifest.json").write_text('{"schema": "faultkit.bundle/1"}')
    (tmp_path / ".lock").write_text("")
    (tmp_path / "kernel.log").write_text("")
    (tmp_path / "server.log").write_text(FAULT)
    doc = to_json(triage([str(tmp_path)]))
    assert [Path(i["name"]).name for i in doc["inputs"]] == ["server.log"]


def test_a_folder_nested_1100_deep_is_read_without_an_error(tmp_path):
    (tmp_path / "server.log").write_text(FAULT)
    d = tmp_path
    for _ in range(1100):
        d = d / "d"
        try:
            d.mkdir()
        except OSError:           # the path grew past PATH_MAX: deep enough
            break
    try:
        doc = to_json(triage([str(tmp_path)]))
    finally:
        # bottom-up, without recursion: pytest's own clean-up of old temporary folders recurses
        # (shutil.rmtree on Python < 3.12) and fails at the end of a later session on this folder
        while d != tmp_path:
            d.rmdir() if d.exists() else None
            d = d.parent
    assert [f["address"] for f in doc["faults"]] == ["0x7f0000001000"]
    assert any("nested more than" in p for p in doc["problems"])
    assert not any("internal" in p for p in doc["problems"])


def test_members_past_the_hold_bound_are_kept_as_excerpts(tmp_path):
    arc = tmp_path / "many.tar"
    with tarfile.open(arc, "w") as t:
        for i in range(4):
            add(t, f"b/w{i}.log", 2 << 20, FILLER, FAULT.encode())
    inputs = collect([str(arc)], limits.Budget(hold=3 << 20))
    held = [f.log().text for f in inputs.files]
    assert [hasattr(x, "stretches") for x in held] == [False, False, True, True]    # 2 MiB each, 3 MiB held at most
    assert all(len(x) < 100_000 for x in held[2:])
    assert len(to_json(triage([str(arc)]))["faults"]) == 4


def test_a_member_copied_out_but_read_as_a_log_is_read_from_its_copy(tmp_path):
    # under rocprofv3/ it would be a trace in a capture bundle; without a manifest it is a log
    arc = tmp_path / "b.tar.gz"
    with tarfile.open(arc, "w:gz") as t:
        info = tarfile.TarInfo("b/rocprofv3/notes.txt")
        info.size = len(FAULT)
        t.addfile(info, io.BytesIO(FAULT.encode()))
    doc = to_json(triage([str(arc)]))
    assert [f["address"] for f in doc["faults"]] == ["0x7f0000001000"]
    assert [i["name"] for i in doc["inputs"]] == [f"{arc}:b/rocprofv3/notes.txt"]


def test_a_core_named_in_a_bundle_folder_of_an_archive_is_listed(tmp_path):
    arc = tmp_path / "b.tar.gz"
    with tarfile.open(arc, "w:gz") as t:
        for name, data in (("incident/manifest.json", b'{"schema": "faultkit.bundle/1"}'),
                           ("incident/cores/gpucore.77", b"not an ELF core"), ("incident/server.log", FAULT.encode())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    doc = to_json(triage([str(arc)]))
    assert [c["path"] for c in doc["cores"]] == [f"{arc}:incident/cores/gpucore.77"]
    assert "named like a core but not an ELF core file" in json.dumps(doc["cores"])
