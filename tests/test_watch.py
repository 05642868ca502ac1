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
