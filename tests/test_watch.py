"""`faultkit watch`: the node agent, fed by the test with the corpus's real kernel-log blocks as virtual
nodes; its Prometheus endpoint scraped and parsed with prometheus_client's parser, its OpenTelemetry
records read back from the SDK's in-memory exporter, its NPD and Slurm modes checked by exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("prometheus_client", reason="the fleet extra is not installed: pip install 'faultkit[fleet]'")

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from faultkit.fleet.watch import WatchOptions, Watcher  # noqa: E402

from .conftest import logrotate  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
AMD_BLOCK = CORPUS / "dmesg" / "gfx9_gfxhub0_noretry_rocm_amdgpu_issue_172.txt"
XID_LOG = CORPUS / "cuda" / "h200_dmesg_xid.txt"
needs_corpus = pytest.mark.skipif(not AMD_BLOCK.exists(), reason=f"shared corpus not found at {CORPUS}")
QUIET = "[ 4700.000000] usb 1-1: new high-speed USB device number 2 using xhci_hcd\n"
# NVIDIA's Xid format (open-gpu-kernel-modules' nvErrorLog); Xid 79: the GPU fell off the bus.
XID_79 = "[ 5000.100000] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"


def evidence(path: Path) -> str:
    return "".join(ln for ln in path.read_text().splitlines(True) if not ln.startswith("#"))


class Clock:
    def __init__(self):
        self.t = 1_800_000_000.0

    def __call__(self):
        return self.t


def watcher(tmp_path, node, log, clock, **kw) -> Watcher:
    opts = WatchOptions(node=node, spool=tmp_path / f"spool-{node}", kernel_log=str(log), from_start=True,
                        quiet_s=5.0, **kw)
    return Watcher(opts, clock=clock)


def metrics_of(text: str) -> dict:
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


@needs_corpus
def test_two_virtual_nodes_each_open_one_incident_scraped_and_sent(tmp_path):
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter
    clock, exporter = Clock(), InMemoryLogRecordExporter()
    logs = {n: tmp_path / f"{n}.log" for n in ("node-a", "node-b")}
    for log in logs.values():
        log.write_text(QUIET)
    ws = {n: watcher(tmp_path, n, logs[n], clock, metrics_port=0, otel_exporter=exporter) for n in logs}
    for n, w in ws.items():
        w.step()
        with open(logs[n], "a") as fh:      # the fault block arrives while the agent runs
            fh.write(evidence(AMD_BLOCK))
        w.step()
        assert w.open is not None and w.closed == []
    clock.t += 6                             # quiet for longer than quiet_s: the incident closes
    for w in ws.values():
        w.step()
    for n, w in ws.items():
        assert len(w.closed) == 1
        inc = w.closed[0]
        # the block's "for process pt_main_thread pid 12924" and "amdgpu 0000:c6:00.0"
        assert inc["kinds"] == {"page-fault": 2}      # its two blocks (lines 3 and 13)
        assert inc["pids"] == [12924] and inc["gpus"] == ["0000:c6:00.0"] and inc["node"] == n
        folder = w.opts.spool / inc["id"]
        assert "no-retry page fault" in (folder / "kernel.log").read_text()
        assert "usb 1-1" in (folder / "kernel.log").read_text()         # the context before the sign
        report = json.loads((folder / "report.json").read_text())
        assert report["faults"][0]["address"] == "0xae8570611000"
        assert oct(os.stat(folder / "report.json").st_mode & 0o777) == "0o600"
        port = w.server[0].server_port
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        m = metrics_of(text)
        series = [(k, v) for k, v in m.items() if k[0] == "faultkit_incidents_total" and ("node", n) in k[1]]
        assert len(series) == 1 and series[0][1] == 1.0
        assert dict(series[0][0][1])["kind"] == "page-fault" and dict(series[0][0][1])["gpu"] == "0000:c6:00.0"
        assert m[("faultkit_agent_up", (("node", n),))] == 1.0
        w.close()
    records = [r.log_record for r in exporter.get_finished_logs()]
    assert sorted(r.attributes["faultkit.node"] for r in records) == ["node-a", "node-b"]
    assert all("GPU incident" in r.body and r.attributes["faultkit.signs"] >= 1 for r in records)


def test_a_storm_is_one_incident_with_a_count_and_bounded_lines(tmp_path):
    clock, log = Clock(), tmp_path / "k.log"
    line = ("[ 38.591266] NVRM: Xid (PCI:0000:00:06): 31, pid=581, name=python3, channel 0x0000000a, intr 00000000. "
            "MMU Fault: ENGINE GRAPHICS GPC0 GPCCLIENT_T1_12 faulted @ 0x838c_74800000. Fault is of type FAULT_PDE "
            "ACCESS_TYPE_VIRT_READ\n")
    log.write_text("")
    w = watcher(tmp_path, "n", log, clock, max_lines=1000, triage=False)
    for _ in range(5):                       # 5 x 4,000 lines, a second apart: one storm
        with open(log, "a") as fh:
            fh.write(line * 4000)
        w.step()
        clock.t += 1
    clock.t += 10
    w.step()
    assert len(w.closed) == 1
    inc = w.closed[0]
    assert inc["signs"] == 20000 and inc["kinds"] == {"xid-31": 20000}
    assert inc["lines_dropped"] == 19000
    assert len((w.opts.spool / inc["id"] / "kernel.log").read_text().splitlines()) == 1000
    w.close()


@needs_corpus
def test_rotation_and_restart_neither_repeat_nor_lose(tmp_path):
    clock, log = Clock(), tmp_path / "kern.log"
    log.write_text(QUIET)
    w = watcher(tmp_path, "n", log, clock, triage=False)
    w.step()
    with open(log, "a") as fh:               # written just before logrotate renames the file
        fh.write(evidence(AMD_BLOCK))
    os.rename(log, tmp_path / "kern.log.1")
    log.write_text(XID_79)                    # the new file
    w.step()
    clock.t += 10
    w.step()
    # the block's two "no-retry page fault" lines (lines 3 and 13) and the new file's Xid 79
    assert len(w.closed) == 1 and w.closed[0]["kinds"] == {"page-fault": 2, "xid-79": 1}
    w.close()
    # a restart with the same spool: the cursor holds, nothing is read twice
    w2 = watcher(tmp_path, "n", log, clock, triage=False)
    assert w2.step() == 0
    with open(log, "a") as fh:
        fh.write(XID_79.replace("5000.1", "6000.1"))
    assert w2.step() == 1
    clock.t += 10
    w2.step()
    assert len(w2.closed) == 1 and w2.closed[0]["kinds"] == {"xid-79": 1}
    w2.close()


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "faultkit.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


@needs_corpus
def test_npd_and_slurm_modes_by_exit_code(tmp_path):
    clean, amd, bad = tmp_path / "clean.log", tmp_path / "amd.log", tmp_path / "bad.log"
    clean.write_text(QUIET)
    amd.write_text(evidence(AMD_BLOCK))
    bad.write_text(XID_79)
    common = ["watch", "--from-start", "--quiet-after", "0s", "--node", "n1"]
    r = _cli(*common, "--mode", "npd", "--spool", tmp_path / "s1", "--kernel-log", clean)
    assert r.returncode == 0 and r.stdout == ""
    r = _cli(*common, "--mode", "npd", "--spool", tmp_path / "s2", "--kernel-log", amd)
    assert r.returncode == 1 and "page-fault" in r.stdout and "pid 12924" in r.stdout
    r = _cli(*common, "--mode", "npd", "--spool", tmp_path / "s3", "--kernel-log", tmp_path / "missing.log")
    assert r.returncode == 2 and "missing.log" in r.stderr
    # the same NPD check again: the cursor says nothing new
    r = _cli(*common, "--mode", "npd", "--spool", tmp_path / "s2", "--kernel-log", amd)
    assert r.returncode == 0
    # Slurm: a software fault is reported but does not drain; Xid 79 does
    r = _cli(*common, "--mode", "slurm", "--spool", tmp_path / "s4", "--kernel-log", amd)
    assert r.returncode == 0 and "GPU incident" in r.stdout and "drain" not in r.stdout
    r = _cli(*common, "--mode", "slurm", "--spool", tmp_path / "s5", "--kernel-log", bad)
    assert r.returncode == 1 and "drain n1: hardware suspected (PCI:0000:3b:00: xid-79)" in r.stdout


def test_textfile_for_node_exporter(tmp_path):
    clock, log = Clock(), tmp_path / "k.log"
    log.write_text(XID_79)
    prom = tmp_path / "faultkit.prom"
    w = watcher(tmp_path, "n", log, clock, textfile=str(prom), triage=False)
    w.step()
    clock.t += 10
    w.step()
    m = metrics_of(prom.read_text())
    assert oct(prom.stat().st_mode & 0o777) == "0o600"          # through the one writer (issue 36)
    assert m[("faultkit_fault_lines_total", (("node", "n"),))] == 1.0
    assert m[("faultkit_last_incident_timestamp_seconds", (("node", "n"),))] > 0
    w.close()


DEPLOY = ROOT / "deploy"


def _watch_args() -> list[list[str]]:
    """Every `faultkit watch` invocation the deployment recipes carry."""
    import shlex
    found = []
    unit = (DEPLOY / "systemd" / "faultkit-watch.service").read_text()
    found += [shlex.split(ln.split("=", 1)[1])[2:] for ln in unit.splitlines() if ln.startswith("ExecStart=")]
    npd = json.loads((DEPLOY / "npd" / "faultkit-plugin.json").read_text())
    found += [r["args"][1:] for r in npd["rules"]]
    sh = (DEPLOY / "slurm" / "faultkit-healthcheck.sh").read_text()
    found += [shlex.split(ln.split("faultkit watch", 1)[1].rstrip(")")) for ln in sh.splitlines()
              if "faultkit watch" in ln and not ln.startswith("#")]
    import re
    ds = (DEPLOY / "kubernetes" / "faultkit-watch-daemonset.yaml").read_text()
    cmd = re.search(r"command: \[faultkit, watch, (.*)\]", ds).group(1).split(", ")
    found.append([c.strip('"') for c in cmd])
    return found


def test_every_deployment_recipe_is_a_valid_watch_command_line():
    from faultkit.cli import watch
    runs = _watch_args()
    assert len(runs) == 4
    for args in runs:
        ctx = watch.make_context("watch", list(args))    # click's own parser: an unknown flag raises
        assert ctx.params["kernel_log"] == "kmsg" and ctx.params["spool"] == "/var/spool/faultkit"


# The agent through its real command line, fed real files: logrotate (where installed) rotates them.
# amdgpu's fault line (the form of the corpus's gfx9 block, drivers/gpu/drm/amd/amdgpu/gmc_v9_0.c).
AMD_FAULT = ("[ 100.000000] amdgpu 0000:c6:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 ring:24 vmid:8 "
             "pasid:32768, for process pt_main_thread pid 4242 thread pt_main_thread pid 4242)\n")


def numbered(a: int, b: int) -> str:
    return "".join(f"[ {200 + i}.000000] test line {i:04d} of the rotation\n" for i in range(a, b))


def start_watch(tmp_path, *args) -> subprocess.Popen:
    spool = tmp_path / "spool"
    p = subprocess.Popen([sys.executable, "-m", "faultkit.cli", "watch", "--spool", str(spool), "--node", "n1",
                          "--quiet-after", "60s", *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    wait_for(lambda: (spool / ".cursors.json").exists() or p.poll() is not None, "the agent's first pass")
    return p


def wait_for(cond, what: str, timeout: float = 20.0) -> None:
    import time
    end = time.time() + timeout
    while time.time() < end:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def caught_up(spool: Path, key: str, log: Path) -> bool:
    """The saved cursor is at the end of the file the path names now."""
    try:
        c = json.loads((spool / ".cursors.json").read_text())[key]
        st = log.stat()
        return c["inode"] == st.st_ino and c["offset"] == st.st_size
    except (OSError, ValueError, KeyError):
        return False


def stop(p: subprocess.Popen) -> tuple[int, str, str]:
    import signal
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=20)         # SIGTERM always stops it
    return p.returncode, out, err


def incident_lines(spool: Path, name: str = "kernel.log") -> list[str]:
    folders = [d for d in spool.iterdir() if d.is_dir()]
    assert len(folders) == 1, folders
    return (folders[0] / name).read_text().splitlines()


@pytest.mark.parametrize("how", ["create", "copytruncate"])
def test_rotation_loses_no_line(tmp_path, how):
    """Issue 36: after rename-and-create the new file was opened at its end, after copytruncate
    lines were skipped up to the old offset."""
    log = tmp_path / "kern.log"
    log.write_text(numbered(0, 20))              # history: a first start follows from the end
    p = start_watch(tmp_path, "--kernel-log", log)
    spool, key = tmp_path / "spool", f"kernel:{log}"
    wait_for(lambda: caught_up(spool, key, log), "the agent to start at the end")
    with open(log, "a") as fh:
        fh.write(AMD_FAULT + numbered(20, 40))
    wait_for(lambda: caught_up(spool, key, log), "the agent to read the first lines")
    logrotate(log, how, tmp_path)
    with open(log, "a") as fh:                  # the new (or emptied) file's first lines
        fh.write(numbered(40, 60))
    wait_for(lambda: caught_up(spool, key, log), "the agent to read the rotated file")
    rc, out, err = stop(p)
    assert rc == 0, err
    assert incident_lines(spool) == [AMD_FAULT.rstrip("\n"), *numbered(20, 60).splitlines()]


def test_rotation_while_stopped_reads_the_old_file_to_its_end(tmp_path):
    log = tmp_path / "kern.log"
    log.write_text(numbered(0, 5))
    r = _cli("watch", "--mode", "npd", "--from-start", "--quiet-after", "0s", "--spool", tmp_path / "spool",
             "--kernel-log", log)
    assert r.returncode == 0, r.stderr
    with open(log, "a") as fh:                  # written after the check, before the rotation
        fh.write(AMD_FAULT + numbered(5, 10))
    logrotate(log, "create", tmp_path)
    with open(log, "a") as fh:
        fh.write(numbered(10, 15))
    r = _cli("watch", "--mode", "npd", "--quiet-after", "0s", "--spool", tmp_path / "spool", "--kernel-log", log)
    assert r.returncode == 1, r.stderr
    lines = incident_lines(tmp_path / "spool")
    assert [ln for ln in lines if "test line" in ln] == numbered(5, 15).splitlines()


def test_two_logs_of_one_name_and_a_5000_digit_number_lose_nothing(tmp_path):
    """Issue 36: two --log with one base name, and one line with a 5,000-digit number, ended the agent
    and lost the incident."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, b, k = tmp_path / "a" / "server.log", tmp_path / "b" / "server.log", tmp_path / "kern.log"
    k.write_text(AMD_FAULT)
    a.write_text("rank a serving\n[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=" + "9" * 5000
                 + ", OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600001 milliseconds "
                   "before timing out.\n")
    b.write_text("rank b serving\n")
    r = _cli("watch", "--mode", "npd", "--from-start", "--quiet-after", "0s", "--spool", tmp_path / "spool",
             "--kernel-log", k, "--log", a, "--log", b)
    assert r.returncode == 1, r.stderr
    assert "internal error" not in r.stderr and "page-fault" in r.stdout
    folder = next(d for d in (tmp_path / "spool").iterdir() if d.is_dir())
    texts = {p.name: p.read_text() for p in folder.iterdir() if p.name.endswith(".log")}
    assert texts.pop("kernel.log") == AMD_FAULT
    assert sorted(texts.values()) == sorted([a.read_text(), b.read_text()]), texts.keys()
    assert (folder / "report.json").exists()


