"""The progress line of ``syncplan plan``: on a terminal one line, redrawn, that fits the
terminal's width (a wider one wrapped into ~20 lines on 80 columns); elsewhere one line per
update, at most one every few seconds, and the final state at the end."""

from __future__ import annotations

import io
import logging

import pytest
from syncplan.planner.cli_output import Progress

PLAN_LOG = logging.getLogger("syncplan.planner.plan")
STAGES = logging.getLogger("syncplan.planner.algorithms.forest.effort")
NAMES = [f"algorithm-number-{i}" for i in range(30)]


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _price_all(clock: Clock | None = None, step: float = 0.0) -> None:
    for i, name in enumerate(NAMES):
        PLAN_LOG.debug("%s priced in %.3f s", name, 0.5 + i)
        if i == 10:
            STAGES.info("stage two of three: a long description of what the search does now")
        if clock is not None:
            clock.t += step


@pytest.mark.parametrize("columns", [80, 40])
def test_terminal_lines_fit_the_width(monkeypatch: pytest.MonkeyPatch, columns: int) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    err = FakeTTY()
    monkeypatch.setattr("sys.stderr", err)
    with Progress("256 ranks, 1 GiB", verbose=False, clock=Clock()):
        _price_all()
    text = err.getvalue()
    assert "\n" not in text
    frames = text.split("\r\x1b[K")
    assert len(frames) > len(NAMES)  # redrawn at each update
    assert all(len(f) < columns for f in frames), max(frames, key=len)
    assert any(f.startswith("planning 256 ranks, 1 GiB: ") for f in frames)
    assert text.endswith("\r\x1b[K")  # cleared at the end


def test_elsewhere_one_line_per_update_at_most_every_few_seconds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    clock = Clock()
    with Progress("256 ranks, 1 GiB", verbose=False, clock=clock):
        _price_all()  # all at one instant: one line, not thirty
        assert err.getvalue().count("\n") == 1
        _price_all(clock, step=1.0)  # 30 updates over 30 s: a line every few seconds
    lines = err.getvalue().splitlines()
    assert "\r" not in err.getvalue()
    assert 4 <= len(lines) <= 12, lines
    assert all(NAMES[-1] in lines[-1] and n in lines[-1] for n in NAMES)  # the final state
