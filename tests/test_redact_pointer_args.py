"""A pointer in a debugger's frame is evidence, not a secret: `call (keywords=0x0, n=3)` as real
GNU gdb prints it under `capture --with gdb`, kept in the bundle and in the report; a string
argument of a secret-named parameter is still hidden."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

from faultkit import redact

PROGRAM = r"""
#include <stdio.h>
__attribute__((noinline)) static int call(const char *keywords, int n) {
    volatile int *p = 0; printf("n=%d\n", n); fflush(stdout); return *p + n + (keywords != 0); }
int main(void) { return call(0, 3); }
"""


def test_a_null_pointer_argument_named_keywords_is_kept(tmp_path):
    if shutil.which("gcc") is None or shutil.which("gdb") is None:
        pytest.skip("needs gcc and gdb")
    (tmp_path / "kw.c").write_text(PROGRAM)
    subprocess.run(["gcc", "-g", "-O0", "-o", str(tmp_path / "kw"), str(tmp_path / "kw.c")], check=True)
    res = subprocess.run([sys.executable, "-m", "faultkit.cli", "capture", "-q", "--with", "gdb", "-o",
                          str(tmp_path / "b"), "--", str(tmp_path / "kw")], capture_output=True, text=True, timeout=120)
    assert res.returncode == 139, res.stderr
    transcript = (tmp_path / "b" / "debugger.txt").read_text()
    frame = re.search(r"#0 .* in call \((.*?)\) at \S*kw\.c", transcript)
    assert frame and frame.group(1) == "keywords=0x0, n=3", transcript[-2000:]
    md = subprocess.run([sys.executable, "-m", "faultkit.cli", "triage", str(tmp_path / "b")], capture_output=True,
                        text=True, timeout=300).stdout
    assert "keywords=0x0" in md and "keywords=<redacted>" not in md.replace("\\<", "<")


def test_a_secret_string_argument_is_still_hidden():
    line = '#1  0x0000555555555200 in login (api_key=0x5555555560a0 "hunter2hunter2", n=3) at app.c:9'
    assert "hunter2" not in redact.text(line) and "n=3" in redact.text(line)
    assert redact.text("#2 f (token=0x0, n=3)") == "#2 f (token=0x0, n=3)"        # a null pointer hides nothing