@pytest.mark.parametrize("damage", ['{"kernel:LOG": {"inode": INODE, "offset": -5}}',
                                    '{"kernel:LOG": {"inode": INODE, "offset": "7"}}',
                                    '{"kernel:LOG": {"inode": INODE, "offset": 1e400}}',
                                    '{"kernel:LOG": [1, 2]}', '[1, 2, 3]', '{"kernel:LOG": {', '\x00\xff'])
def test_a_damaged_cursor_file_never_stops_the_agent(tmp_path, damage):
    log, spool = tmp_path / "kern.log", tmp_path / "spool"
    log.write_text(AMD_FAULT)
    spool.mkdir()
    (spool / ".cursors.json").write_text(damage.replace("LOG", str(log)).replace("INODE", str(log.stat().st_ino)))
    for expect in (1, 0):                    # damaged: read afresh (the incident); then the new cursor holds
        r = _cli("watch", "--mode", "npd", "--from-start", "--quiet-after", "0s", "--spool", spool,
                 "--kernel-log", log)
        assert r.returncode == expect, r.stderr
        assert "internal error" not in r.stderr and "Error" not in r.stderr
    assert "page-fault" in (spool / next(d.name for d in spool.iterdir() if d.is_dir()) / "manifest.json").read_text()


def test_a_log_replaced_by_dev_zero_is_refused_and_sigterm_stops_it(tmp_path):
    log = tmp_path / "kern.log"
    log.write_text(AMD_FAULT)
    p = start_watch(tmp_path, "--kernel-log", log, "--from-start")
    wait_for(lambda: caught_up(tmp_path / "spool", f"kernel:{log}", log), "the first read")
    log.unlink()
    log.symlink_to("/dev/zero")                # the path names an endless character device now
    import time
    time.sleep(1.5)                            # a few polls over it
    rc, out, err = stop(p)
    assert rc == 0, err
    assert f"{log}: a character device, not a log file" in err
    assert "page-fault" in out and incident_lines(tmp_path / "spool") == [AMD_FAULT.rstrip("\n")]


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_a_fifo_or_a_folder_is_said_clearly(tmp_path, kind):
    path = tmp_path / "kern.log"
    os.mkfifo(path) if kind == "fifo" else path.mkdir()
    r = _cli("watch", "--mode", "npd", "--from-start", "--spool", tmp_path / "spool", "--kernel-log", path)
    assert r.returncode == 2, r.stderr                 # NPD's "unknown": the source cannot be read
    word = "a FIFO" if kind == "fifo" else "a folder"
    assert f"problem: {path}: {word}, not a log file" in r.stderr
    assert "Illegal seek" not in r.stderr and "Error: :" not in r.stderr
