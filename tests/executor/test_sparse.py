"""Block-sparse all-reduce (executor.sparse): equal to torch's dense all_reduce on 2-8 gloo
processes (bit for bit on integers), on planner plans and hand-made programs."""

from __future__ import annotations

import random

import numpy as np
import pytest
from syncplan.core.document import PlanDocument
from syncplan.executor.blockflow import block_flow
from syncplan.executor.dataflow import dataflow
from syncplan.executor.localrun import LocalRunConfig, run_local
from syncplan.executor.schedule import build_schedule

from tests.executor.conftest import plans_for
from tests.executor.plans import butterfly_plan, crossing_plan, ring_plan
from tests.executor.sparse_workers import SparseCase, check_sparse

ODD = 100_003  # not a multiple of the block size nor of any plan's units


def sparse_cases(nranks: int, seed: int) -> list[SparseCase]:
    rng = random.Random(seed)
    cases: list[SparseCase] = []
    for plan in plans_for(nranks):
        d = rng.choice([0.001, 0.01, 0.05, 0.2, 0.5])
        cases += [
            (plan, ODD, "float32", d, rng.random() < 0.5, {}),
            (plan, 20_011, "int64", rng.random(), rng.random() < 0.5, {"block_elems": 64}),
        ]
    ring = ring_plan(nranks, 4096)
    steps = {"schedule": "steps"}  # the path NCCL takes, here on gloo
    cases += [
        (ring, ODD, "int32", 0.0, False, {}),  # empty: no message at all
        (ring, ODD, "int32", 1.0, False, {}),  # full: every block travels
        (ring, 5, "float32", 1.0, False, {}),  # fewer elements than one block
        (ring, 1, "int64", 1.0, False, {"block_elems": 1}),
        (ring, 3001, "int64", 0.3, False, {"block_elems": 7, "segment_bytes": 560}),
        (ring_plan(nranks, 2 * nranks + 1), 50_001, "bfloat16", 0.1, False, steps),
        (ring, 50_001, "float16", 0.1, True, {"block_elems": 100}),
        (butterfly_plan(nranks), 10_001, "int64", 0.2, False, {"block_elems": 16}),
        (butterfly_plan(nranks), 10_001, "float64", 0.2, False, steps),
        (plans_for(nranks)[-1], 30_007, "int32", 0.05, False, steps),
        (ring, 65_536, "float32", 0.9, False, {"max_density": 0.5}),  # denser: dense plan
        (ring, 65_536, "int64", 0.9, False, {"max_density": 0.5}),  # plan refuses: torch
    ]
    if nranks == 4:
        cases += [
            (crossing_plan(), 10_001, "int64", 0.3, False, {"block_elems": 32}),
            (crossing_plan(), 10_001, "int64", 0.3, False, steps),
        ]
    return cases


@pytest.mark.slow
@pytest.mark.parametrize("nranks", [2, 4, 8])
def test_sparse_matches_dense_all_reduce(nranks: int) -> None:
    cases = sparse_cases(nranks, seed=nranks)
    results = run_local(check_sparse, (cases,), LocalRunConfig(nranks, timeout_s=240))
    algos = {c[0].get("algorithm") for c in cases}
    assert "ring" in algos
    modes = set()
    for rank, per_rank in enumerate(results):
        assert len(per_rank) == len(cases)
        for res in per_rank:
            where = f"rank {rank} {res['case']}"
            assert res["ok"], f"{where}: differs from torch's all_reduce"
            assert res["identical"], f"{where}: ranks hold different bits"
            assert res["repeatable"], f"{where}: a second run differs"
            modes.add(res["mode"])
    assert modes == {"sparse", "dense", "native"}
    by_case = {r["case"]: r for r in results[0]}
    empty = next(r for c, r in by_case.items() if "d=0.0 " in c)
    assert empty["traffic"] == 0.0 and empty["mode"] == "sparse"


def _flows(plan: dict, nblocks: int, bits: np.ndarray, segment: int | None) -> list:
    prog = PlanDocument.from_plan(plan)
    out = []
    for r in range(prog.nranks):
        sched = build_schedule(prog, r, nblocks, segment=segment, stage_all=True, canonical=False)
        flow = dataflow(sched, 4)
        out.append((flow, block_flow(prog, r, bits, flow, sched)))
    return out


@pytest.mark.parametrize(
    "plan",
    [ring_plan(4, 13), butterfly_plan(4), crossing_plan()],
    ids=["ring", "butterfly", "crossing"],
)
@pytest.mark.parametrize("segment", [None, 3])
def test_sender_and_receiver_derive_the_same_blocks(plan: dict, segment: int | None) -> None:
    """Every message's block list is the same on both ends (matched by peer and tag), so
    payload sizes agree without a header; and only blocks non-zero somewhere travel."""
    rng = np.random.default_rng(7)
    nblocks = 37
    bits = rng.random((4, nblocks)) < 0.3
    flows = _flows(plan, nblocks, bits, segment)
    for r, (flow, bf) in enumerate(flows):
        for i, (peer, _a, _b, tag) in enumerate(flow.sends):
            pflow, pbf = flows[peer]
            j = next(k for k, m in enumerate(pflow.recvs) if m[0] == r and m[3] == tag)
            assert np.array_equal(bf.send_blocks[i], pbf.recv_blocks[j])
            assert set(bf.send_blocks[i]) <= set(np.flatnonzero(bits.any(axis=0)))


def test_traffic_fraction_tracks_density() -> None:
    plan = ring_plan(4, 4096)
    nblocks = 4096
    zero = _flows(plan, nblocks, np.zeros((4, nblocks), bool), None)
    full = _flows(plan, nblocks, np.ones((4, nblocks), bool), None)
    assert zero[0][1].traffic_fraction == 0.0 and zero[0][1].moved == 0
    assert full[0][1].traffic_fraction == 1.0
    rng = np.random.default_rng(1)
    d = 0.05
    bits = rng.random((4, nblocks)) < d
    frac = _flows(plan, nblocks, bits, None)[0][1].traffic_fraction
    # ring on 4 ranks: reduce-scatter carries unions of 1, 2, 3 inputs, all-gather of 4
    expect = sum(1 - (1 - d) ** k for k in (1, 2, 3, 4, 4, 4)) / 6
    assert abs(frac - expect) < 0.02


def test_block_flow_refuses_mismatched_bitmaps() -> None:
    plan = ring_plan(4, 8)
    prog = PlanDocument.from_plan(plan)
    sched = build_schedule(prog, 0, 10, stage_all=True)
    with pytest.raises(ValueError, match="rows"):
        block_flow(prog, 0, np.zeros((3, 10), bool), dataflow(sched), sched)
    with pytest.raises(ValueError, match="blocks"):
        block_flow(prog, 0, np.zeros((4, 11), bool), dataflow(sched), sched)
