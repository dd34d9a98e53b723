"""planner.sparse: expected bytes of a block-sparse run, the sparse/dense choice, requests."""

from __future__ import annotations

import pytest
from syncplan.core.errors import RequestError
from syncplan.core.program import Program, Transfer
from syncplan.planner.builders import dgx_cluster
from syncplan.planner.cost import CostModel
from syncplan.planner.plan import make_plan
from syncplan.planner.routing import Router
from syncplan.planner.sparse import Density, break_even, sparse_time, transfer_weights
from syncplan.planner.topology import Topology
from syncplan.planner.verify import verify_plan

TOPO = Topology.from_dict(dgx_cluster(2, gpus=2))
RANKS = ["h0/gpu0", "h0/gpu1", "h1/gpu0", "h1/gpu1"]


def ring(n: int) -> Program:
    steps = []
    for phase, reduce in ((0, True), (1, False)):
        for s in range(n - 1):
            steps.append(
                [
                    Transfer(r, (r + 1) % n, (r - s + phase) % n, (r - s + phase) % n + 1, reduce)
                    for r in range(n)
                ]
            )
    return Program(n, steps)


def test_union_grows_along_the_ring() -> None:
    d = 0.1
    w = transfer_weights(ring(4), Density((d,) * 4))
    expect = [1 - (1 - d) ** k for k in (1, 2, 3, 4, 4, 4)]
    assert [round(float(x[0]), 12) for x in w] == [round(e, 12) for e in expect]
    over = transfer_weights(ring(4), Density((d,) * 4, overlap=True))
    assert all(abs(float(x) - d) < 1e-12 for step in over for x in step)
    mixed = transfer_weights(ring(4), Density((0.1, 0.0001, 0.0001, 0.0001), overlap=True))
    assert float(mixed[-1].max()) == pytest.approx(0.1)


def test_sparse_time_is_monotone_and_pays_the_index() -> None:
    cost = CostModel(Router(TOPO))
    prog, size = ring(4), 64 << 20
    dense = cost.program_time(RANKS, prog, size)
    times = [
        sparse_time(cost, RANKS, prog, size, Density((d,) * 4))
        for d in (0.001, 0.01, 0.1, 0.5, 1.0)
    ]
    assert times == sorted(times)
    assert times[-1] > dense  # every block plus the bitmaps
    assert times[1] < dense / 10
    be = break_even(cost, RANKS, prog, size, Density((0.5,) * 4), dense)
    assert 0.5 < be < 1.0
    assert sparse_time(cost, RANKS, prog, size, Density((be,) * 4)) <= dense


@pytest.mark.slow
def test_make_plan_picks_sparse_only_where_faster() -> None:
    sparse = make_plan(TOPO, RANKS, 64 << 20, density=0.01)
    assert sparse["sparse"]["mode"] == "sparse"
    assert verify_plan(sparse, TOPO).ok
    dense = make_plan(TOPO, RANKS, 64 << 20, density=1.0)
    assert dense["sparse"]["mode"] == "dense"
    assert dense["algorithm"] == make_plan(TOPO, RANKS, 64 << 20)["algorithm"]
    per_rank = make_plan(
        TOPO,
        RANKS,
        64 << 20,
        density=[0.5, 0.01, 0.01, 0.01],
        density_overlap=True,
        block_elems=1024,
    )
    assert per_rank["sparse"]["density"] == [0.5, 0.01, 0.01, 0.01]
    assert len({sparse["plan_id"], dense["plan_id"], per_rank["plan_id"]}) == 3


@pytest.mark.parametrize(
    "kw, field",
    [
        ({"density": 0}, "density"),
        ({"density": 1.01}, "density"),
        ({"density": float("nan")}, "density"),
        ({"density": True}, "density"),
        ({"density": [0.1]}, "density lists 1"),
        ({"density": 0.1, "block_elems": 0}, "block_elems"),
        ({"density": 0.1, "density_overlap": 1}, "density_overlap"),
    ],
)
def test_bad_sparse_requests_name_the_field(kw: dict, field: str) -> None:
    with pytest.raises(RequestError, match=field):
        make_plan(TOPO, RANKS, 1 << 20, **kw)
