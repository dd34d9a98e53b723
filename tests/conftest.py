"""Marks the tests listed in tests/slow_tests.txt ``slow``, so ``pytest -m "not slow"`` (the
fast subset in the README) leaves them out without editing each test module."""

from __future__ import annotations

from pathlib import Path

import pytest

SLOW_LIST = Path(__file__).with_name("slow_tests.txt")


def slow_ids() -> set[str]:
    """Node ids of the list: one a line, after the measured seconds; '#' starts a comment."""
    ids = set()
    for line in SLOW_LIST.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        seconds, _, nodeid = line.partition("  ")
        if line:
            ids.add(nodeid.strip() if seconds.strip().endswith("s") and nodeid else line)
    return ids


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    slow = slow_ids()
    for item in items:
        if item.nodeid in slow:
            item.add_marker(pytest.mark.slow)
