"""The sparse path in training: DDP's hook on an embedding model, and the lossy coarse mode
(error feedback) reaching the dense loss."""

from __future__ import annotations

import pytest
import torch
from syncplan.executor.coarse import CoarseConfig, CoarseSparsifier
from syncplan.executor.localrun import LocalRunConfig, run_local

from tests.executor.plans import ring_plan
from tests.executor.sparse_train import coarse_convergence, ddp_embedding_run

COARSE_FRACTION = 0.1
# the coarse run's final loss may exceed the dense run's by this fraction of the start loss
LOSS_TOLERANCE = 0.01


@pytest.mark.slow
def test_ddp_sparse_hook_equals_plain_ddp() -> None:
    res = run_local(ddp_embedding_run, (ring_plan(4, 64),), LocalRunConfig(4, timeout_s=180))
    for r in res:
        assert r["max_diff"] < 1e-5, r
        assert r["sparse_calls"] > 0 and r["mode"] == "sparse", r
        assert r["density"] < 0.2, r


@pytest.mark.slow
def test_coarse_sparse_reaches_the_dense_loss() -> None:
    (res, *_) = run_local(
        coarse_convergence, (ring_plan(4, 64), COARSE_FRACTION), LocalRunConfig(4, timeout_s=180)
    )
    assert res["mode"] == "sparse"
    assert res["dense"] < 0.01 * res["start"]  # the problem is solved at all
    assert res["coarse"] <= res["dense"] + LOSS_TOLERANCE * res["start"], res


def test_coarse_keeps_top_blocks_and_feeds_back_the_rest() -> None:
    sp = CoarseSparsifier(CoarseConfig(0.25, block_elems=2))
    t = torch.tensor([0.1, 0.1, 5.0, 5.0, 0.2, 0.2, 0.0, 0.3, 9.0])  # 5 blocks, last short
    orig = t.clone()
    kept = sp.select(t, "k")
    assert torch.equal(t, torch.tensor([0, 0, 5.0, 5.0, 0, 0, 0, 0, 9.0]))  # ceil(1.25) = 2
    assert torch.equal(t + sp.residuals["k"], orig)
    assert 0.9 < kept < 1
    t2 = torch.zeros(9)
    sp.select(t2, "k")  # the residual comes back: its largest blocks now go
    assert t2[7] == pytest.approx(0.3) and t2[4] == pytest.approx(0.2)
    with pytest.raises(ValueError, match="fraction"):
        CoarseConfig(0.0)
