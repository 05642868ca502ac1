"""Cut, spliced and corrupted copies of real inputs to every reader: each returns what it can and
problems, never an exception (the rocprofv3 CSV reader's own mutations are in test_hardening)."""

from __future__ import annotations

import json
import lzma
import random
from pathlib import Path

import pytest

from faultkit.ingest.code_object import code_objects_in, read_code_object
from faultkit.ingest.core_file import inspect_core
from faultkit.ingest.debugger import parse_debugger
from faultkit.ingest.traces import read_trace_paths
from faultkit.triage import triage

from .conftest import corpus_bytes, no_internal_errors

DATA = Path(__file__).parent / "data"
JUNK = [b'"', b",", b"\n", b"{", b"}", b"]", b"0x", b"", b"99999999999999999999", b"\xff", b"\x00", b"NaN", b"-1"]


def mutate(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        pos = rng.randrange(len(out)) if out else 0
        op = rng.random()
        if op < 0.35:
            out[pos:pos + 1] = rng.choice(JUNK)
        elif op < 0.55:
            del out[pos:pos + rng.randint(1, 64)]
        elif op < 0.75:
            out[pos:pos] = out[rng.randrange(len(out) or 1):][:rng.randint(1, 96)]
        else:
            out = out[:pos]
    return bytes(out)


def torch_trace() -> bytes:
    events = []
    for i in range(40):
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 900, "tid": 901,
                       "ts": 1000.0 + 10 * i, "dur": 5.0, "args": {"correlation": i}})
        events.append({"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": 1002.0 + 10 * i,
                       "dur": 6.0, "args": {"correlation": i, "device": 0, "stream": 7, "grid": [8, 1, 1]}})
    events.append({"ph": "i", "name": "[memory]", "pid": 900, "tid": 901, "ts": 900.0,
                   "args": {"Addr": 140000000000000, "Bytes": 4096, "Device Id": 0}})
    return json.dumps({"schemaVersion": 1, "traceEvents": events}).encode()


def test_mutated_pytorch_traces(tmp_path):
    rng = random.Random(11)
    base = torch_trace()
    for i in range(120):
        f = tmp_path / f"t{i}" / "prof.json"
        f.parent.mkdir()
        data = mutate(base, rng)
        f.write_bytes(data)
        t = read_trace_paths([f])
        try:
            json.loads(data)
        except ValueError:
            assert t.problems, "a damaged trace must be said"
        assert t.dispatches["kernel"].notna().all()
        no_internal_errors(triage([str(f)]).problems)


def test_pytorch_trace_fields_of_every_type(tmp_path):
    """Valid JSON whose fields hold what a damaged or foreign writer puts there."""
    rng = random.Random(12)
    values = [None, "x", "", -1, 1e300, [], {}, [1], "0x10", True, float("nan")]
    for i in range(150):
        doc = json.loads(torch_trace())
        for _ in range(rng.randint(1, 6)):
            ev = rng.choice(doc["traceEvents"])
            target = ev["args"] if rng.random() < 0.5 and isinstance(ev.get("args"), dict) and ev["args"] else ev
            target[rng.choice(sorted(target) + ["grid", "block", "device", "stream"])] = rng.choice(values)
        f = tmp_path / f"t{i}.json"
        f.write_text(json.dumps(doc))
        t = read_trace_paths([f])
        assert t.dispatches["kernel"].notna().all()
        no_internal_errors(triage([str(f)]).problems)


def test_mutated_debugger_transcripts(corpus):
    rng = random.Random(13)
    files = sorted((corpus / "gdb").glob("*.txt")) + sorted((corpus / "cuda").glob("h200_*gdb*.txt"))
    for i in range(200):
        src = files[i % len(files)]
        log = parse_debugger(mutate(corpus_bytes(src), rng), src.name)
        assert all(p.file == src.name for p in log.problems)
        no_internal_errors(log.problems)


@pytest.mark.parametrize("name", ["kernels-gfx1100.co", "kernels-gfx90a.co", "kernels-gfx942.co", "kernels.hipfb"])
def test_mutated_code_objects(name):
    rng = random.Random(17)
    base = (DATA / "code_objects" / name).read_bytes()
    for _ in range(60):
        data = mutate(base, rng)
        co = read_code_object(data, name)
        assert co is None or co.target or co.problems
        found, problems = code_objects_in(data, name)
        assert all(p.file.startswith(name) for p in problems)      # the member: name#offset=..&size=..


def test_mutated_core_files(tmp_path):
    rng = random.Random(19)
    base = lzma.decompress(next((DATA / "cores").glob("h200_fault*.xz")).read_bytes())
    head = base[:256 * 1024]                 # headers, program headers and notes live at the start
    for i in range(80):
        f = tmp_path / f"core.{i}"
        f.write_bytes(mutate(head, rng) + base[256 * 1024: 256 * 1024 + rng.randint(0, 4096)])
        core = inspect_core(f)
        assert core is None or core.platform in ("cuda", "rocm-gpu", "rocm-unified", "host")

