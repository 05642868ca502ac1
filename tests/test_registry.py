"""The incident registry: records from real reports, the same answers from DuckDB and PostgreSQL,
the hardware/software suspicion on recorded histories, Parquet export, the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("duckdb", reason="the registry's extra is not installed: pip install 'faultkit[fleet]'")

from faultkit.fleet.hardware import judge_signature
from faultkit.fleet.intake import intake
from faultkit.fleet.record import Context, records_from_report
from faultkit.fleet.store import DuckDBStore, PostgresStore, write_parquet

from . import pg_server

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
XID_LOG = CORPUS / "cuda" / "h200_dmesg_xid.txt"
SAMPLE = ROOT / "traces" / "sglang-tp2-mi300x"
needs_corpus = pytest.mark.skipif(not XID_LOG.exists(), reason=f"shared corpus not found at {CORPUS}")

# Hardware histories, in the kernel driver's own Xid format (`NVRM: Xid (PCI:dddd:bb:dd): N, ...`,
# open-gpu-kernel-modules' nvErrorLog): a double-bit ECC error, then the GPU falling off the bus.
BAD_GPU_LOG = """\
[ 1001.100000] NVRM: Xid (PCI:0000:3b:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 0, subpartition 0.
[ 1002.200000] NVRM: Xid (PCI:0000:3b:00): 31, pid=4242, name=python3, channel 0x00000010, intr 00000000. MMU Fault: ENGINE GRAPHICS GPC1 GPCCLIENT_T1_3 faulted @ 0x7f00_12340000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_WRITE
"""
BAD_GPU_LOG_2 = """\
[ 2001.100000] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
[ 2001.300000] NVRM: Xid (PCI:0000:3b:00): 13, pid=5151, name=python3, Graphics SM Warp Exception on (GPC 2, TPC 1, SM 0): Out Of Range Address
"""


@needs_corpus
def test_records_from_the_corpus_xid_log_carry_what_its_lines_say():
    records, problems = intake(str(XID_LOG), node="node-a", seen_at=1.0e9)
    assert problems == []
    by_pid = {r.pid: r for r in records}
    # line 2: "Xid (PCI:0000:00:06): 31, pid=581, name=python3 ... ENGINE GRAPHICS"
    r = by_pid[581]
    assert (r.fault_kind, r.gpu, r.engine, r.node, r.seen_at) == ("xid-31", "PCI:0000:00:06", "shader", "node-a", 1.0e9)
    # lines 4-6: pid 694's Xid 13 at 62.91 s came before its Xid 31 at 64.05 s: the 13 heads the chain
    assert by_pid[694].chain == "xid-13 > xid-31"
    assert by_pid[694].fault_kind == "xid-13"
    # line 1: Xid 43 ("GPU stopped processing") is a follow-on, alone in its incident
    assert by_pid[570].fault_kind == "xid-43"
    assert {r.pid for r in records} == {570, 581, 621, 694, 799, 963}
    assert by_pid[581].signature == by_pid[621].signature == by_pid[799].signature
    assert by_pid[581].signature != by_pid[694].signature


def test_sample_incident_names_the_runtime_kernel_as_a_candidate_not_the_trace_placeholder():
    records, _ = intake(str(SAMPLE), node="node17")
    assert len(records) == 1
    r = records[0]
    # server.log:10 "Memory Fault Error [... kernel: _fwd_grouped_kernel_stage1]"; the verdict is not certain
    assert (r.kernel, r.level, r.fault_kind) == ("_fwd_grouped_kernel_stage1", "candidates", "memory-access-fault")


def test_a_report_that_is_not_faultkits_is_a_problem_not_a_record():
    records, problems = records_from_report({"schema": "other/1"}, Context(report="x.json"))
    assert records == [] and "not a faultkit triage report" in problems[0]


def _fill(store, tmp: Path) -> None:
    """Four nodes hit the same software fault (the corpus's Xid 31 log replayed); node-e's GPU has an
    ECC and bus history and faults of two different signatures."""
    for n, node in enumerate(("node-a", "node-b", "node-c", "node-d")):
        records, _ = intake(str(XID_LOG), node=node, seen_at=1.7e9 + n)
        store.add(records)
    for i, text in enumerate((BAD_GPU_LOG, BAD_GPU_LOG_2)):
        p = tmp / f"bad{i}.log"
        p.write_text(text)
        records, problems = intake(str(p), node="node-e", seen_at=1.8e9 + i)
        assert problems == [] and records
        store.add(records)


def _answers(store) -> dict:
    top = store.top(10)
    software = next(r for r in top if r.fault_kind == "xid-31" and r.nodes == 4)
    bad = [r for r in top if "node-e" in {h[0] for h in store.gpu_histories(r.signature)}]
    return {"count": store.count(), "top": [tuple(x.__dict__.values()) for x in top],
            "software": judge_signature(software.incidents, software.nodes, software.gpus,
                                        store.gpu_histories(software.signature)),
            "hardware": [judge_signature(r.incidents, r.nodes, r.gpus, store.gpu_histories(r.signature)) for r in bad],
            "chains": store.chains(software.signature),
            "same_gpu": store.same_gpu("node-e", "PCI:0000:3b:00", bad[0].signature)}


@needs_corpus
def test_duckdb_and_postgresql_hold_the_same_registry_and_answer_the_same(tmp_path):
    why = pg_server.why_not()
    if why:
        pytest.skip(why)
    server = pg_server.Server(Path(tempfile.mkdtemp(prefix="faultkit-pg-")))
    server.start()
    try:
        duck, pg = DuckDBStore(str(tmp_path / "r.duckdb")), PostgresStore(server.dsn)
        for s in (duck, pg):
            _fill(s, tmp_path)
        a, b = _answers(duck), _answers(pg)
        assert a == b
        # 6 incidents of the Xid log on each of four nodes, 2 on node-e's GPU
        assert a["count"] == 6 * 4 + 2
        assert a["software"].kind == "software" and "4 nodes" in a["software"].reasons[0]
        # node-e's GPU: Xid 48 and Xid 79 in its history, two signatures: drain it
        assert [h.kind for h in a["hardware"]] == ["hardware", "hardware"]
        assert a["hardware"][0].drain == ("node-e:PCI:0000:3b:00",)
        assert "xid-48" in a["hardware"][0].reasons[0] and "xid-79" in a["hardware"][0].reasons[0]
        # adding the same reports again keeps one copy, on both
        for s in (duck, pg):
            _fill(s, tmp_path)
            assert s.count() == 26
        pg.close()
        duck.close()
    finally:
        server.stop()


def test_one_gpu_without_hardware_signs_is_undecided_and_one_node_with_them_is_hardware():
    assert judge_signature(5, 1, 1, [("n", "g", 1, set())]).kind == "undecided"
    s = judge_signature(3, 1, 1, [("n", "g", 1, {"xid-94"})])
    assert s.kind == "hardware" and s.drain == ("n:g",)


@needs_corpus
def test_parquet_export_reads_back_every_incident(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    store = DuckDBStore(str(tmp_path / "r.duckdb"))
    _fill(store, tmp_path)
    n = write_parquet(store, str(tmp_path / "x.parquet"))
    table = pq.read_table(tmp_path / "x.parquet")
    assert n == table.num_rows == 26
    assert sorted(set(table.column("node").to_pylist())) == ["node-a", "node-b", "node-c", "node-d", "node-e"]
    assert oct(os.stat(tmp_path / "x.parquet").st_mode & 0o777) == "0o600"


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "faultkit.cli", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})


@needs_corpus
def test_cli_add_top_show_similar(tmp_path):
    db = str(tmp_path / "r.duckdb")
    missing = tmp_path / "nope.log"
    r = _cli("registry", "add", "--db", db, "--node", "node-a", str(XID_LOG), str(missing))
    assert r.returncode == 1, r.stderr            # one input unreadable: exit 1, the other still added
    assert "6 incident(s), 6 new" in r.stderr
    assert _cli("registry", "add", "--db", db, "--node", "node-b", str(XID_LOG)).returncode == 0
    top = json.loads(_cli("registry", "top", "--db", db, "-f", "json").stdout)
    assert top["incidents"] == 12
    first = top["signatures"][0]
    assert (first["fault_kind"], first["incidents"], first["nodes"]) == ("xid-31", 6, 2)
    shown = _cli("registry", "show", "--db", db, first["signature"][:8])
    assert shown.returncode == 0 and "6 incident(s) on 2 node(s)" in shown.stdout
    sim = json.loads(_cli("registry", "similar", "--db", db, "-f", "json", str(XID_LOG)).stdout)
    assert any(s["same_signature"] and s["same_signature"]["incidents"] == 6 for s in sim)
    bad = _cli("registry", "show", "--db", db, "ffffffffffff")
    assert bad.returncode == 1 and "no signature" in bad.stderr and "Traceback" not in bad.stderr
