import os
import re
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus"
TRACES = ROOT / "traces"


@pytest.fixture
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.skip(f"sample corpus not found at {CORPUS}; see shared/corpus/README.md")
    return CORPUS


def corpus_files(sub: str, pattern: str = "*.txt") -> list[Path]:
    d = CORPUS / sub
    return sorted(d.glob(pattern)) if d.is_dir() else []


def corpus_ids(files: list[Path]) -> list[str]:
    return [f.name for f in files]


# The corpus's own markup (README "Use in tests"): provenance lines are dropped, and an excerpt
# boundary becomes the elision line a poster would write between two stretches of a log.
_MARKUP = re.compile(rb"^# (?:source|notes|Format|Version)\b[^\n]*\n?", re.M)
_EXCERPT = re.compile(rb"^# ---[^\n]*$", re.M)


def corpus_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    if path.suffix in (".csv", ".xz", ".cu", ".py", ".sh"):
        return data
    return _EXCERPT.sub(b"---", _MARKUP.sub(b"", data))


def corpus_copy(path: Path, folder: Path) -> Path:
    """The file as evidence a user would hold (markup stripped), for tests that go through triage."""
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / path.name
    out.write_bytes(corpus_bytes(path))
    return out


# Every process this test run starts inherits this variable (setsid daemons too): leftover checks
# look only at processes carrying it, so two test runs on one machine never see each other's.
TREE_TOKEN = f"FK_TEST_TREE={uuid.uuid4().hex}"
os.environ["FK_TEST_TREE"] = TREE_TOKEN.split("=", 1)[1]


def triage_text(tmp_path: Path, text: str, name: str = "paste.txt", fmt: str = "json"):
    """A pasted text triaged through the real CLI, as a user runs it: the JSON report (or the text of `fmt`)."""
    import json
    import subprocess
    import sys
    p = tmp_path / name
    p.write_text(text)
    r = subprocess.run([sys.executable, "-m", "faultkit.cli", "triage", str(p), "-f", fmt],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout) if fmt == "json" else r.stdout


def logrotate(log: Path, how: str, tmp_path: Path, keep: int = 3) -> None:
    """What logrotate does: `create` renames the file and makes a new one; `copytruncate` copies it
    and empties it in place. logrotate itself where it is installed, else the same system calls."""
    import os
    import shutil
    import subprocess
    if shutil.which("logrotate"):
        conf = tmp_path / f"logrotate-{how}.conf"
        conf.write_text(f"{log} {{\n  rotate {keep}\n  {how}\n  missingok\n}}\n")
        subprocess.run(["logrotate", "-f", "-s", str(tmp_path / "logrotate.state"), str(conf)], check=True)
    elif how == "create":
        os.rename(log, f"{log}.1")
        log.write_text("")
    else:
        shutil.copyfile(log, f"{log}.1")
        os.truncate(log, 0)


def live_processes(want) -> list[tuple[int, list[bytes]]]:
    """(pid, argv) of every live (not zombie) process whose argv `want(pid, argv, environ)` accepts:
    the one /proc walk the leftover checks share (environ is read only when asked: b"" if unreadable)."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                if fh.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    continue
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
        except (OSError, IndexError):
            continue
        def environ(pid=name) -> list[bytes]:
            try:
                with open(f"/proc/{pid}/environ", "rb") as fh:
                    return fh.read().split(b"\0")
            except OSError:
                return []
        if want(int(name), argv, environ):
            out.append((int(name), argv))
    return out


def own_processes(word: str, exclude: int | None = None, whole_arg: bool = False) -> list[int]:
    """Live processes of this test run whose command line contains `word` (`whole_arg`: as one
    argument, not inside another: faultkit's watchdog carries the target's command as one string)."""
    def want(pid, argv, environ):
        if pid in (os.getpid(), exclude) or word.encode() not in (argv if whole_arg else b" ".join(argv)):
            return False
        return TREE_TOKEN.encode() in environ()
    return [pid for pid, _ in live_processes(want)]


def no_internal_errors(problems) -> None:
    """The parsers catch every exception per line and record it: a never-raises test passes only
    when none was caught (a planted ZeroDivisionError otherwise leaves just a problem)."""
    internal = [str(p) for p in problems if getattr(p, "internal", False)]
    assert not internal, f"internal parser errors: {internal[:5]}"


def pytest_xdist_auto_num_workers(config):
    """`-n auto`: one worker per core, at most 8 (each worker holds its own imports, and the tests
    that start servers and clusters gain nothing from more)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(8, cores))


def pytest_terminal_summary(terminalreporter):
    """The metamorphic harness's matrix (tests/test_paste_metamorphic.py), from the rows its tests
    recorded (user properties travel from xdist's workers with the reports)."""
    held: dict = {}
    for outcome in ("passed", "failed"):
        for rep in terminalreporter.stats.get(outcome, []):
            for key, value in getattr(rep, "user_properties", ()):
                if key == "paste_matrix":          # test_paste_metamorphic.MATRIX_KEY
                    transform, row = value
                    for folder, cell in row.items():
                        held[(transform, folder)] = tuple(cell)
    if held:
        from .test_paste_metamorphic import matrix      # (only where its rows were recorded)
        terminalreporter.write_sep("-", "paste matrix (transform x source: held/pastes)")
        terminalreporter.write_line(matrix(held))
