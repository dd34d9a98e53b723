"""gloo: the default ExecutorConfig cuts a long message into two pieces (split_pieces), so a
ring forwards the first half of a chunk while the second arrives (docs/executor.md)."""

from __future__ import annotations

import pytest
from syncplan.executor.engine import ExecutorConfig
from syncplan.executor.localrun import LocalRunConfig, run_local

from tests.executor.plans import ring_plan
from tests.executor.workers import split_case


def test_a_1_mib_ring_on_two_gloo_ranks_sends_each_chunk_in_two_pieces() -> None:
    # 2 ranks, 1 MiB of float32: one reduce-scatter and one all-gather message of 512 KiB
    # per rank, each at least 2 x 64 KiB, so 4 messages instead of 2
    results = run_local(split_case, (ring_plan(2), 1 << 18), LocalRunConfig(2, timeout_s=60))
    assert len(results) == 2
    for res in results:
        assert res["sends"] == 4
        assert res["within_tol"] and res["identical"] and res["changed"]


def test_split_settings_are_checked() -> None:
    assert ExecutorConfig(split_pieces=1).split_pieces == 1  # never split
    for bad in ({"split_pieces": 0}, {"split_min_bytes": 0}):
        with pytest.raises(ValueError, match="split"):
            ExecutorConfig(**bad)
