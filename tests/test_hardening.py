"""Bad input and hostile conditions: bounded time and memory, no traceback, no lost results."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import threading

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
