"""Marks the tests listed in tests/slow_tests.txt ``slow``, so ``pytest -m "not slow"`` (the
fast subset in the README) leaves them out without editing each test module; and marks
``heavy`` the slow cases of the exhaustive example x algorithm sweeps (HEAVY_SWEEPS), which
the default run leaves out (``addopts`` in pyproject.toml) and ``pytest -m heavy`` runs."""

from __future__ import annotations

from pathlib import Path

import pytest

SLOW_LIST = Path(__file__).with_name("slow_tests.txt")
# Every example x every algorithm: their fast cases (small examples) stay in every run; the
# rest (128-rank and family examples, ~700 cases, an hour on 2 cores) run with -m heavy.
HEAVY_SWEEPS = (
    "tests/planner/test_algorithms.py::test_every_algorithm_on_every_example",
    "tests/export/test_msccl.py::test_every_example_and_algorithm",
)
# The per-example sweeps of auto against every algorithm, of the bound's bandwidth term and
# of the fill bound against every family program: their slowest cases (5 s and more on 2
# cores) run with -m heavy too; every family keeps a case in the default run. Saves ~6 min.
_AUTO = "tests/planner/test_algorithms.py::test_auto_is_never_slower_than_the_best_named"
_TERM = "tests/planner/test_bound.py::test_the_bandwidth_term_is_the_familys_fluid_optimum"
_FILL = "tests/planner/test_bound_fill.py::test_every_program_of_the_family_is_above_it"
HEAVY_CASES = (
    {
        f"{_AUTO}[{e}]"
        for e in (
            "cube-mesh-dgx1v-degraded",
            "degraded-rail",
            "dgx-16x8-rail",
            "dgx-16x8-1nic",
            "dgx-4x8-rail",
            "directed-ring-4x2-slow",
            "host-ring-4x2-slow",
            "mesh-4x4-degraded",
            "torus-2x4x2gpu",
            "two-tier-oversubscribed",
            "fat-tree3",
            "torus-3x3-degraded",
            "xgmi-full-mesh-8-slow-pair",
            "mixed-100-25",
            "random-two-switch-1",
        )
    }
    | {
        f"{_TERM}[{e}]"
        for e in (
            "degraded-rail",
            "dgx-4x8-rail",
            "torus-2x4x2gpu",
            "one-slow-nic",
            "demo",
            "cube-mesh-dgx1v-degraded",
            "mesh-4x4-degraded",
            "mixed-100-25",
            "host-ring-4x2-slow",
            "fat-tree3-slow-host",
        )
    }
    | {
        f"{_FILL}[{e}]"
        for e in (
            "4096-degraded-rail",
            "1048576-degraded-rail",
            "1048576-dgx-4x8-rail",
            "268435456-dgx-4x8-rail",
        )
    }
)


def slow_ids() -> set[str]:
    """Node ids (or module paths) of the list: one a line, after the measured seconds; '#'
    starts a comment."""
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
        if item.nodeid in slow or item.nodeid.split("::", 1)[0] in slow:  # a test or a module
            item.add_marker(pytest.mark.slow)
        if (
            item.nodeid.startswith(HEAVY_SWEEPS) and item.get_closest_marker("slow")
        ) or item.nodeid in HEAVY_CASES:
            item.add_marker(pytest.mark.heavy)
