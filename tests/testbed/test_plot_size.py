"""The README's testbed figure stays readable at README width whatever the number of
scenarios and sizes (it was 3960 x 462 pixels)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"
SCENARIOS = ("homogeneous", "one-slow", "mixed", "two-racks")


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


@pytest.mark.slow
def test_speedup_figure_has_a_sane_aspect(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from syncplan.testbed.plots import plot_speedups

    results = [json.loads((RESULTS / f"testbed-{s}.json").read_text()) for s in SCENARIOS]
    out = plot_speedups(results, tmp_path / "testbed.png")
    width, height = png_size(out)
    assert width <= 1400 and width / height <= 2.0, (width, height)
    width, height = png_size(RESULTS / "testbed.png")  # the committed one, re-plotted
    assert width <= 1400 and width / height <= 2.0, (width, height)
