"""Render the bundled sample's HTML report and screenshot it in headless Chromium (Debian's
`chromium` package) at 1280 px: docs/report-sample.png. Run from the repository root."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def screenshot(html: Path, png: Path, height: int = 1400) -> None:
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([chromium(), *FLAGS, f"--user-data-dir={profile}", f"--window-size=1280,{height}",
                        f"--screenshot={png}", html.resolve().as_uri()], check=True, capture_output=True, timeout=120)


def layout_width(html: Path) -> int:
    """The page's scroll width at a 1280 px window: more than 1280 means something overflows."""
    probe = html.with_name(html.stem + ".probe.html")
    probe.write_text(html.read_text().replace(
        "</body>", "<script>document.body.setAttribute('data-sw', document.documentElement.scrollWidth)"
                   "</script></body>"))
    with tempfile.TemporaryDirectory() as profile:
        dom = subprocess.run([chromium(), *FLAGS, f"--user-data-dir={profile}", "--window-size=1280,900",
                              "--dump-dom", probe.resolve().as_uri()], check=True, capture_output=True, text=True,
                             timeout=120).stdout
    import re
    return int(re.search(r'data-sw="(\d+)"', dom).group(1))


def main() -> None:
    if chromium() is None:
        sys.exit("chromium not found (Debian: apt-get install chromium)")
    with tempfile.TemporaryDirectory() as d:
        page = Path(d) / "report.html"
        subprocess.run([sys.executable, "-m", "faultkit.cli", "triage", "traces/sglang-tp2-mi300x", "-f", "html",
                        "-o", str(page)], check=True)
        screenshot(page, Path("docs/report-sample.png"))
        print(f"docs/report-sample.png written; page width at 1280 px: {layout_width(page)} px")


if __name__ == "__main__":
    main()
