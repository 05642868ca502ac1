"""Hostile flight-recorder pickles through `faultkit triage`, under a memory bound (issue 36: a 7 KB
pickle of shared references grew to 7 GB where a field was str()'d before it was checked; a deeply
nested one raised RecursionError). Each pickle is a real protocol-2 pickle of plain dicts, lists and
strings, the shape torch's pickler writes (torch/csrc/distributed/c10d/FlightRecorder.hpp: `version`,
`pg_config`, `entries` with `collective_seq_id`, `profiling_name`, `state`, `process_group`), given
loose as torch names it (`nccl_trace_rank_<rank>`). Triage must finish inside RLIMIT_AS, keep the
entries that can be read, and say which fields were not text."""

from __future__ import annotations

import json
import pickle
import resource
import struct
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MEMORY = 3 << 30          # address space of the triage process: far below what str() of the fields takes


def _entry(seq: int, state: str, op, pg=("0", "default_pg")) -> dict:
    return {"record_id": seq, "pg_id": 0, "process_group": pg, "collective_seq_id": seq, "p2p_seq_id": 0,
            "op_id": seq, "profiling_name": op, "time_created_ns": 1, "input_sizes": [[4]], "state": state,
            "is_p2p": False, "retired": state == "completed", "timeout_ms": 600000}


def _shared(depth: int = 30) -> list:
    """A list whose two items are the same list, `depth` times: a few hundred bytes pickled (the
    pickler's memo writes each list once), 2**depth leaves as text."""
    node: list = ["nccl:all_reduce"]
    for _ in range(depth):
        node = [node, node]
    return node


def _triage(*paths: Path) -> subprocess.CompletedProcess:
    def bound():
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))
    return subprocess.run([sys.executable, "-m", "faultkit.cli", "triage", *map(str, paths), "--format", "json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, preexec_fn=bound)


def test_shared_references_do_not_blow_up(tmp_path):
    shared = _shared()
    entries = [_entry(1, "completed", "nccl:all_reduce"), _entry(2, "started", shared),
               _entry(1, "completed", "nccl:broadcast", pg=(shared, "x"))]
    data = pickle.dumps({"version": shared, "pg_config": {"0": {"name": "0"}}, "pg_status": {},
                         "entries": entries}, protocol=2)
    assert len(data) < 8192                      # the few KB of the issue
    (tmp_path / "nccl_trace_rank_0").write_bytes(data)
    # rank 1 never issued #2: read with rank 0's entries, rank 1 is behind (the entries were kept)
    (tmp_path / "nccl_trace_rank_1").write_bytes(pickle.dumps(
        {"version": "2.10", "pg_config": {}, "entries": [_entry(1, "completed", "nccl:all_reduce")]}, protocol=2))
    res = _triage(tmp_path / "nccl_trace_rank_0", tmp_path / "nccl_trace_rank_1")
    assert res.returncode in (0, 1) and "Traceback" not in res.stderr, res.stderr[-3000:]
    doc = json.loads(res.stdout)
    problems = "\n".join(doc["problems"])
    # the entries are kept, their container fields named as not text (no internal error)
    assert "internal" not in problems, problems
    assert "nccl_trace_rank_0: `profiling_name` is not text in 1 entry (entry 2: a list); read as '?'" in problems
    assert "nccl_trace_rank_0: `process_group` is not text in 1 entry (entry 3: a list); read as '?'" in problems
    assert "nccl_trace_rank_0: `version` is a list, not text (left out)" in problems
    (lag,) = doc["hang"]["collectives"]
    assert (lag["process_group"], lag["behind"], lag["ahead"], lag["ahead_at"]) == ("0", [1], [0], [2, "?", "started"])


def _deep_pickle(depth: int) -> bytes:
    """A flight record whose one entry's `profiling_name` is a list nested `depth` deep, written
    opcode by opcode (Python's own pickler recurses and cannot write it): EMPTY_LIST `depth`
    times, then APPEND `depth - 1` times puts each into the one before."""
    def s(text: str) -> bytes:                   # BINUNICODE
        b = text.encode()
        return b"X" + struct.pack("<I", len(b)) + b

    def i(n: int) -> bytes:                      # BININT
        return b"J" + struct.pack("<i", n)
    deep = b"]" * depth + b"a" * (depth - 1)
    entry = (b"}(" + s("collective_seq_id") + i(7) + s("p2p_seq_id") + i(0) + s("is_p2p") + b"\x89"
             + s("state") + s("started") + s("process_group") + b"(" + s("0") + s("default_pg") + b"t"
             + s("profiling_name") + deep + b"u")
    return (b"\x80\x02}(" + s("version") + s("2.10") + s("pg_config") + b"}" + s("entries") + b"]("
            + entry + b"eu.")


def test_a_deeply_nested_field_does_not_recurse(tmp_path):
    data = _deep_pickle(200_000)
    nested = pickle.loads(data)["entries"][0]["profiling_name"]
    for _ in range(1000):                        # the pickle is what it says: nested lists
        assert isinstance(nested, list) and len(nested) == 1
        nested = nested[0]
    (tmp_path / "nccl_trace_rank_3").write_bytes(data)
    res = _triage(tmp_path / "nccl_trace_rank_3")
    assert "Traceback" not in res.stderr and "RecursionError" not in res.stdout + res.stderr, res.stderr[-3000:]
    doc = json.loads(res.stdout)
    problems = "\n".join(doc["problems"])
    assert "internal" not in problems, problems
    assert "nccl_trace_rank_3: `profiling_name` is not text in 1 entry (entry 1: a list); read as '?'" in problems
