"""Everything evidence-derived is safe for the channel it is written to (issue 28, Injection), every
file faultkit writes is private (issue 28, Permissions), and the output conventions of issue 21 B:
-o's extension names the format, kernels are shown demangled, the JSON has the capture's facts, a
bad output path is the user's error."""

from __future__ import annotations

import json
import os
import re
import stat
import sys
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from faultkit import cli
from faultkit.cli import main

# The reproducers: OSC 52 (clipboard) and OSC 8 (link) ended by ST, DCS, CSI in its 8-bit form, C1
# controls, BEL/BS/CR/DEL/NUL, a bidi override, and a newline that forges a line of faultkit's own.
HOSTILE = ("\x1b]52;c;ZXZpbA==\x1b\\" "\x1b]8;;http://evil.example/\x1b\\link\x1b]8;;\x1b\\" "\x1bP1$r0m\x1b\\"
           "\x9b31m" "\x85\x90x\x9c" "\x07\x08\r\x7f\x00" "\u202egnp.exe" "\nwrote forged.md: verdict certain")
CONTROLS = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
# A ROCclr fault line naming a kernel: the kernel name is evidence the terminal lines repeat.
ROCCLR = (":0:rocdevice.cpp            :3781: 3846021774512 us:  Memory Fault Error [host: node17, GPU index: 1, "
          "faulting addr: 0x7f3a2c400000, kernel: {kernel}]\n"
          "Memory access fault by GPU node-3 (Agent handle: 0x55d1c3f0a2b0) on address 0x7f3a2c400000. Reason: "
          "Page not present or supervisor privilege.\n")
MANGLED = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5ArrayIPcLi1EEEEEviT0_T1_"
DEMANGLED = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
             "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)")


def _terminal_lines_are_clean(output: str) -> list[str]:
    lines = output.split("\n")
    assert not [ln for ln in lines if CONTROLS.search(ln.replace("\t", " "))], output
    return lines


def test_clean_strips_every_sequence_and_control():
    from faultkit.terminal import clean
    shown = clean(HOSTILE)
    assert not CONTROLS.search(shown)
    assert "52;c" not in shown and "evil.example" not in shown and "$r0m" not in shown and "31m" not in shown
    assert "link" in shown and "gnp.exe" in shown and "\n" not in shown      # the text stays, on one line


def test_triage_verbose_and_wrote_lines_carry_no_escape(tmp_path):
    """`triage -v` prints file and member names, `-o` the verdict's kernel: both from the evidence."""
    evil = "k" + HOSTILE.replace("\x00", "").replace("/", "")
    log = tmp_path / ("server" + HOSTILE.replace("\x00", "").replace("/", "") + ".log")
    try:
        log.write_text(ROCCLR.format(kernel=evil))
    except OSError:
        pytest.skip("this filesystem refuses such a file name")
    archive = tmp_path / "bundle.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(log, arcname="member" + HOSTILE.replace("\x00", "").replace("/", "") + ".log")
    report = tmp_path / ("r" + HOSTILE.replace("\x00", "").replace("/", "") + ".md")
    res = CliRunner().invoke(main, ["triage", "-v", str(log), str(archive), "-o", str(report)])
    assert res.exit_code == 0, res.output
    assert report.exists()
    lines = _terminal_lines_are_clean(res.output)
    wrote = [ln for ln in lines if ln.startswith("wrote ")]
    assert len(wrote) == 1 and "gnp.exe" in wrote[0]                        # shown, cleaned, on one line
    assert not any(ln.startswith("wrote forged") for ln in lines)            # no forged line
    read = [ln for ln in lines if ln.startswith("read ")]
    assert len(read) >= 2 and all("gnp.exe" in ln for ln in read)           # file and member names


