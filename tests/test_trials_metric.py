"""`--metric REGEX` is the user's own pattern, run over up to 64 MiB of a trial's log: a pattern
Python's backtracking engine takes exponential time on (`(a*)*b` over a long run of `a`, the
adversarial pass's hang of `trials report`) ends; a pattern only Python's re has still reads."""

from __future__ import annotations

import subprocess
import sys

from faultkit import layout


def test_a_backtracking_pattern_over_a_long_log_ends(tmp_path):
    (tmp_path / layout.log_of("client")).write_text("a" * 40_000 + "\nthroughput 12.5 b\n")
    code = ("import sys; from pathlib import Path; from faultkit.trials.metric import metric_from; "
            "print(metric_from(Path(sys.argv[1]), r'(a*)*b'), metric_from(Path(sys.argv[1]), r'throughput ([\\d.]+)'))")
    res = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    # `(a*)*b`'s last match is the lone `b` (its group empty: no number), the throughput line's 12.5
    assert res.stdout.split() == ["None", "12.5"], res.stdout
    assert res.stderr == ""                   # RE2 says nothing on stderr


def test_a_lookbehind_pattern_still_reads(tmp_path):
    from faultkit.trials.metric import metric_from
    (tmp_path / layout.log_of("client")).write_text("tokens: 10\nserved tokens: 42\n")
    assert metric_from(tmp_path, r"(?<=served )tokens: (\d+)") == 42.0
