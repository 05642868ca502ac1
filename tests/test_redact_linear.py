"""The redactor runs in time linear in its text, whatever the text (the adversarial pass of issue 36:
`pack` of a bundle whose kernel log held a 4 MB line of letters and, elsewhere, one '://' ran for
hours, as did `dump --read` of a py-spy JSON with a 1 MB string: every letter of the run started a
URL scheme that was scanned to the run's end). Every shape of redact.SHAPES and every name pass is
made to run (its hint is in the text) over runs of the characters its pattern repeats; n and 10n
units are timed (CPU of this thread, best of three where it looks slow): a linear redactor takes
about 10x as long, a quadratic one 100x."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from faultkit import redact

# characters a pattern's repeated part takes (a scheme's letters, a key's dots, a flag's spaces ...)
UNITS = {"letters": "a", "dotted": "a.", "spaces": " ", "tabs": "\t", "colons": "a:", "equals": "a=", "dashes": "-",
         "slashes": "/", "ats": "@", "quotes": '"', "escaped spaces": "\\ ", "pointers": "0x1 ", "words": "ab ",
         "upper": "A", "digits": "1"}
# what makes each shape and name pass run at all: its hint, at both ends of the run
HINTS = ["://x", "x://u:", "-u ", "--user ", "Authorization: ", "Bearer ", "-p", "sk-", "=\"", "api_key=", "password: ",
         "-----BEGIN RSA PRIVATE KEY-----", "?sig=", "--api-key ", "hf_", "-----END RSA PRIVATE KEY-----"]
SMALL = 2_000


def _cpu(text: str) -> float:
    t = time.thread_time()
    redact.text(text)
    return time.thread_time() - t


@pytest.mark.parametrize("unit", UNITS)
def test_ten_times_the_text_takes_about_ten_times_as_long(unit):
    slow = []
    for hint in HINTS:
        def make(n):
            return hint + UNITS[unit] * n + hint
        small = min(_cpu(make(SMALL)) for _ in range(3))
        large = float("inf")
        for _ in range(3):
            large = min(large, _cpu(make(SMALL * 10)))
            ratio = large / max(small, 1e-3)
            if ratio < 50:
                break
        if ratio >= 50:
            slow.append(f"{hint!r}: {small:.4f} s -> {large:.4f} s")
    assert not slow, f"redact.text on runs of {unit!r}: {slow}"


def test_pack_of_a_long_line_of_letters_and_a_url_ends_and_redacts(tmp_path):
    """Through the real CLI: the reproducer's shape (a line of 300,000 letters, a URL with a
    password elsewhere) packs in seconds, the password hidden (the scan ran for hours before)."""
    b = tmp_path / "b"
    b.mkdir()
    (b / "manifest.json").write_text(json.dumps({"schema": "faultkit.bundle/1", "command": "server", "state": "finished"}))
    (b / "server.log").write_text("A" * 300_000 + "\nconnect postgres://svc:planted-url-pw-0001@db:5432/app\n")
    out = tmp_path / "p.tar.gz"
    res = subprocess.run([sys.executable, "-m", "faultkit.cli", "pack", str(b), "-o", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    import tarfile
    with tarfile.open(out) as tf:
        log = next(tf.extractfile(m).read() for m in tf.getmembers() if m.name.endswith("server.log"))
    assert b"planted-url-pw-0001" not in log
    assert b"postgres://svc:<redacted>@db:5432/app" in log
