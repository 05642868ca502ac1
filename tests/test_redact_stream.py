"""`capture --redact-output` redacts the target's output block by block as it arrives: a private
key's body that spans blocks must be hidden to its END line. (Seen in a loaded full-suite run: the
planted-secrets test found a PEM body line in server.log when the recorder's read fell inside the key.)"""

import subprocess
import sys

from faultkit.redact import LineStream, text

KEY = ("-----BEGIN RSA PRIVATE KEY-----\n" + "".join(f"SecretBody{i:04d}\n" for i in range(6))
       + "-----END RSA PRIVATE KEY-----\nafter the key\n")


def test_a_key_cut_across_chunks_is_hidden_to_its_end():
    lines = KEY.splitlines(keepends=True)
    chunks = ["".join(lines[:3]), "".join(lines[3:5]), "".join(lines[5:])]
    stream = LineStream()
    out = "".join(stream.feed(c) for c in chunks)
    assert "SecretBody" not in out
    assert out.count("\n") == KEY.count("\n") and out.endswith("after the key\n")   # lines kept, the rest untouched
    assert "SecretBody" in "".join(text(c) for c in chunks)                         # what chunk-by-chunk text() let by
    assert not stream.in_block


# The key written in pieces with pauses: each piece reaches the recorder as a block of its own.
WRITER = r"""
import sys, time
key = sys.argv[1].splitlines(keepends=True)
for i in range(0, len(key), 2):
    sys.stdout.write("".join(key[i:i + 2])); sys.stdout.flush(); time.sleep(0.3)
"""


def test_capture_redact_output_hides_a_key_written_in_pieces(tmp_path):
    out = tmp_path / "b"
    res = subprocess.run([sys.executable, "-m", "faultkit.cli", "capture", "-q", "--redact-output", "-o", str(out),
                          "--", sys.executable, "-c", WRITER, KEY], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    log = (out / "server.log").read_text()
    assert "after the key" in log and "BEGIN RSA PRIVATE KEY" in log
    assert "SecretBody" not in log and "SecretBody" not in res.stdout + res.stderr
