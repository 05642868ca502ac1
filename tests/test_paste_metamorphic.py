"""The metamorphic harness: every corpus file, re-pasted the ways people paste, gives the facts
(kind, address, code, client, pid, kernel) and the verdict of the file as it is.

One test per transform (xdist spreads them over workers); each records its row, and the run's
summary prints the matrix (transform x source folder: held/pastes, BROKE where any changed; the
hook is in tests/conftest.py). Every cell must hold. Transforms are tests/paste_transforms.py; which
combinations apply to a file is decided by a fixed rule (a hash of the names), so the run is the
same every time.
"""

from __future__ import annotations

import functools
import re
import zlib

import pytest

from faultkit.bundle import InputFile, Inputs
from faultkit.export.report import to_json
from faultkit.triage import build

from .conftest import CORPUS, corpus_bytes
from .paste_transforms import COMBOS, SIMPLE, TRANSFORMS

FOLDERS = ("dmesg", "runtime", "gdb", "cuda")
SKIP_SUFFIX = (".csv", ".xz", ".cu", ".py", ".sh")


MATRIX_KEY = "paste_matrix"     # each transform's row, carried to the terminal summary (tests/conftest.py reads this key)


def corpus_texts() -> list[tuple[str, str, str]]:
    out = []
    for folder in FOLDERS:
        d = CORPUS / folder
        if not d.is_dir():
            continue
        for p in sorted(d.rglob("*")):
            if p.is_file() and p.suffix not in SKIP_SUFFIX and not p.name.endswith(".source.txt"):
                out.append((folder, str(p.relative_to(CORPUS)), corpus_bytes(p).decode("utf-8", "replace")))
    return out


def facts(text: str, name: str) -> tuple:
    doc = to_json(build(Inputs(files=[InputFile(name, text.encode())])))
    faults = sorted((
        (f["source"], f["kind"], f["address"], f["code"], (f.get("detail") or {}).get("client_name"), f["pid"],
         (f.get("detail") or {}).get("kernel"))
        for f in doc["faults"]), key=repr)
    v = doc["verdict"]
    return tuple(faults), (v["level"], v.get("kernel"))


def without_runtime_pid(fs: tuple) -> tuple:
    """A launcher's tag names the process that printed the line (`pid=4242`): a fact the paste
    adds to runtime records, not one it may change elsewhere."""
    faults, verdict = fs
    return tuple(sorted(((f[:5] + (None,) + f[6:]) if f[0] == "runtime" else f for f in faults), key=repr)), verdict


PCI = re.compile(r"\b[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]\b")


def applies(name: str, transform: str, simple: bool, text: str) -> bool:
    """Every simple transform on every file; each combination on a third of them, fixed by hash.
    Cutting the device prefix off a log of several GPUs loses which GPU each line is from (their
    fault blocks interleave): that paste is not one the facts can survive, so it is not made."""
    if "cut-device" in transform and len(set(PCI.findall(text))) > 1:
        return False
    return simple or zlib.crc32(f"{name}|{transform}".encode()) % 3 == 0


@functools.lru_cache(maxsize=1)
def _base() -> tuple:
    """Every corpus file and its facts as it is (once per test process)."""
    return tuple((folder, name, text, facts(text, name)) for folder, name, text in corpus_texts())


@pytest.mark.parametrize("transform", list(TRANSFORMS))
def test_every_paste_keeps_facts_and_verdict(corpus, transform, record_property):
    """One transform over every corpus file (one test each: xdist spreads them); its row of the
    matrix goes to the run's summary."""
    files = _base()
    assert files, "no corpus text files"
    f = TRANSFORMS[transform]
    row: dict[str, list[int]] = {}
    broke: list[str] = []
    for folder, name, text, base in files:
        if not applies(name, transform, transform in SIMPLE, text):
            continue
        got, want = facts(f(text), name), base
        if "launcher" in transform:
            got, want = without_runtime_pid(got), without_runtime_pid(base)
        cell = row.setdefault(folder, [0, 0])
        cell[1] += 1
        if got == want:
            cell[0] += 1
        else:
            broke.append(f"{transform} {name}: {base} -> {got}")
    record_property(MATRIX_KEY, (transform, row))
    assert not broke, f"{len(broke)} pastes changed facts or verdict:\n" + "\n".join(broke[:40])


def matrix(held: dict) -> str:
    """The transform x source folder table: held/pastes per cell, BROKE where any changed."""
    cols = [f for f in FOLDERS if any(k[1] == f for k in held)]
    rows = [f"{'transform':24}" + "".join(f"{c:>14}" for c in cols)]
    for t in [t for t in TRANSFORMS if any(k[0] == t for k in held)]:
        cells = []
        for c in cols:
            ok, n = held.get((t, c), (0, 0))
            cells.append(f"{ok}/{n}" + ("" if ok == n else " BROKE"))
        rows.append(f"{t:24}" + "".join(f"{x:>14}" for x in cells))
    ok = sum(v[0] for v in held.values())
    n = sum(v[1] for v in held.values())
    rows.append(f"held {ok}/{n} ({100 * ok / max(n, 1):.1f}%)")
    return "\n".join(rows)
