"""scripts/live_amplify_nvidia.sh diag (issue 34): the crashed trials of a short amplify run in ONE tarball
small enough to come back from the device machine, each allocation ring cut to its header and its whole
records (faultkit.agent.ring.cut), so that a later test can replay triage's block naming from real rings.

The script runs for real here on the sample's CPU stand-in (DEVICE=cpu: caching off crashes it with a
SIGSEGV); the ring cut is checked on rings the agent's own writer (agent/ring.py's Writer) wrote."""

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from faultkit.agent import ring
from faultkit.ingest.agent_files import parse_agent

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "live_amplify_nvidia.sh"
PACK = ROOT / "scripts" / "amplify_diag_pack.py"


def tar_members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def test_the_diag_mode_on_the_cpu_stand_in(tmp_path):
    env = {**os.environ, "DEVICE": "cpu", "ARMS": "caching-off", "ROUNDS": "1", "PYTHON": sys.executable,
           "PYTHONPATH": str(ROOT)}
    r = subprocess.run(["sh", str(SCRIPT), str(tmp_path / "out"), "diag"], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=240)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    run = tmp_path / "out" / "diag"
    results = {p.parent.name: json.loads(p.read_text()) for p in run.glob("trial-*/result.json")}
    # the plan's round: plain and caching-off; the stand-in crashes under caching off, not plain
    assert {n: (x["arm"], x["outcome"]) for n, x in results.items()} == {
        "trial-000-plain": ("plain", "no-crash"), "trial-001-caching-off": ("caching-off", "crash")}
    assert "--- TRIAGE trial-001-caching-off" in r.stdout and "--- TRIAGE trial-000-plain" not in r.stdout
    tgz = tmp_path / "out" / "amplify-diag.tgz"
    got = tar_members(tgz)
    crashed = run / "trial-001-caching-off"
    # the crashed trial's files, byte for byte; nothing of the trial that did not crash
    for n in ("result.json", "server.log", "server.times.tsv", "triage.md"):
        assert got[f"diag/trial-001-caching-off/{n}"] == (crashed / n).read_bytes(), n
    headers = sorted(p.name for p in (crashed / "agent").glob("*.json"))
    assert headers and all(got[f"diag/trial-001-caching-off/agent/{h}"] == (crashed / "agent" / h).read_bytes()
                           for h in headers)
    assert not any("trial-000-plain" in n or n.endswith("environ.json") for n in got)
    for n in ("amplify.json", "plan.json", "rounds.json", "amplify-report.json", "amplify-report.md"):
        assert got[f"diag/{n}"] == (run / n).read_bytes()
    assert got["diag/PACK.tsv"].decode().splitlines()[0] == "file\tbytes\tcut_bytes\trecords\ttorn"
    assert f"PACKED {tgz} {tgz.stat().st_size:,} bytes, {len(got)} files, 1 crashed trial(s)" in r.stdout


def write_ring(path: Path, nbytes: int, n: int) -> ring.Writer:
    w = ring.Writer(str(path), nbytes, "torch-tracker-segments")
    for i in range(n):
        w.write(ring.SEGMENT_ALLOC if i % 2 == 0 else ring.POISON, addr=0x7F0000000000 + i * 4096, size=4096 + i,
                stream=5, site=i % 3, extra=0x82)
    return w


def crashed_trial(run: Path, name: str, arm: str) -> Path:
    t = run / name
    (t / "agent").mkdir(parents=True)
    (t / "result.json").write_text(json.dumps({"index": 1, "arm": arm, "outcome": "crash"}))
    (t / "agent" / "700.json").write_text(json.dumps({"pid": 700, "alloc": {"mechanism": "c++ trace tracker"}}))
    (t / "agent" / "700.sites.tsv").write_text("1\t/x.py:1 f\t/x.py:1 f\n")
    return t


