"""faultkit's own patterns compiled once per installation (faultkit/re_cache.py, issue #35).

Each test runs the real CLI (or the real module) in a fresh interpreter with its own cache folder
(XDG_CACHE_HOME): what is checked is what a user's second run gets from the file the first wrote.
"""

from __future__ import annotations

import json
import marshal
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT, TRACES

SAMPLE = TRACES / "sglang-tp2-mi300x"
TRIAGE = ["triage", str(SAMPLE / "server.log"), str(SAMPLE / "dmesg.txt")]

# The CLI as `python -m faultkit.cli ARGS`, printing re_cache's counts at exit (after its own save).
PROBE = """
import atexit, json, runpy, sys
atexit.register(lambda: sys.stderr.write("\\nSTATS=" + json.dumps(__import__("faultkit.re_cache").re_cache.STATS) + "\\n"))
sys.argv = ["faultkit", *{args!r}]
runpy.run_module("faultkit.cli", run_name="__main__")
"""


def run_cli(cache, *args: str, seed: str = "0"):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(cache), "PYTHONHASHSEED": seed}
    p = subprocess.run([sys.executable, "-c", PROBE.format(args=list(args))], env=env, cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    line = [x for x in p.stderr.splitlines() if x.startswith("STATS=")]
    assert line, p.stderr[-2000:]
    return json.loads(line[-1][len("STATS="):]), p


def cache_file(cache):
    files = list((cache / "faultkit").glob("re-*.marshal"))
    assert len(files) == 1, files
    return files[0]


def test_a_second_triage_compiles_none_of_faultkits_patterns_and_says_the_same(tmp_path):
    first, p1 = run_cli(tmp_path, *TRIAGE, seed="1")
    # the run really triaged: the sample's ROCclr line names this kernel (server.log, "Memory Fault Error")
    assert "_fwd_grouped_kernel_stage1" in p1.stdout, p1.stderr[-2000:]
    assert first["reused"] == 0 and first["compiled"] > 100, first
    # another hash seed: a pattern whose text follows a set's order would be compiled anew here
    second, p2 = run_cli(tmp_path, *TRIAGE, seed="2")
    assert second == {"reused": first["compiled"], "compiled": 0}, (first, second)
    assert p2.stdout == p1.stdout


def test_a_broken_cache_file_changes_no_result(tmp_path):
    _, clean = run_cli(tmp_path / "clean", *TRIAGE)
    # a file cut short (a full disk), then a readable one whose every entry holds code the matcher refuses
    broken = tmp_path / "broken"
    run_cli(broken, *TRIAGE)
    f = cache_file(broken)
    entries = marshal.loads(f.read_bytes())
    f.write_bytes(f.read_bytes()[:1000])
    stats, p = run_cli(broken, *TRIAGE)
    assert p.returncode == clean.returncode and p.stdout == clean.stdout and "Traceback" not in p.stderr
    assert stats["compiled"] == len(entries), stats
    f.write_bytes(marshal.dumps({k: (v[0], [0xFFFF, 1, 2], *v[2:]) for k, v in entries.items()}))
    stats, p = run_cli(broken, *TRIAGE)
    assert p.stdout == clean.stdout and "Traceback" not in p.stderr
    assert stats == {"reused": 0, "compiled": len(entries)}, stats
    # and the next run has the good file back
    assert run_cli(broken, *TRIAGE)[0] == {"reused": len(entries), "compiled": 0}


REBUILD = """
import re, sys
from faultkit import lazy_re, re_cache, triage, cli           # the parsers register their patterns
from faultkit.ingest import prefilter
own = [(p.pattern, p._flags) for p in lazy_re.MADE if p._own]
own += [(prefilter.may_matter(r).pattern, 0) for r in {g.reader for g in prefilter.GUARDS}]
for pattern, flags in own:
    re_cache.compile(pattern, flags)
re_cache._save()
re_cache._entries = None                                      # as a new run: from the file alone
re_cache.STATS.update(reused=0, compiled=0)
bad = []
for pattern, flags in own:
    got, want = re_cache.compile(pattern, flags), re.compile(pattern, flags)
    if got != want or got.groupindex != want.groupindex or got.groups != want.groups:
        bad.append(pattern[:80])
print(len(own), re_cache.STATS["compiled"], bad[:5])
"""


def test_a_pattern_from_the_file_is_the_one_re_compile_makes(tmp_path):
    """Pattern equality is re's own: the same text, flags and matcher code."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(tmp_path)}
    p = subprocess.run([sys.executable, "-c", REBUILD], env=env, cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    n, compiled, bad = p.stdout.split(" ", 2)
    assert int(n) > 250 and int(compiled) == 0, p.stdout           # every one came from the file
    assert bad.strip() == "[]", bad


SECRET = """
from faultkit import lazy_re, re_cache
def redactor(value):          # a pattern built from data at run time (a secret the report redacts)
    return lazy_re.compile(lazy_re.escape(value))
assert redactor("s3cr3t-T0KEN-xyzzy").search("a s3cr3t-T0KEN-xyzzy b")
OWN = lazy_re.compile(r"module-constant-[0-9]+")
assert OWN.search("module-constant-42")
"""


def test_only_the_programs_own_patterns_are_written(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(tmp_path)}
    p = subprocess.run([sys.executable, "-c", SECRET], env=env, cwd=ROOT, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr[-2000:]
    data = cache_file(tmp_path).read_bytes()
    assert b"module-constant-" in data          # the file is the one written (the control)
    assert b"s3cr3t" not in data
    assert oct(cache_file(tmp_path).stat().st_mode & 0o777) == "0o600"


def test_a_file_past_its_bound_keeps_this_runs_patterns_alone(tmp_path, monkeypatch):
    from faultkit import re_cache
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    f = Path(re_cache.path())
    # another version's patterns, 3 MB of them: the next save keeps what this run used
    stale = {(f"old-version-pattern-{i}", 0): (32, [1] * 2000, 0, {}, (None,)) for i in range(300)}
    f.write_bytes(marshal.dumps(stale))
    assert len(f.read_bytes()) > re_cache.MAX_BYTES
    first, _ = run_cli(tmp_path, *TRIAGE)
    assert first["compiled"] > 100, first
    kept = marshal.loads(f.read_bytes())
    assert len(kept) == first["compiled"] and not any(k[0].startswith("old-version-pattern-") for k in kept)
    assert run_cli(tmp_path, *TRIAGE)[0] == {"reused": first["compiled"], "compiled": 0}
