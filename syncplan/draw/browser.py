"""Screenshots of pages with a headless Chromium (Debian's ``chromium``), for the tests and
the README's picture of ``/ui``."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]


def find_browser() -> str | None:
    """The path of a Chromium-family browser, or None."""
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


def screenshot(
    url: str, out: Path, width: int = 1400, height: int = 1700, timeout: float = 90.0
) -> Path:
    """Load ``url`` in a fresh headless profile and write a PNG of the window to ``out``."""
    browser = find_browser()
    if browser is None:
        raise RuntimeError("no Chromium found (apt-get install chromium)")
    with tempfile.TemporaryDirectory(prefix="syncplan-chromium-") as profile:
        run = subprocess.run(
            [
                browser,
                *FLAGS,
                f"--user-data-dir={profile}",
                f"--window-size={width},{height}",
                f"--screenshot={out}",
                url,
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    if run.returncode != 0 or not out.exists():
        raise RuntimeError(f"{browser} failed ({run.returncode}): {run.stderr[-500:]}")
    return out


def shrink_png(src: Path, dst: Path, width: int = 1000, colors: int = 64) -> Path:
    """A smaller copy for the README: scaled to ``width`` pixels, palette of ``colors``."""
    from PIL import Image, ImageChops

    img = Image.open(src).convert("RGB")
    box = ImageChops.difference(img, Image.new("RGB", img.size, "white")).getbbox()
    if box:  # trim the white margin below and right of the content
        img = img.crop((0, 0, min(img.width, box[2] + 16), min(img.height, box[3] + 16)))
    if img.width > width:
        img = img.resize((width, round(img.height * width / img.width)), Image.LANCZOS)
    img.quantize(colors=colors, method=Image.Quantize.MEDIANCUT).save(dst, optimize=True)
    return dst
