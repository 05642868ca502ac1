"""`faultkit dump --read` of a faulthandler dump (which prints no pid): the process heading says the pid
is unknown instead of naming a pid 0 that no process has."""

import subprocess
import sys

from click.testing import CliRunner

from faultkit.cli import main


def test_a_dump_without_a_pid_is_not_called_process_0(tmp_path):
    prog = tmp_path / "fh.py"
    prog.write_text("import faulthandler, sys, time\n"
                    "def nap():\n"
                    "    faulthandler.dump_traceback(sys.stdout, all_threads=True)  # DUMP\n"
                    "nap()\n")
    dump = tmp_path / "fh.txt"
    dump.write_text(subprocess.run([sys.executable, str(prog)], capture_output=True, text=True, timeout=60).stdout)
    assert "Current thread 0x" in dump.read_text()                     # faulthandler's own heading, no pid
    res = CliRunner().invoke(main, ["dump", "--read", str(dump)])
    assert res.exit_code == 0, res.output
    heads = [ln for ln in res.output.splitlines() if ln.startswith("Process")]
    assert heads == ["Process (pid not in the dump)"]
    assert f"nap ({prog}:3)" in res.output
