"""`doctor -o x.json` and `show -o x.json` write JSON (the format from the extension, as every
report), and doctor says of the core limit what capture then does with it: a real capture's
target prints its own soft limit."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path


def _soft_core_zero():
    _, hard = resource.getrlimit(resource.RLIMIT_CORE)
    resource.setrlimit(resource.RLIMIT_CORE, (0, hard))


def cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "faultkit.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300, preexec_fn=_soft_core_zero, **kw)


def test_doctor_and_show_take_json_from_the_extension_and_doctor_tells_the_core_limit_capture_leaves(tmp_path):
    res = cli("doctor", "--dir", tmp_path, "-o", tmp_path / "d.json")
    doc = json.loads((tmp_path / "d.json").read_text())               # JSON, not text
    assert doc["schema"].startswith("faultkit.doctor/"), doc.get("schema")
    assert res.returncode == (1 if any(c["status"] == "fail" for c in doc["checks"]) else 0)
    core = next(c for c in doc["checks"] if c["name"] == "core limit")
    # what capture does with the limit: its target says
    cap = cli("capture", "-q", "-o", tmp_path / "b", "--", "sh", "-c", 'echo "soft core limit: $(ulimit -c)"')
    assert cap.returncode == 0, cap.stderr
    said = next(ln for ln in (tmp_path / "b" / "server.log").read_text().splitlines() if "soft core limit" in ln)
    if said.endswith(": 0"):         # capture left it at 0: doctor must not claim it sets it
        assert "capture sets" not in core["found"] and "left at 0" in core["found"], core
        assert core["status"] == "warn" and "ulimit -c" in core["fix"]
    else:
        assert "capture sets the target's soft limit" in core["found"], (said, core)
    res = cli("show", tmp_path / "b", "-o", tmp_path / "s.json")
    assert res.returncode == 0, res.stderr
    shown = json.loads((tmp_path / "s.json").read_text())
    assert shown["schema"].startswith("faultkit.show/") and shown["exit_status"] == 0 and shown["is_bundle"]
    res = cli("show", tmp_path / "b", "-o", tmp_path / "s.txt")
    assert not (tmp_path / "s.txt").read_text().lstrip().startswith("{")
