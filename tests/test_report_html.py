"""The HTML report as a user sees it: verdict badge, the decisive finding, the picture of the last
moments before the fault (times relative to it), self-contained, and laid out within 1280 px in
headless Chromium (Debian's package; skipped where it is absent)."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "traces" / "sglang-tp2-mi300x"
sys.path.insert(0, str(ROOT / "scripts"))


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("html") / "report.html"
    subprocess.run([sys.executable, "-m", "faultkit.cli", "triage", str(SAMPLE), "-f", "html", "-o", str(out)],
                   cwd=ROOT, check=True, capture_output=True)
    return out


def test_badge_finding_and_last_moments(page):
    text = page.read_text()
    assert '<span class="level level-candidates">candidates</span>' in text
    assert re.search(r"Decisive finding: 0x7f3a2c400000 is inside an allocation of 4,194,304 bytes .* freed "
                     r"3\.100 ms before the fault", text)
    svg = re.search(r"<svg .*?</svg>", text, re.S).group(0)
    assert 'aria-label="last -100 ms before the fault, per GPU queue"' in svg
    assert ">-20 ms<" in svg and ">fault<" in svg                    # relative to the fault, not raw ns
    assert "pid 48213 · GPU node 3 · queue 1" in svg                  # one lane per queue, the faulting GPU's
    suspect = re.findall(r'<rect [^>]*fill="#c0392b"[^>]*><title>([^<]*)</title>', svg)
    assert suspect == ["launch with no completion record: from -21.6 ms (suspect)"]
    assert "free 0x7f3a2c400000 at -3.1 ms" in svg
    assert "<script" not in text and "http://" not in text.replace("http://www.w3.org/2000/svg", "")


needs_chromium = pytest.mark.skipif(shutil.which("chromium") is None and shutil.which("chromium-browser") is None,
                                    reason="headless Chromium not installed (Debian: apt-get install chromium)")


@needs_chromium
def test_screenshot_and_layout_at_1280_px(page, tmp_path):
    from screenshot_report import layout_width, screenshot
    png = tmp_path / "report.png"
    screenshot(page, png, height=900)
    head = png.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", head[16:24]) == (1280, 900)
    assert png.stat().st_size > 20_000                 # a rendered page, not a blank one
    assert layout_width(page) <= 1280                  # nothing overflows the window


@needs_chromium
def test_a_mangled_name_hundreds_of_letters_long_does_not_widen_the_page(tmp_path):
    """C++ kernel names (alpaka, CUTLASS) are one word of hundreds of letters: lists wrap them."""
    from screenshot_report import layout_width
    name = "_ZN6alpaka6detail9gpuKernelIN17alpaka_rocm_async" + "28caHitNtupletGeneratorKernels24Kernel" * 12 + "Ev"
    log = tmp_path / "server.log"
    log.write_text(f"Kernel Name: {name}\nVGPU=0x1 SWq=0x2, HWq=0x3, id=4\n\tgrid=[1024, 1, 1], workgroup=[256, 1, 1]\n"
                   "\trptr=931, wptr=959\n")
    out = tmp_path / "r.html"
    subprocess.run([sys.executable, "-m", "faultkit.cli", "triage", str(log), "-f", "html", "-o", str(out)],
                   cwd=ROOT, check=True, capture_output=True)
    assert name in out.read_text() and "What the faults mean" not in out.read_text()   # no empty section
    assert layout_width(out) <= 1280
