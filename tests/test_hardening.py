"""Bad input and hostile conditions: bounded time and memory, no traceback, no lost results."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import threading
import time

import pytest
from click.testing import CliRunner

from faultkit.bundle import collect
from faultkit.cli import main
from faultkit.export.report import to_json
from faultkit.triage import build

from .conftest import no_internal_errors

FAULT = ("Memory access fault by GPU node-2 (Agent handle: 0x55d1) on address 0x7f0000001000. "
         "Reason: Page not present or supervisor privilege.\n")


def run_cli(*args, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "faultkit.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_long_lines_are_linear(tmp_path):
    """Each of these took 20 s to minutes per 100 KB line before (quadratic regexes)."""
    lines = ["x" * 300_000, "a1" * 150_000, "Error" * 60_000, " " * 300_000, "1" * 300_000, "ab." * 100_000,
             "A" * 150_000 + "[", "0x" + "f" * 300_000, "=> " * 100_000, "HIP error: " + "x" * 300_000,
             "Queue error " * 30_000, "Traceback (most recent call last):" + " " * 300_000]
    log = tmp_path / "server.log"
    log.write_text("\n".join(lines) + "\n" + FAULT)
    res = run_cli("triage", str(log), "--format", "json", timeout=60)     # a hang guard, not a speed target
    doc = json.loads(res.stdout)
    assert doc["faults"][0]["address"] == "0x7f0000001000"
    # Lines that may hold a message are read cut, and said; the rest are passed over unread.
    assert sum("only its first and last" in p for p in doc["problems"]) >= 3


def test_fifo_and_devices_are_not_read(tmp_path):
    fifo = tmp_path / "pipe.log"
    os.mkfifo(fifo)
    (tmp_path / "server.log").write_text(FAULT)
    os.symlink("/dev/zero", tmp_path / "zero.log")
    res = run_cli("triage", str(tmp_path), "/dev/urandom", "--format", "json", timeout=60)
    doc = json.loads(res.stdout)
    assert len(doc["faults"]) == 1
    problems = "\n".join(doc["problems"])
    # a FIFO inside a folder would block the walk; a link to a device leaves the folder; a device named
    assert "pipe.log: not a regular file" in problems
    assert "zero.log: a link out of the folder" in problems
    assert "/dev/urandom: a device" in problems
    assert res.returncode == 1                  # an input named could not be read


def test_gzip_bomb_member_is_read_bounded(tmp_path):
    """A 2 MB archive holding a 1 GiB log of zeros with the fault at its end: read as a stream through
    the prefilter, the fault is found and the member is never held."""
    tar_path = tmp_path / "bomb.tar.gz"
    size = 1 << 30

    class Zeros(io.RawIOBase):
        def __init__(self):
            self.left = size - len(FAULT)
            self.tail = FAULT.encode()

        def readable(self):
            return True

        def readinto(self, b):
            if self.left > 0:
                n = min(len(b), self.left)
                b[:n] = bytes(n)
                self.left -= n
                return n
            n = min(len(b), len(self.tail))
            b[:n], self.tail = self.tail[:n], self.tail[n:]
            return n

    with tarfile.open(tar_path, "w:gz", compresslevel=1) as t:
        info = tarfile.TarInfo("b/server.log")
        info.size = size
        t.addfile(info, io.BufferedReader(Zeros(), 1 << 20))
    code = ("import resource, sys, json; from faultkit.triage import triage; from faultkit.export.report import to_json; "
            "d = to_json(triage([sys.argv[1]])); "
            "print(json.dumps({'faults': len(d['faults']), 'problems': d['problems'], "
            "'rss_mb': int(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1]) // 1024}))")
    res = subprocess.run([sys.executable, "-c", code, str(tar_path)], capture_output=True, text=True, timeout=300)
    out = json.loads(res.stdout)
    assert out["faults"] == 1, out
    assert any("a line longer than" in p for p in out["problems"]), out["problems"]   # one line of zeros, said
    assert out["rss_mb"] < 300, out                       # not the 1 GiB member (it took 1.4 GB before)


@pytest.mark.parametrize("manifest", ["[1]", '"x"', '{"schema": "faultkit.bundle/1", "start": "yesterday"}',
                                      '{"schema": "faultkit.bundle/1", "cores": [1, {"path": 3}], "start": {"boottime_ns": "x"}}',
                                      '{"schema": "other/9"}', "{cut"])
def test_malformed_manifest_never_raises(tmp_path, manifest):
    (tmp_path / "manifest.json").write_text(manifest)
    (tmp_path / "server.log").write_text(FAULT)
    (tmp_path / "environ.json").write_text('{"not": "a list"}')
    inc = build(collect([str(tmp_path)]))
    no_internal_errors(inc.problems)
    doc = to_json(inc)
    assert doc["faults"][0]["address"] == "0x7f0000001000"


def test_triage_never_reads_its_own_report(tmp_path):
    (tmp_path / "server.log").write_text(FAULT)
    runner = CliRunner()
    runner.invoke(main, ["triage", str(tmp_path), "--format", "json", "-o", str(tmp_path / "report.json")])
    res = runner.invoke(main, ["triage", str(tmp_path), "--format", "json"])
    doc = json.loads(res.output[res.output.index("{"):])
    assert len(doc["faults"]) == 1 and all("report.json" not in i["name"] for i in doc["inputs"])


@pytest.mark.parametrize("args, words", [
    (["capture", "--port", "70000", "--", "true"], "70000"),
    (["capture", "--port", "-1", "--", "true"], "-1"),
    (["capture", "--timeout", "nan", "--", "true"], "finite"),
    (["capture", "--timeout", "-5s", "--", "true"], "not negative"),
    (["capture", "--with", "gdb", "--attach-match", "(", "--", "true"], "not a regular expression"),
    (["trials", "run", "--arm", "a=true", "--arm", "b=true", "-n", "-3"], "-3"),
    (["trials", "run", "--arm", "a=true", "--arm", "b=true", "--ready-pattern", "("], "not a regular expression"),
    (["triage", "x.log", "--window", "-2s"], "not negative"),
])
def test_bad_option_values_are_usage_errors(tmp_path, args, words):
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2 and words in res.output and "Traceback" not in res.output


def test_cut_trials_files_are_said_not_dropped(tmp_path):
    out = tmp_path / "t"
    runner = CliRunner()
    res = runner.invoke(main, ["trials", "run", "--arm", "a=true", "--arm", "b=false", "-n", "2", "--trial-timeout",
                               "20s", "-o", str(out)])
    assert res.exit_code == 0, res.output
    results = sorted(out.glob("trial-*/result.json"))
    results[0].write_text(results[0].read_text()[:40])             # cut mid-write
    results[1].write_text('{"arm": 3}')                           # wrong types
    rep = runner.invoke(main, ["trials", "report", str(out), "--format", "json"])
    assert rep.exit_code == 0 and rep.output.count("cut or malformed") == 2
    again = runner.invoke(main, ["trials", "run", "--arm", "a=true", "--arm", "b=false", "-n", "2", "--trial-timeout",
                                 "20s", "-o", str(out)])
    assert again.exit_code == 0 and again.output.count("is run again") == 2
    (out / "plan.json").write_text('{"order": [1, 2]}')
    bad = runner.invoke(main, ["trials", "run", "--arm", "a=true", "--arm", "b=false", "-n", "2", "-o", str(out)])
    assert bad.exit_code == 1 and "not a faultkit trials plan" in bad.output


def test_huge_dispatch_id_does_not_enumerate_the_range(tmp_path):
    from tests.test_traces import FAULT_NS, MS, bundle, k70

    ks = [k70(1, 1, 1, 9, 1, "a", 1, FAULT_NS - 5 * MS, FAULT_NS - 4 * MS),
          k70(1, 1, 1, 9, 1 << 60, "cut_row", 2, FAULT_NS - 3 * MS, FAULT_NS - 2 * MS)]
    done = threading.Event()
    result = {}

    def go():
        result["doc"] = to_json(build(collect([str(bundle(tmp_path, kernels=ks))])))
        done.set()

    threading.Thread(target=go, daemon=True).start()
    assert done.wait(60), "in_flight enumerated the id range"
    gaps = [s for s in result["doc"]["trace"]["in_flight"] if s["kind"] == "dispatch-id-gap"]
    assert 0 < len(gaps) <= 1000


def test_capture_refuses_a_non_empty_folder_and_a_concurrent_capture(tmp_path):
    out = tmp_path / "b"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    res = CliRunner().invoke(main, ["capture", "-o", str(out), "--", "true"])
    assert res.exit_code == 1 and "not empty" in res.output and (out / "notes.txt").read_text() == "mine"
    # A command of this run alone: the same-command guard refuses one that another run on the machine runs now.
    first = subprocess.Popen([sys.executable, "-m", "faultkit.cli", "capture", "-o", str(tmp_path / "c"), "--",
                              sys.executable, "-c", "import time; time.sleep(5)", str(tmp_path)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        import time
        end = time.monotonic() + 20
        while not (tmp_path / "c" / "manifest.json").exists() and time.monotonic() < end:
            time.sleep(0.1)
        res = CliRunner().invoke(main, ["capture", "--force", "-o", str(tmp_path / "c"), "--", "true"])
        assert res.exit_code == 1 and "another faultkit capture is writing" in res.output
    finally:
        first.wait(60)


def test_stale_server_on_ipv6_loopback_is_seen(tmp_path):
    import socket

    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    try:
        s.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback here")
    s.listen(1)
    port = s.getsockname()[1]
    try:
        res = CliRunner().invoke(main, ["capture", "--port", str(port), "-o", str(tmp_path / "b"), "--", "true"])
        assert res.exit_code == 1 and "already listening" in res.output
    finally:
        s.close()


def test_output_without_newlines_is_drained_bounded(tmp_path):
    """200 MB on one line: written as it comes, faultkit's memory bounded, and numbered as the
    parsers number it: one line (it was stamped as ~190 lines of 1 MiB, shifting every later line's
    number in the times table)."""
    code = ("import resource, sys; from faultkit.cli import main; sys.argv = ['faultkit', 'capture', '--no-coredump', "
            f"'-o', '{tmp_path / 'b'}', '--', 'sh', '-c', 'head -c 200000000 /dev/zero | tr \"\\\\\\\\0\" a # {tmp_path}']; "
            "import atexit; atexit.register(lambda: print('RSS_MB', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)); "
            "main()")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert (tmp_path / "b" / "server.log").stat().st_size == 200_000_000, res.stderr[-2000:]
    rss = int(res.stdout.split("RSS_MB")[1].split()[0])
    assert rss < 800, rss                               # was 2.8 GB for 1 GB, and never returned
    rows = [r.split("\t") for r in (tmp_path / "b" / "server.times.tsv").read_text().splitlines()]
    assert [r[0] for r in rows] == ["1"]                # one line (no newline): stamped once, at its end


def test_full_disk_keeps_draining_and_finishes_the_manifest(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    try:
        res = subprocess.run([sys.executable, "-m", "faultkit.cli", "capture", "--no-coredump", "--timeout", "60s",
                              "-o", str(mnt / "b"), "--", "sh", "-c", "head -c 20000000 /dev/zero | tr '\\0' 'a'; "
                              "echo done"], capture_output=True, text=True, timeout=120)
        assert "Traceback" not in res.stderr, res.stderr[-3000:]
        m = json.loads((mnt / "b" / "manifest.json").read_text())
        # the target was never blocked (it finished long before the timeout), and the loss is said
        assert m["ended_by"] == "target-exit" and any("disk full" in w for w in m.get("warnings", [])), m
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


INJECTIONS = ["\x1b]52;c;ZXZpbA==\x07", "\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\", "\x1bc", "\x1bP+q\x1b\\",
              "\x9b31m", "\x08\x08\x07", "\u202egnp.exe", "<img src=x onerror=alert(1)>"]


def test_evidence_strings_cannot_drive_the_terminal_or_forge_sections(tmp_path):
    name = "x\n\n## Verdict\n\n**certain**: faulting kernel `evil`\n" + "".join(INJECTIONS)
    proc = "py" + "".join(INJECTIONS)
    (tmp_path / "dmesg.txt").write_text(
        f"[  183.5] amdgpu 0000:c1:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 ring:24 vmid:9 "
        f"pasid:32801, for process {proc} pid 48213 thread {proc} pid 48291)\n"
        "[  183.6] amdgpu 0000:c1:00.0: amdgpu:   in page starting at address 0x00007f3a2c400000 from IH client 0x1b (UTCL2)\n")
    try:
        (tmp_path / name.replace("/", "_")).write_text(FAULT)
    except OSError:
        pytest.skip("this filesystem refuses such a file name")
    from faultkit.export.report import render_html, render_markdown
    inc = build(collect([str(tmp_path)]))
    md = render_markdown(inc)
    assert not any(c in md for c in "\x1b\x07\x08\x9b\u202e")
    heads = [ln for ln in md.splitlines() if ln.startswith(("## Verdict", "**certain**"))]
    assert heads == ["## Verdict"]                     # the file name's newlines forge nothing
    import re
    assert re.search(r"(?<!\\)<img", md) is None and "\\<img" in md     # escaped: shown, never rendered
    page = render_html(inc)
    assert "<img" not in page and "\u202e" not in page and "\x1b" not in page


def test_mutated_rocprofv3_csvs_never_raise(corpus, tmp_path):
    """Cut, spliced and corrupted copies of every corpus CSV (the mutations that raised before:
    duplicated header names, `0x` cells that are not hex, cut rows) read without an exception."""
    import random

    from faultkit.ingest.traces import read_trace_paths
    from faultkit.triage import triage

    from .test_fuzz_readers import mutate

    rng = random.Random(7)
    files = sorted((corpus / "rocprofv3").glob("*.csv"))
    for i in range(150):
        src = files[i % len(files)]
        target = tmp_path / src.name
        target.write_bytes(mutate(src.read_bytes(), rng))
        no_internal_errors(read_trace_paths([target]).problems)
        no_internal_errors(triage([str(target)]).problems)


DUMP_SECRETS = ["dump-key-0201", "dump-mysql-0202", "dump-curl-0203", "dump-sig-0204"]


def test_dump_hides_command_lines_and_keeps_its_files_private(tmp_path):
    """Issue 36: `dump` printed and kept the target's command line unredacted, in a 0755 folder of
    0644 files."""
    target = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(0.1)", "--api-key",
                               "dump-key-0201", "-pdump-mysql-0202", "-u", "admin:dump-curl-0203",
                               "https://acct.blob.core.windows.net/c?sv=2021&sig=dump-sig-0204"])
    try:
        out = tmp_path / "stacks"
        res = run_cli("dump", "--pid", str(target.pid), "--samples", "1", "-o", str(out))
        js = run_cli("dump", "--pid", str(target.pid), "--samples", "1", "--format", "json")
    finally:
        target.kill()
        target.wait()
    assert res.returncode in (0, 1), res.stderr
    assert f"Process {target.pid}" in res.stdout and "--api-key <redacted>" in res.stdout, res.stdout
    assert "-u admin:<redacted>" in res.stdout and "sig=<redacted>" in res.stdout
    for text in (res.stdout, res.stderr, js.stdout, js.stderr):
        assert not [s for s in DUMP_SECRETS if s in text], text
    files = [p for p in out.rglob("*") if p.is_file()]
    assert files, "dump -o kept nothing"
    assert not [(p.name, s) for p in files for s in DUMP_SECRETS if s.encode() in p.read_bytes()]
    assert oct(out.stat().st_mode & 0o777) == "0o700"
    assert {oct(p.stat().st_mode & 0o777) for p in files} == {"0o600"}


def test_output_patterns_cannot_leave_the_folder(tmp_path):
    """Issue 36: `%h` was not sanitized (a host name `../../x` put the bundle two levels up) and `%j`
    accepted `..`."""
    import shutil
    runs = tmp_path / "a" / "b" / "runs"
    runs.mkdir(parents=True)
    env = {**os.environ, "SLURM_JOB_ID": "..", "SLURM_PROCID": "0"}
    res = subprocess.run([sys.executable, "-m", "faultkit.cli", "capture", "-q", "-o", str(runs / "%j" / "b"),
                          "--", "true"], capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 0, res.stderr
    assert [p.name for p in runs.iterdir()] == ["__"] and (runs / "__" / "b" / "manifest.json").is_file()
    if not shutil.which("unshare"):
        pytest.skip("needs unshare to give the capture a host name of its own")
    # the host name of a UTS namespace of its own (sethostname takes any bytes but NUL)
    code = ("import socket, sys; socket.sethostname('../../x'); sys.argv[0] = 'faultkit'; "
            "from faultkit.cli import run; run()")
    res = subprocess.run(["unshare", "-u", sys.executable, "-c", code, "capture", "-q", "-o", str(runs / "%h"), "--",
                          "true"], capture_output=True, text=True, timeout=120)
    if "Operation not permitted" in res.stderr:
        pytest.skip("unshare -u needs CAP_SYS_ADMIN here")
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in runs.iterdir()) == [".._.._x", "__"]
    assert not (tmp_path / "a" / "x").exists() and not (tmp_path / "x").exists()


def _amd_fault(pid: int) -> str:
    # amdgpu's fault line (the form of the corpus's gfx9 block), one process each
    return (f"[ 100.000000] amdgpu 0000:c6:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 ring:24 vmid:8 "
            f"pasid:32768, for process pt_main_thread pid {pid} thread pt_main_thread pid {pid})\n")


def test_concurrent_registry_adds_all_land_and_readers_never_block(tmp_path):
    """Issue 36: a DuckDB registry takes one writer; 7 of 8 concurrent `registry add`s failed."""
    pytest.importorskip("duckdb")
    db = tmp_path / "reg.duckdb"
    logs = []
    for i in range(8):
        p = tmp_path / f"node{i}.log"
        p.write_text(_amd_fault(5000 + i))
        logs.append(p)
    procs = [subprocess.Popen([sys.executable, "-m", "faultkit.cli", "registry", "add", "--db", str(db), "--node",
                               f"n{i}", str(p)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i, p in enumerate(logs)]
    # readers at the same time, once the first add made the registry (a reader never makes one)
    end = time.monotonic() + 120
    while not db.exists() and time.monotonic() < end:
        time.sleep(0.02)
    readers = [subprocess.Popen([sys.executable, "-m", "faultkit.cli", "registry", "top", "--db", str(db), "-f", "json"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [p.communicate(timeout=240) + (p.returncode,) for p in procs + readers]
    assert [r[2] for r in results] == [0] * 10, [r[1] for r in results if r[2]]
    top = run_cli("registry", "top", "--db", str(db), "-f", "json")
    assert top.returncode == 0 and json.loads(top.stdout)["incidents"] == 8, top.stdout
    assert {oct(p.stat().st_mode & 0o777) for p in tmp_path.glob("reg.duckdb*")} == {"0o600"}


def test_a_sqlite_file_as_registry_is_said_and_nothing_is_fetched(tmp_path):
    pytest.importorskip("duckdb")
    import sqlite3
    db = tmp_path / "other.db"
    sqlite3.connect(db).execute("CREATE TABLE t (x)").connection.commit()
    home = tmp_path / "home"
    home.mkdir()
    res = subprocess.run([sys.executable, "-m", "faultkit.cli", "registry", "top", "--db", str(db)],
                         capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(home)})
    assert res.returncode == 1 and f"{db}: not a DuckDB registry (a SQLite database)" in res.stderr, res.stderr
    assert "internal error" not in res.stderr and "Traceback" not in res.stderr
    assert not (home / ".duckdb").exists()            # no extension was fetched nor looked for
    assert sqlite3.connect(db).execute("SELECT name FROM sqlite_master").fetchall() == [("t",)]    # untouched


@pytest.fixture(scope="module")
def fault_report_json(tmp_path_factory) -> str:
    """The JSON report of a triage of FAULT through the CLI, made once for the wrong-typed variants
    below (each damages its own copy)."""
    log = tmp_path_factory.mktemp("fault") / "server.log"
    log.write_text(FAULT)
    made = run_cli("triage", str(log), "-f", "json")
    assert json.loads(made.stdout)["faults"], made.stderr
    return made.stdout


@pytest.mark.parametrize("where, value, said", [
    ("faults", 5, "`faults` is not a list"), ("detail", 5, "`detail` of the type int"),
    ("pid", 2 ** 63, "`pid` of the type int or too large"), ("verdict", 5, "`verdict` of the type int"),
    ("incidents", [5], "`incidents`: 1 entr(ies) not an object")])
def test_registry_takes_wrong_typed_reports_with_a_message(tmp_path, fault_report_json, where, value, said):
    """Issue 36: `registry add`/`similar` on a report with `detail: 5`, `faults: 5` or a pid >= 2^63
    ended in an internal error."""
    pytest.importorskip("duckdb")
    report = json.loads(fault_report_json)          # a fresh copy to damage
    if where in ("detail", "pid"):
        report["faults"][0][where] = value
    else:
        report[where] = value
    bad = tmp_path / "report.json"
    bad.write_text(json.dumps(report))
    db = str(tmp_path / "reg.duckdb")
    for args in (["registry", "add", "--db", db, str(bad)], ["registry", "similar", str(bad), "--db", db]):
        r = run_cli(*args)
        assert "internal error" not in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert f"problem: {said}" in r.stderr, r.stderr
        assert r.returncode == (1 if where == "faults" else 0), r.stderr


def test_dump_of_its_own_ancestor_samples_not_itself(tmp_path):
    """Issue 36 (minor): `dump --pid` sampled itself when it descended from the pid."""
    parent = subprocess.run(["sh", "-c", f"{sys.executable} -m faultkit.cli dump --pid $$ --samples 1 --format json"],
                            capture_output=True, text=True, timeout=120)
    doc = json.loads(parent.stdout)
    pids = {p["pid"] for s in doc["samples"] for p in s} if "samples" in doc else set()
    assert pids, parent.stdout[:500]
    cmds = [p.get("command") or "" for s in doc["samples"] for p in s]
    assert not [c for c in cmds if "faultkit.cli dump" in c and not c.startswith("sh ")], cmds


def test_registry_export_over_a_0644_file_is_0600(tmp_path):
    pytest.importorskip("duckdb")
    pytest.importorskip("pyarrow")
    log = tmp_path / "server.log"
    log.write_text(FAULT)
    db, out = str(tmp_path / "reg.duckdb"), tmp_path / "incidents.parquet"
    assert run_cli("registry", "add", "--db", db, str(log)).returncode == 0
    out.write_text("old")
    out.chmod(0o644)
    r = run_cli("registry", "export", "--db", db, "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert oct(out.stat().st_mode & 0o777) == "0o600" and out.read_bytes()[:4] == b"PAR1"


def test_a_gpu_core_in_an_archive_is_not_copied_out_without_its_debugger(tmp_path, monkeypatch):
    """Issue 36: an 8 MB .tar.gz holding an 8 GiB core-like member wrote 8 GB to $TMPDIR where no
    debugger here could open it. A sparse 1 GiB CUDA-machine core (ELF ET_CORE, e_machine 190)."""
    import shutil
    import struct
    if shutil.which("cuda-gdb"):
        pytest.skip("cuda-gdb is installed here: the core would be opened")
    core = tmp_path / "gpucore.4242"
    head = b"\x7fELF\x02\x01\x01" + b"\x00" * 9 + struct.pack("<HH", 4, 190)
    with open(core, "wb") as fh:
        fh.write(head + b"\x00" * (64 - len(head)))
        fh.truncate(1 << 30)
    arch = tmp_path / "incident.tar.gz"
    with tarfile.open(arch, "w:gz", compresslevel=1) as tar:      # (level 9: 4.5 s more CPU for these zeros)
        tar.add(core, arcname="incident/cores/gpucore.4242")
        info = tarfile.TarInfo("incident/server.log")
        info.size = len(FAULT)
        tar.addfile(info, io.BytesIO(FAULT.encode()))
    assert arch.stat().st_size < 8 << 20
    spill = tmp_path / "tmp"
    spill.mkdir()
    r = subprocess.run([sys.executable, "-m", "faultkit.cli", "triage", str(arch), "-f", "json"], capture_output=True,
                       text=True, timeout=300, env={**os.environ, "TMPDIR": str(spill)})
    assert r.returncode == 0, r.stderr
    used = sum(p.stat().st_blocks * 512 for p in spill.rglob("*") if p.is_file())
    assert used < 1 << 20, used
    report = json.loads(r.stdout)
    assert any("a CUDA core of 1,073,741,824 bytes in the archive, not copied out: no cuda-gdb here" in str(p)
               for p in report["problems"]), report["problems"]
    assert report["faults"], "the log beside the core is still read"


def test_escape_sequences_in_evidence_never_reach_the_terminal(tmp_path):
    """Issue 36: terminal control sequences reached the terminal through `show`, `pack -v` and
    `registry` (`add -v`, `top`, `show`, `similar`)."""
    pytest.importorskip("duckdb")
    osc52, clear = "\x1b]52;c;SGVsbG8=\x07", "\x1b[2J"
    bundle = tmp_path / "bundle"
    r = run_cli("capture", "-q", "-o", str(bundle), "--", "sh", "-c", f"echo '{FAULT.strip()}'", "x" + osc52)
    assert r.returncode == 0, r.stderr
    (bundle / f"note{clear}.log").write_text("plain\n")
    outs = [run_cli("show", str(bundle)), run_cli("pack", str(bundle), "-v", "-o", str(tmp_path / "p.tar.gz"))]
    report = json.loads(run_cli("triage", str(bundle), "-f", "json").stdout)
    report["faults"][0]["kind"] = "page-fault" + clear
    rj = tmp_path / "report.json"
    rj.write_text(json.dumps(report))
    db = str(tmp_path / "reg.duckdb")
    outs.append(run_cli("registry", "add", "-v", "--db", db, str(rj)))
    top = run_cli("registry", "top", "--db", db)
    outs.append(top)
    sig = json.loads(run_cli("registry", "top", "--db", db, "-f", "json").stdout)["signatures"][0]["signature"]
    outs += [run_cli("registry", "show", sig, "--db", db), run_cli("registry", "similar", str(rj), "--db", db)]
    for o in outs:
        assert o.returncode == 0, o.stderr
        assert "\x1b" not in o.stdout + o.stderr and "\x07" not in o.stdout + o.stderr, (o.args, o.stdout, o.stderr)
    assert "note" in outs[1].stderr and "page-fault" in top.stdout          # the text around them is kept