def test_capture_summary_carries_no_escape(tmp_path):
    evil = "k" + HOSTILE.replace("\x00", "")
    script = tmp_path / "t.py"
    script.write_text(f"import sys\nsys.stdout.write({ROCCLR.format(kernel=evil)!r})\nsys.exit(134)\n")
    res = CliRunner().invoke(main, ["capture", "-o", str(tmp_path / "b"), "--", sys.executable, str(script)])
    assert res.exit_code == 134, res.output
    # The target's own output is mirrored as written; faultkit's own lines (after it) are clean.
    own = res.output[res.output.index("bundle: "):]
    lines = _terminal_lines_are_clean(own)
    assert lines[0].startswith("bundle: ") and lines[1].startswith("verdict: ") and "gnp.exe" in own
    assert not any(ln.startswith("wrote forged") for ln in lines)


# A ROCclr kernel name ends at the first `]`; links and images come in through the file name.
EVIDENCE_KERNEL = "k`x <img src=http://t.example/p.png> **bold** _em_ ~~del~~"
EVIDENCE_TEXT = " at https://x.example/a www.y.example a@b.example"
EVIDENCE_FILE = "srv ![i](http:p.example) [a](http:l.example) <img src=x> `t.log"


def _incident(tmp_path, kernel: str):
    from faultkit.triage import triage
    log = tmp_path / EVIDENCE_FILE
    log.write_text(ROCCLR.format(kernel=kernel))
    return triage([str(log)])


def test_markdown_renders_evidence_as_text(tmp_path):
    cmarkgfm = pytest.importorskip("cmarkgfm", reason="pip install cmarkgfm (GitHub's own renderer)")
    from faultkit.export.report import render_markdown
    md = render_markdown(_incident(tmp_path, EVIDENCE_KERNEL + EVIDENCE_TEXT))
    page = cmarkgfm.github_flavored_markdown_to_html(md, options=cmarkgfm.Options.CMARK_OPT_UNSAFE)
    assert "<img" not in page and "<a " not in page          # no pixel, no link, no autolink
    assert "<strong>bold</strong>" not in page and "<em>" not in page and "<del>" not in page
    # The kernel is shown whole, as code, in the verdict's table (the stray backtick escaped nothing),
    # and the file name as text.
    assert "<code>k`x &lt;img src=http://t.example/p.png&gt; **bold** _em_ ~~del~~" + EVIDENCE_TEXT + "</code>" in page
    assert "srv ![i](http:p.example) [a](http:l.example) &lt;img src=x&gt; `t.log" in page


def test_html_and_json_carry_evidence_exactly(tmp_path):
    from faultkit.export.report import render_html, render_json
    inc = _incident(tmp_path, EVIDENCE_KERNEL + "\u202e")
    page = render_html(inc)
    assert "<img" not in page and "<a " not in page and "\x1b" not in page and "\u202e" not in page
    assert "k`x &lt;img src=http://t.example/p.png&gt;" in page
    doc = json.loads(render_json(inc))
    assert doc["verdict"]["candidates"][0]["kernel"] == EVIDENCE_KERNEL + "\u202e"   # JSON keeps it exactly
    assert "\x1b" not in render_json(inc) and "NaN" not in render_json(inc)


def test_markdown_helpers():
    from faultkit.export.markup import code, md
    assert md(code("a`b")) == "``a`b``" and md(code("`")) == "`` ` ``"
    assert md("x|y", cell=True) == "x\\|y" and md(code("x|y"), cell=True) == "`x\\|y`"
    assert md("# not a heading", block=True) == "\\# not a heading"
    assert md("1. not a list", block=True) == "1\\. not a list"
    assert md("a_b_c _e_ *s* ~t~") == "a_b_c \\_e\\_ \\*s\\* \\~t\\~"


# ---------------- private files ----------------

def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_reports_and_timelines_are_private(tmp_path):
    sample = str(Path(__file__).parent.parent / "traces" / "sglang-tp2-mi300x")
    for name in ("r.md", "r.html", "r.json", "new/dir/r.md"):
        res = CliRunner().invoke(main, ["triage", sample, "-o", str(tmp_path / name)])
        assert res.exit_code == 0, res.output
        assert _mode(tmp_path / name) == 0o600
    assert _mode(tmp_path / "new") == 0o700 and _mode(tmp_path / "new" / "dir") == 0o700
    for name in ("t.pftrace", "t.json"):
        res = CliRunner().invoke(main, ["timeline", sample, "-o", str(tmp_path / name)])
        assert res.exit_code == 0, res.output
        assert _mode(tmp_path / name) == 0o600
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".part")]     # no temporary left