def test_a_ring_is_cut_to_its_header_and_records_and_reads_back_the_same(tmp_path):
    run = tmp_path / "diag"
    (run).mkdir()
    (run / "plan.json").write_text("{}")
    t = crashed_trial(run, "trial-001-poison", "poison")
    w = write_ring(t / "agent" / "700.alloc.ring", 4 << 20, 9)
    # a torn record (the process died mid-write): its slot's CRC no longer matches
    data = bytearray((t / "agent" / "700.alloc.ring").read_bytes())
    data[ring.HEADER_BYTES + 4 * ring.RECORD_BYTES + 30] ^= 0xFF
    (t / "agent" / "700.alloc.ring").write_bytes(bytes(data))
    wrapped = crashed_trial(run, "trial-003-release", "release")
    w2 = write_ring(wrapped / "agent" / "700.alloc.ring", ring.HEADER_BYTES + 16 * ring.RECORD_BYTES, 21)
    (wrapped / "agent" / "701.alloc.ring").write_bytes(b"not a ring at all")
    plain = run / "trial-000-plain"
    (plain / "agent").mkdir(parents=True)
    (plain / "result.json").write_text(json.dumps({"outcome": "no-crash"}))
    out = tmp_path / "d.tgz"
    r = subprocess.run([sys.executable, str(PACK), str(run), str(out)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    got = tar_members(out)
    cut = got["diag/trial-001-poison/agent/700.alloc.ring"]
    # 9 records written in slots 0..8: the header and 9 slots, of a 4 MiB file
    assert len(data) == 4 << 20 and len(cut) == ring.HEADER_BYTES + 9 * ring.RECORD_BYTES
    assert cut[:ring.HEADER_BYTES] == data[:ring.HEADER_BYTES]
    before = parse_agent([("700.alloc.ring", bytes(data))]).processes[700]
    after = parse_agent([("700.alloc.ring", cut)]).processes[700]
    assert len(before.events) == 8 and after.events == before.events     # the torn one dropped by both
    assert after.ring == {**before.ring, "torn": 0}
    # a wrapped ring (21 records in 16 slots): every slot holds a record, nothing to leave off
    cut2 = got["diag/trial-003-release/agent/700.alloc.ring"]
    assert len(cut2) == ring.HEADER_BYTES + 16 * ring.RECORD_BYTES
    back = parse_agent([("700.alloc.ring", cut2)]).processes[700]
    assert [e.seq for e in back.events] == list(range(6, 22)) and back.ring["wrapped"]
    rows = got["diag/PACK.tsv"].decode().splitlines()
    assert f"diag/trial-001-poison/agent/700.alloc.ring\t{4 << 20}\t{len(cut)}\t8\t1" in rows
    assert f"diag/trial-003-release/agent/700.alloc.ring\t{len(cut2)}\t{len(cut2)}\t16\t0" in rows
    assert "diag/trial-003-release/agent/701.alloc.ring\t17\t-\t-\t-\tnot packed: 17 bytes: shorter than a ring header" \
        in rows
    assert "diag/trial-003-release/agent/701.alloc.ring" not in got
    assert got["diag/trial-001-poison/agent/700.sites.tsv"] == b"1\t/x.py:1 f\t/x.py:1 f\n"
    assert not any(n.startswith("diag/trial-000-plain") for n in got)
    assert w.capacity > 9 and w2.capacity == 16


def test_over_the_limit_nothing_is_written(tmp_path):
    run = tmp_path / "diag"
    run.mkdir()
    (run / "plan.json").write_text("{}")
    t = crashed_trial(run, "trial-001-poison", "poison")
    (t / "server.log").write_bytes(os.urandom(200_000))         # random bytes do not compress
    out = tmp_path / "d.tgz"
    r = subprocess.run([sys.executable, str(PACK), str(run), str(out), "--limit-mib", "0.1"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1 and "over the 104,857-byte limit; nothing written" in r.stderr and not out.exists()


def test_the_cut_refuses_what_is_not_a_ring():
    with pytest.raises(ValueError, match="not a faultkit ring"):
        ring.cut(b"\x00" * 8192)


H200_CORE = ROOT / "tests" / "data" / "cores" / "h200_fault.cuda.vm.518.1796071374.xz"
H200_TRANSCRIPT = ROOT / "tests" / "data" / "live_h200_coredump" / "fault" / "cores" / \
    "cuda.vm.518.1796071374.cuda-gdb.txt"
SAVE = ROOT / "scripts" / "save_core_transcripts.py"


def test_a_trials_core_gets_its_transcript_saved_packed_and_read(tmp_path):
    """The done run brought back no transcript: a trial keeps its core, and triage of a folder that is not a
    capture opens it in memory only. The diag mode saves each transcript beside its core first. Here the
    H200's real CUDA core in a trial folder, and a cuda-gdb stand-in (a `#!` script) that checks the batch
    command and prints what the real cuda-gdb printed for this very core."""
    import lzma
    import textwrap
    run = tmp_path / "diag"
    run.mkdir()
    (run / "plan.json").write_text("{}")
    t = crashed_trial(run, "trial-002-caching-off", "caching-off")
    (t / "cores").mkdir()
    core = t / "cores" / "cuda.vm.518.1796071374"
    core.write_bytes(lzma.decompress(H200_CORE.read_bytes()))
    (t / "cores" / "pipe.vm.518").write_text("")              # the driver's FIFO's name: passed over
    body = H200_TRANSCRIPT.read_text().split("\n", 1)[1]
    (tmp_path / "recorded.txt").write_text(body)
    calls = tmp_path / "calls"
    gdb = tmp_path / "bin" / "cuda-gdb"
    gdb.parent.mkdir()
    gdb.write_text("#!" + sys.executable + "\n" + textwrap.dedent(f"""
        import sys
        args = sys.argv[1:]
        assert args[:2] == ["-batch", "-nx"] and "target cudacore {core}" in args, args
        open({str(calls)!r}, "a").write("called\\n")
        sys.stdout.write(open({str(tmp_path / 'recorded.txt')!r}).read())
    """))
    gdb.chmod(0o755)
    r = subprocess.run([sys.executable, str(SAVE), str(t), "--debugger", str(gdb)], capture_output=True, text=True,
                       timeout=60)
    saved = t / "cores" / "cuda.vm.518.1796071374.cuda-gdb.txt"
    assert r.returncode == 0 and r.stdout.startswith(f"SAVED {saved} ("), r.stdout + r.stderr
    text = saved.read_text()
    assert text.startswith(f"$ {gdb} -batch -nx ") and text.endswith(body)
    again = subprocess.run([sys.executable, str(SAVE), str(t), "--debugger", str(gdb)], capture_output=True,
                           text=True, timeout=60)
    assert again.stdout == f"KEPT {saved}\n" and calls.read_text() == "called\n"      # opened once
    # packed (the core is not), and triage reads the saved transcript with no debugger on PATH
    out = tmp_path / "d.tgz"
    assert subprocess.run([sys.executable, str(PACK), str(run), str(out)], capture_output=True, timeout=60).returncode == 0
    got = tar_members(out)
    assert got["diag/trial-002-caching-off/cores/cuda.vm.518.1796071374.cuda-gdb.txt"] == saved.read_bytes()
    assert not any(n.endswith("cuda.vm.518.1796071374") for n in got)
    r = subprocess.run([sys.executable, "-m", "faultkit.cli", "triage", str(t), "-f", "json"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120, env={**os.environ, "PATH": "/usr/bin:/bin"})
    doc = json.loads(r.stdout)
    assert (doc["verdict"]["level"], doc["verdict"]["kernel"]) == ("certain", "gather_kernel")
    assert doc["cores"][0]["transcript"] == str(saved) and calls.read_text() == "called\n"
