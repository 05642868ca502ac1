"""A single compressed core (systemd-coredump stores them `.zst`; `.xz` and `.gz` by hand) is read
like the uncompressed core: a real crashed program's core, written by gdb's `gcore` at the
SIGSEGV, compressed with the real tools, through the real CLI."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

PROGRAM = r"""
#include <stdio.h>
int main(void) { volatile int *p = 0; puts("about to crash"); fflush(stdout); *p = 42; return 0; }
"""
TOOLS = {"zst": ["zstd", "-q", "-c"], "xz": ["xz", "-c"], "gz": ["gzip", "-c"]}


@pytest.fixture(scope="module")
def crashed_core(tmp_path_factory):
    missing = [t for t in ("gcc", "gdb", "zstd", "xz", "gzip") if shutil.which(t) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} on PATH")
    d = tmp_path_factory.mktemp("core")
    (d / "crash.c").write_text(PROGRAM)
    subprocess.run(["gcc", "-g", "-O0", "-o", str(d / "crash"), str(d / "crash.c")], check=True)
    core = d / "core.crash.1000"
    res = subprocess.run(["gdb", "-q", "-batch", "-ex", "run", "-ex", "info inferiors", "-ex", f"gcore {core}",
                          str(d / "crash")], capture_output=True, text=True, timeout=120)
    assert "SIGSEGV" in res.stdout and core.is_file(), res.stdout + res.stderr
    pid = int(re.search(r"process (\d+)", res.stdout).group(1))        # gdb's own word for the inferior
    return d, core, pid


def _triage(*args):
    res = subprocess.run([sys.executable, "-m", "faultkit.cli", "triage", "-f", "json", *map(str, args)],
                         capture_output=True, text=True, timeout=300)
    return res, (json.loads(res.stdout) if res.stdout.strip() else None)


@pytest.mark.parametrize("suffix", sorted(TOOLS))
def test_a_compressed_core_is_read_like_the_core(crashed_core, suffix):
    d, core, pid = crashed_core
    packed = d / f"{core.name}.{suffix}"
    with open(packed, "wb") as fh:
        subprocess.run([*TOOLS[suffix], str(core)], stdout=fh, check=True)
    res, rep = _triage(packed)
    assert res.returncode == 0, res.stderr
    assert [(c["path"], c["platform"], c["pid"], c["size"]) for c in rep["cores"]] == \
        [(str(packed), "host", pid, core.stat().st_size)]
    assert not any("no readable input" in str(p) for p in rep.get("problems", [])), rep.get("problems")


def test_a_cut_compressed_core_is_an_unusable_input(crashed_core):
    d, core, _ = crashed_core
    packed = d / "cut.core.zst"
    data = subprocess.run(["zstd", "-q", "-c", str(core)], capture_output=True, check=True).stdout
    packed.write_bytes(data[: len(data) // 2])
    res, rep = _triage(packed)
    assert res.returncode == 1, res.stderr
    assert str(packed) in res.stderr and "Traceback" not in res.stderr