def test_internal_error_traceback_is_private_and_not_in_tmp(tmp_path, monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("planted failure")
    out = tmp_path / "reports"
    out.mkdir()
    monkeypatch.setattr(cli, "main", boom)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(sys, "argv", ["faultkit", "triage", "x.log", "-o", str(out / "r.md")])
    with pytest.raises(SystemExit) as e:
        cli.run()
    assert e.value.code == cli.EXIT_INTERNAL
    [tb] = list(out.glob("faultkit-error-*.txt"))
    assert "planted failure" in tb.read_text() and _mode(tb) == 0o600
    assert not Path(f"/tmp/faultkit-error-{os.getpid()}.txt").exists()
    # No -o: the user's cache folder, made 0700.
    monkeypatch.setattr(sys, "argv", ["faultkit", "triage", "x.log"])
    with pytest.raises(SystemExit):
        cli.run()
    cache = tmp_path / "cache" / "faultkit"
    [tb] = list(cache.glob("faultkit-error-*.txt"))
    assert _mode(tb) == 0o600 and _mode(cache) == 0o700


def test_private_file_is_atomic(tmp_path):
    from faultkit.private_files import PrivateFile
    target = tmp_path / "r.md"
    target.write_text("old")
    with pytest.raises(ValueError):
        with PrivateFile(target) as fh:
            fh.write("half")
            raise ValueError
    assert target.read_text() == "old" and list(tmp_path.iterdir()) == [target]


# ---------------- issue 21 B: conventions ----------------

def test_triage_output_format_follows_the_extension(tmp_path):
    sample = str(Path(__file__).parent.parent / "traces" / "sglang-tp2-mi300x")
    for name, head in (("r.html", "<!DOCTYPE html>"), ("r.json", "{"), ("r.md", "# faultkit triage report"),
                       ("r.txt", "# faultkit triage report")):
        assert CliRunner().invoke(main, ["triage", sample, "-o", str(tmp_path / name)]).exit_code == 0
        assert (tmp_path / name).read_text().startswith(head), name
    # --format given wins over the extension
    CliRunner().invoke(main, ["triage", sample, "-f", "json", "-o", str(tmp_path / "x.html")])
    json.loads((tmp_path / "x.html").read_text())


def test_bad_output_path_is_a_plain_error(tmp_path):
    sample = str(Path(__file__).parent.parent / "traces" / "sglang-tp2-mi300x")
    for args in (["triage", sample, "-o", "/proc/x"], ["timeline", sample, "-o", "/proc/x.pftrace"]):
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 1, res.output
        assert "/proc/x" in res.output and "cannot write there" in res.output and "Traceback" not in res.output


def test_mangled_kernels_are_shown_demangled_and_kept_in_json(tmp_path):
    pytest.importorskip("cxxfilt")
    from faultkit.export.report import render_html, render_json, render_markdown
    inc = _incident(tmp_path, MANGLED)
    assert DEMANGLED in render_markdown(inc).replace("\\", "")
    assert DEMANGLED.replace("<", "&lt;").replace(">", "&gt;") in render_html(inc)
    cand = json.loads(render_json(inc))["verdict"]["candidates"][0]
    assert cand["kernel"] == MANGLED and cand["kernel_demangled"] == DEMANGLED
    res = CliRunner().invoke(main, ["triage", str(tmp_path / EVIDENCE_FILE), "-o", str(tmp_path / "r.md")])
    assert res.exit_code == 0 and MANGLED not in res.output


def test_demangler_falls_back_to_the_raw_name():
    from faultkit.demangle import display_name
    assert display_name("_Zbad") == "_Zbad" and display_name("gemm_kernel") == "gemm_kernel"
    assert display_name(None) is None and display_name("_Z" + "N" * 5000) == "_Z" + "N" * 5000


def test_json_report_has_the_capture_facts(tmp_path):
    out = tmp_path / "b"
    res = CliRunner().invoke(main, ["capture", "--env", "AMD_SERIALIZE_KERNEL=3", "-o", str(out), "--",
                                    sys.executable, "-c", "import sys, time; time.sleep(0.6); sys.exit(3)"])
    assert res.exit_code == 3, res.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert CliRunner().invoke(main, ["triage", str(out), "-o", str(tmp_path / "r.json")]).exit_code == 0
    doc = json.loads((tmp_path / "r.json").read_text())
    c = doc["capture"]
    assert c["command"] == manifest["command"] and c["exit_code"] == 3 and c["exit"] == manifest["exit"]
    assert c["ended_by"] == manifest["ended_by"] == "target-exit"
    assert c["env_check"]["verified"] is True and c["env_requested"] == {"AMD_SERIALIZE_KERNEL": "3"}
    assert c["armed"]["cuda_coredump"] == bool(manifest["coredump"].get("cuda"))
    follow = manifest["kernel_log"]["follow"]
    assert c["kernel_log"]["readable"] == (follow == "kernel.log")
    md = CliRunner().invoke(main, ["triage", str(out)]).output
    assert "requested environment: verified in /proc" in md and "kernel log: " in md



def test_plain_text_never_links_in_github_markdown():
    cmarkgfm = pytest.importorskip("cmarkgfm", reason="pip install cmarkgfm (GitHub's own renderer)")
    from faultkit.export.markup import md
    text = ("see https://x.example/a www.y.example a@b.example ![i](http://p.example/x.png) [a](http://l.example) "
            "<img src=x> <http://z.example> **b** _e_ ~~d~~ &lt;img&gt; | pipe")
    page = cmarkgfm.github_flavored_markdown_to_html(md(text, block=True), options=cmarkgfm.Options.CMARK_OPT_UNSAFE)
    assert not re.search(r"<(?:a|img|strong|em|del)\b", page), page
    assert "https://x.example/a www.y.example" in page and "&amp;lt;img&amp;gt;" in page


def test_brackets_stay_readable_and_never_link():
    cmarkgfm = pytest.importorskip("cmarkgfm", reason="pip install cmarkgfm (GitHub's own renderer)")
    from faultkit.export.markup import md
    # a bare `[x]` links only to a definition, and evidence can define none: a `[x]: url` at a
    # line's start is escaped (and stays visible), and nothing else in a report starts a block
    render = lambda t: cmarkgfm.github_flavored_markdown_to_html(           # noqa: E731
        f"- {md(t, block=True)}\n\n{md(t, block=True)}\n\n| a |\n|---|\n| {md(t, cell=True)} |\n",
        options=cmarkgfm.Options.CMARK_OPT_UNSAFE)
    assert md("[183402.551203] amdgpu") == "[183402.551203] amdgpu"         # dmesg's stamp as written
    for t in ("[x]: http://evil.example", "[a](http://l.example)", "![i](http://p.example/x.png)", "[a][x]",
              "[x] shortcut to a definition elsewhere", "[ ] task", "[^1] note"):
        page = render(t)
        assert not re.search(r"<(?:a|img|input|sup)\b", page), (t, page)
        assert page.count(t.split("]")[0] + "]") == 3, (t, page)            # shown in all three places


def test_timeline_slices_show_demangled_names(tmp_path):
    pytest.importorskip("cxxfilt")
    from .test_traces import FAULT_NS, MS, bundle, k70
    b = bundle(tmp_path, kernels=[k70(1, 1, 1, 9, 1, MANGLED, 1, FAULT_NS - 5 * MS, FAULT_NS - 4 * MS),
                                  k70(1, 1, 1, 9, 2, "plain_kernel", 2, FAULT_NS - 3 * MS, FAULT_NS - 2 * MS)])
    out = tmp_path / "t.json"
    res = CliRunner().invoke(main, ["timeline", str(b), "-o", str(out)])
    assert res.exit_code == 0, res.output
    names = {e["name"] for e in json.loads(out.read_text())["traceEvents"] if e["ph"] == "X"}
    assert {DEMANGLED, "plain_kernel"} <= names and MANGLED not in names

