"""capture's status line on a terminal that reports no size (0 columns: a pty nobody sized, as `script`,
`docker exec -t` or a CI runner give): the line is shown whole up to the fallback width, not cut to 20
characters ("[faultkit 0:00:00] 1")."""

import os
import pty
import select
import sys
import time

from .conftest import ROOT


def test_status_line_on_a_terminal_of_unknown_width(tmp_path):
    out = tmp_path / "b"
    pid, fd = pty.fork()                     # a fresh pty: 0 rows, 0 columns
    if pid == 0:
        os.environ["PYTHONPATH"] = str(ROOT)
        os.execv(sys.executable, [sys.executable, "-m", "faultkit.cli", "capture", "-o", str(out), "--",
                                  sys.executable, "-c", "import time; print('up', flush=True); time.sleep(3)"])
    buf, end = b"", time.time() + 60
    while time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.5)
        if r:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            buf += data
    os.waitpid(pid, 0)
    text = buf.decode(errors="replace")
    assert "[faultkit 0:00:0" in text
    assert "1 processes, 0 on a GPU" in text, text[-600:]
