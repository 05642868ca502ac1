"""What a reader sees: the report rendered by GitHub's own Markdown renderer (cmark-gfm) shows
faultkit's own markup as markup (commands as code, the hang state in bold) and the evidence as it
was written (`<string>:10 _fwd_grouped_kernel`), never escape characters or backticks. Through the
real CLI on a real deadlocked program captured with --hang-after, and on a corpus log."""

from __future__ import annotations

import html
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

cmarkgfm = pytest.importorskip("cmarkgfm", reason="pip install cmarkgfm (GitHub's own renderer)")

ROOT = Path(__file__).resolve().parents[1]
CORPUS_LOG = ROOT.parent / "shared" / "corpus" / "runtime" / "hsa_0x1016_iree_issue_17872.txt"
DEADLOCK = textwrap.dedent("""
    import threading, time
    a, b = threading.Lock(), threading.Lock()
    def t1():
        with a:
            time.sleep(0.2)
            with b: pass
    def _fwd_grouped_kernel():
        with b:
            time.sleep(0.2)
            with a: pass
    threading.Thread(target=t1).start()
    _fwd_grouped_kernel()
""")


def rendered(md: str) -> str:
    return cmarkgfm.github_flavored_markdown_to_html(md, options=cmarkgfm.Options.CMARK_OPT_UNSAFE)


def visible(page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def triage(*args) -> str:
    res = subprocess.run([sys.executable, "-m", "faultkit.cli", "triage", "--no-open-cores", *map(str, args)],
                         capture_output=True, text=True, timeout=300)
    return res.stdout


@pytest.fixture(scope="module")
def hang_bundle(tmp_path_factory):
    d = tmp_path_factory.mktemp("hang")
    (d / "dl.py").write_text(DEADLOCK)
    res = subprocess.run([sys.executable, "-m", "faultkit.cli", "capture", "-q", "--hang-after", "3s", "-o", d / "b",
                          "--", sys.executable, "-c", f"exec(open({str(d / 'dl.py')!r}).read())"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 124, res.stderr
    return d / "b"


def test_a_hang_report_reads_as_written(hang_bundle):
    page = rendered(triage(hang_bundle))
    seen = visible(page)
    assert "<strong>hung</strong>" in page                      # the report's own emphasis, rendered
    # the evidence as the program's frames name it: `exec` of a string, its function's name
    line = DEADLOCK.splitlines().index("        with a: pass") + 1       # where _fwd_grouped_kernel blocks
    assert f"at <string>:{line} _fwd_grouped_kernel" in seen
    assert not re.search(r"\\[\\`*_<>\[\]#|~]", seen), re.findall(r".{30}\\[\\`*_<>\[\]#|~].{10}", seen)
    assert "**" not in seen and "`" not in seen


def test_the_next_steps_commands_are_code_in_markdown_and_html(tmp_path):
    if not CORPUS_LOG.exists():
        pytest.skip(f"shared corpus not found at {CORPUS_LOG}")
    log = tmp_path / CORPUS_LOG.name
    log.write_text("".join(ln for ln in CORPUS_LOG.read_text().splitlines(True) if not ln.startswith("# ")))
    page = rendered(triage(log))
    assert "<code>faultkit capture --with rocgdb --attach-workers -- &lt;launch command&gt;</code>" in page
    seen = visible(page)
    assert "`" not in seen and "\\`" not in seen
    out = tmp_path / "r.html"
    subprocess.run([sys.executable, "-m", "faultkit.cli", "triage", "--no-open-cores", str(log), "-o", str(out)],
                   capture_output=True, timeout=300)
    doc = out.read_text()
    assert "<code>faultkit capture --with rocgdb --attach-workers -- &lt;launch command&gt;</code>" in doc
    assert "`" not in visible(re.sub(r"<style>.*?</style>", "", doc, flags=re.S))
