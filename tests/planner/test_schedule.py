"""Job schedules: buckets from the cost model, plans checked by the verifier."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from syncplan.core.errors import RequestError
from syncplan.core.options import PlanOptions
from syncplan.planner.comm_curves import CommCurves
from syncplan.planner.schedule import TensorSpec, make_schedule, partition, simulate
from syncplan.planner.topology import load_topology
from syncplan.planner.verify import verify_plan

from .conftest import EXAMPLES

FAST = ["ring", "hierarchical"]


def _job(m: int = 12, seed: int = 0) -> list[TensorSpec]:
    rng = np.random.default_rng(seed)
    sizes = rng.choice([64, 1024, 1 << 16, 1 << 20, 1 << 22], size=m)
    return [TensorSpec(int(n), "float32", 2e-4, 1e-3) for n in sizes]


@pytest.fixture(scope="module")
def topo():  # type: ignore[no-untyped-def]
    return load_topology(EXAMPLES / "one-slow-nic.json")


def test_every_plan_of_a_schedule_verifies_and_is_priced_exactly(topo) -> None:  # type: ignore[no-untyped-def]
    tensors = _job()
    sched = make_schedule(topo, topo.endpoints(), tensors, algorithms=FAST, anchors=3)
    assert set(sched["modes"]) == {"allreduce", "dear"}
    assert sched["solves"] <= 3 * len(FAST)
    for mode, d in sched["modes"].items():
        covered = [i for b in d["buckets"] for i in range(*b["tensors"])]
        assert covered == list(range(len(tensors)))  # contiguous, in backward order
        assert d["predicted_iteration_s"] <= d["predicted_iteration_no_overlap_s"] + 1e-12
        comm = 0.0
        for b in d["buckets"]:
            lo, hi = b["tensors"]
            assert b["size_bytes"] == sum(t.nbytes for t in tensors[lo:hi])
            kinds = {"allreduce"} if mode == "allreduce" else {"reducescatter", "allgather"}
            assert set(b["plans"]) == kinds
            for doc in b["plans"].values():
                rep = verify_plan(doc, topo)
                assert rep.ok, rep.error
                assert rep.simulated_time_s == pytest.approx(doc["predicted_time_s"], rel=1e-9)
                assert doc["size_bytes"] == b["size_bytes"]
                comm += doc["predicted_time_s"]
            if mode == "dear":  # a reduce-scatter and an all-gather of the same split
                assert b["plans"]["reducescatter"]["shards"] == b["plans"]["allgather"]["shards"]
        assert d["comm_s"] == pytest.approx(comm, rel=1e-9)


def test_dp_matches_brute_force_over_every_partition(topo) -> None:  # type: ignore[no-untyped-def]
    tensors = _job(7, seed=3)
    ranks = topo.endpoints()
    nbytes = np.array([t.nbytes for t in tensors], dtype=float)
    curves = CommCurves(
        topo, ranks, int(nbytes.min()), int(nbytes.sum()), anchors=2, algorithms=FAST
    )
    ready = np.cumsum([t.backward_s for t in tensors])
    groups = np.zeros(len(tensors), dtype=int)
    dp = partition(nbytes, ready, groups, curves, "allreduce")

    def chain_end(buckets: list[tuple[int, int]]) -> float:
        times = curves.time("allreduce", np.array([nbytes[a:b].sum() for a, b in buckets]))
        return simulate(tensors, buckets, "allreduce", list(times))["overlap_s"]

    best = min(
        chain_end([(a, b) for a, b in itertools.pairwise((0, *cuts, len(tensors)))])
        for k in range(len(tensors))
        for cuts in itertools.combinations(range(1, len(tensors)), k)
    )
    assert chain_end(dp) == pytest.approx(best, rel=1e-9)


def test_buckets_do_not_mix_dtypes_and_no_profile_means_few_buckets(topo) -> None:  # type: ignore[no-untyped-def]
    tensors = [TensorSpec(1 << 12, "float32")] * 3 + [TensorSpec(1 << 12, "float16")] * 3
    sched = make_schedule(
        topo,
        topo.endpoints(),
        tensors,
        algorithms=FAST,
        anchors=1,
        modes=["allreduce"],
        with_plans=False,
    )
    buckets = [b["tensors"] for b in sched["modes"]["allreduce"]["buckets"]]
    assert buckets == [[0, 3], [3, 6]]  # no compute to hide behind: fuse all per dtype
    assert sched["profile"] == "none"


def test_compute_profile_splits_buckets_to_overlap(topo) -> None:  # type: ignore[no-untyped-def]
    tensors = [TensorSpec(1 << 20, "float32", 1e-3, 20e-3) for _ in range(8)]
    sched = make_schedule(
        topo, topo.endpoints(), tensors, algorithms=FAST, anchors=2, with_plans=False
    )
    ar = sched["modes"]["allreduce"]
    assert len(ar["buckets"]) > 1
    assert ar["predicted_iteration_s"] < ar["predicted_iteration_no_overlap_s"]


@pytest.mark.parametrize(
    "bad, match",
    [
        ([], "at least one tensor"),
        ([TensorSpec(0)], r"tensors\[0\].numel"),
        ([TensorSpec(4, "int8")], r"tensors\[0\].dtype"),
        ([TensorSpec(4, "float32", -1.0)], r"tensors\[0\].forward_s"),
        ([TensorSpec(4, "float32", 0.0, float("nan"))], r"tensors\[0\].backward_s"),
    ],
)
def test_bad_tensors_are_named(topo, bad, match) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(RequestError, match=match):
        make_schedule(topo, topo.endpoints(), bad, algorithms=FAST)


@pytest.mark.slow
def test_schedule_with_forest_verifies(topo) -> None:  # type: ignore[no-untyped-def]
    sched = make_schedule(topo, topo.endpoints(), _job(6), anchors=2)
    for d in sched["modes"].values():
        for b in d["buckets"]:
            for doc in b["plans"].values():
                assert verify_plan(doc, topo).ok


def test_ties_go_to_the_ring_and_message_overhead_is_priced() -> None:
    """On a flat switch of equal hosts the direct exchange (hierarchical) and the ring price
    alike: the ring, with one message per rank and step, is chosen; a per-message overhead
    is in the schedule's times and in the plan documents, which record it for the
    verifier."""
    from syncplan.planner.builders import star
    from syncplan.planner.topology import Topology

    topo = Topology.from_dict(star([0.025] * 8, latency_us=1.0))
    ranks = topo.endpoints()
    tensors = [TensorSpec(1 << 18, "float32", 0.017, 0.034) for _ in range(8)]
    base = make_schedule(topo, ranks, tensors, algorithms=["hierarchical", "ring"], anchors=2)
    for d in base["modes"].values():
        assert {p["algorithm"] for b in d["buckets"] for p in b["plans"].values()} == {"ring"}
    ov = 1e-3
    sched = make_schedule(
        topo,
        ranks,
        tensors,
        algorithms=["ring"],
        anchors=2,
        options=PlanOptions(message_overhead_s=ov),
    )
    d = sched["modes"]["allreduce"]
    plans = [b["plans"]["allreduce"] for b in d["buckets"]]
    for doc in plans:
        assert doc["message_overhead_s"] == ov
        rep = verify_plan(
            doc, topo, options=PlanOptions(message_overhead_s=doc["message_overhead_s"])
        )
        assert rep.ok and rep.simulated_time_s == pytest.approx(doc["predicted_time_s"])
        bare = verify_plan(doc, topo).simulated_time_s
        # a ring all-reduce over 8 ranks: 14 steps, each rank sends one and receives one
        assert doc["predicted_time_s"] == pytest.approx(bare + 14 * 2 * ov)
    assert d["comm_s"] == pytest.approx(sum(doc["predicted_time_s"] for doc in plans))


def test_schedule_prices_shared_cores_like_the_cost_model() -> None:
    """With message_cores the schedule's plan documents record it and the verifier, given the
    documents' settings, reproduces their predicted times (a ring step: 16 message ends over
    8 ranks, so on one core each step pays 16 overheads, the wire overlapping all but 2)."""
    from syncplan.planner.builders import star
    from syncplan.planner.topology import Topology

    topo = Topology.from_dict(star([0.025] * 8, latency_us=1.0))
    ranks = topo.endpoints()
    tensors = [TensorSpec(1 << 18, "float32", 0.017, 0.034) for _ in range(4)]
    ov = 1e-4
    sched = make_schedule(
        topo,
        ranks,
        tensors,
        algorithms=["ring"],
        anchors=2,
        modes=("allreduce",),
        options=PlanOptions(message_overhead_s=ov, message_cores=1),
    )
    for bucket in sched["modes"]["allreduce"]["buckets"]:
        doc = bucket["plans"]["allreduce"]
        assert doc["message_cores"] == 1
        rep = verify_plan(doc, topo, options=PlanOptions(message_overhead_s=ov, message_cores=1))
        assert rep.ok and rep.simulated_time_s == pytest.approx(doc["predicted_time_s"])
        bare = verify_plan(doc, topo).simulated_time_s
        # 14 equal steps, each max(wire + 2 o, 16 o) (cost.overlapped)
        assert doc["predicted_time_s"] == pytest.approx(14 * max(bare / 14 + 2 * ov, 16 * ov))
