"""A step's reduces are added in rank order, so the direct exchanges leave every rank with
the same bits (executor.schedule.fold_in_rank_order; docs/executor.md "Identical bits")."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import numpy as np
import pytest
from syncplan.core.document import PlanDocument
from syncplan.core.program import Program as PlannerProgram
from syncplan.core.program import Transfer, program_to_doc
from syncplan.executor.schedule import build_schedule
from syncplan.planner.algorithms.direct import one_step_program, two_level_program, two_step_program

# Programs whose result at every rank is the left fold x0 + x1 + ... of the inputs.
FOLDS = ("direct", "ragged", "direct-2step")


def doc(name: str, prog: PlannerProgram, n: int) -> dict[str, Any]:
    return {
        "plan_id": f"test-{name}-{n}",
        "algorithm": name,
        "collective": "allreduce",
        "ranks": [f"h{i}/cpu0" for i in range(n)],
        "size_bytes": 0,
        "program": program_to_doc(prog),
    }


def ragged(n: int, units: int = 60) -> PlannerProgram:
    """One step: every rank sends its whole buffer to every other, cut at points that
    differ per source, so ranges from different sources overlap only partly."""
    step = []
    for i in range(n):
        cuts = sorted({0, units, *range(5 + 3 * i, units, 7 + 4 * i)})
        step += [Transfer(i, j, a, b, True) for j in range(n) if j != i for a, b in pairwise(cuts)]
    return PlannerProgram(units, [step])


def gappy() -> PlannerProgram:
    """4 ranks: ranks 0 and 1 add two separate pieces into rank 3 (a gap between them),
    rank 2 the first; the rest follows a step later, then rank 3 sends the sum back."""
    step0 = [Transfer(i, 3, a, b, True) for i in (0, 1) for a, b in ((0, 1), (2, 3))]
    step1 = [Transfer(i, 3, a, b, True) for i in (0, 1) for a, b in ((1, 2), (3, 4))]
    return PlannerProgram(
        4,
        [
            [*step0, Transfer(2, 3, 0, 1, True)],
            [*step1, Transfer(2, 3, 1, 4, True)],
            [Transfer(3, j, 0, 4, False) for j in range(3)],
        ],
    )


def programs(n: int) -> dict[str, dict[str, Any]]:
    groups = [list(range(k, min(k + 2, n))) for k in range(0, n, 2)]
    heads = [g[-1] for g in groups]  # leaders not the hosts' first ranks
    return {
        name: doc(name, prog, n)
        for name, prog in (
            ("direct", PlannerProgram(1, [one_step_program(list(range(n)))])),
            ("ragged", ragged(n)),
            ("direct-2level", two_level_program(groups, heads)),
            ("direct-2step", two_step_program(n, 1 << 20)),
            *((("gappy", gappy()),) if n == 4 else ()),
        )
    }


def simulate(
    program: PlanDocument,
    xs: list[np.ndarray],
    *,
    canonical: bool = True,
    segment: int | None = None,
    pieces: int = 1,
) -> list[np.ndarray]:
    """Run every rank's schedule in lockstep on float32 arrays: receives read the start of
    the step, then each rank runs its applies in receive order (as both engines do)."""
    n, numel = program.nranks, len(xs[0])
    scheds = [
        build_schedule(
            program, r, numel, segment=segment, canonical=canonical, pieces=pieces, piece_min=2
        )
        for r in range(n)
    ]
    bufs = [x.copy() for x in xs]
    for s in range(len(program.steps)):
        start = [b.copy() for b in bufs]
        for r in range(n):
            for st in (st for st in scheds[r].steps if st.index == s):
                staging = np.full(scheds[r].staging_numel, np.nan, np.float32)
                for m in st.recvs:
                    val = start[m.peer][m.start : m.stop]
                    if m.staged is None:
                        bufs[r][m.start : m.stop] = val
                    else:
                        staging[m.staged : m.staged + m.stop - m.start] = val
                for m in st.recvs:
                    for a in m.applies:
                        k = a.stop - a.start
                        src = staging[a.staged : a.staged + k]
                        if a.target is not None:
                            staging[a.target : a.target + k] += src
                        elif a.reduce:
                            bufs[r][a.start : a.stop] += src
                        else:
                            bufs[r][a.start : a.stop] = src
    return bufs


def mixed(n: int, numel: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [
        (rng.standard_normal(numel) * rng.choice([1e8, 1.0, 1e-3], numel)).astype(np.float32)
        for _ in range(n)
    ]


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.array_equal(a.view(np.int32), b.view(np.int32)))


@pytest.mark.parametrize("n", [3, 4, 5, 7])
@pytest.mark.parametrize("segment", [None, 3, 64])
def test_every_rank_ends_with_the_rank_order_fold(n: int, segment: int | None) -> None:
    for name, d in programs(n).items():
        prog = PlanDocument.from_plan(d)
        for numel in (1, 7, 1001):
            xs = mixed(n, numel, seed=n * 100 + numel)
            fold = xs[0].copy()
            for x in xs[1:]:
                fold += x
            out = simulate(prog, xs, segment=segment)
            where = f"{name} n={n} numel={numel} segment={segment}"
            assert all(same_bits(o, out[0]) for o in out), f"{where}: ranks differ"
            assert np.allclose(
                out[0].astype(np.float64),
                sum(x.astype(np.float64) for x in xs),
                rtol=0,
                atol=n * 1.2e-7 * sum(np.abs(x) for x in xs).max(),
            )
            if name in FOLDS:
                assert same_bits(out[0], fold), f"{where}: not the rank-order fold"


@pytest.mark.parametrize("n", [3, 5])
def test_split_messages_keep_the_rank_order_fold(n: int) -> None:
    """Messages cut into pieces (ExecutorConfig.split_pieces) add in the same order."""
    for name, d in programs(n).items():
        prog = PlanDocument.from_plan(d)
        xs = mixed(n, 1001, seed=n)
        whole = simulate(prog, xs)
        out = simulate(prog, xs, pieces=3)
        assert all(same_bits(o, whole[0]) for o in out), name


def test_the_planners_programs_on_eight_ranks_end_identical() -> None:
    from tests.executor.conftest import real_plans

    for d in real_plans(8, 1 << 20):
        prog = PlanDocument.from_plan(d)
        for segment in (None, 5):
            out = simulate(prog, mixed(8, 1001, seed=8), segment=segment)
            assert all(same_bits(o, out[0]) for o in out), d["algorithm"]


def test_arrival_order_sums_differ_so_the_test_can_fail() -> None:
    prog = PlanDocument.from_plan(programs(4)["direct"])
    xs = mixed(4, 1001, seed=1)
    out = simulate(prog, xs, canonical=False)
    assert not all(same_bits(o, out[0]) for o in out)


def test_only_steps_with_two_lower_sources_change() -> None:
    """A ring step (one reduce per rank) and rank 1 of a direct exchange (own + x0 is
    x0 + own) keep their applies; rank 3 adds x1 and x2 into x0's staging first."""
    ring = PlanDocument.from_plan(programs(4)["direct"])
    s1 = build_schedule(ring, 1, 100)
    assert s1 == build_schedule(ring, 1, 100, canonical=False)
    s3 = build_schedule(ring, 3, 100).steps[0].recvs
    assert [(a.staged, a.target) for r in s3 for a in r.applies] == [(100, 0), (200, 0), (0, None)]


@pytest.mark.slow
@pytest.mark.parametrize("nranks", [3, 5])
def test_gloo_ranks_end_with_identical_bits(nranks: int) -> None:
    """Real gloo processes, mixed-magnitude float32 data: the data-flow path (staged or
    not, segmented or not) and the step path (NCCL's) leave identical bits."""
    pytest.importorskip("torch")
    from syncplan.executor.localrun import LocalRunConfig, run_local

    from tests.executor.workers import bits_cases

    settings: list[dict[str, Any] | None] = [
        None,
        {"segment_bytes": 400},
        {"schedule": "steps"},
        {"eager_recv_factor": 0},
        {"split_pieces": 3, "split_min_bytes": 4},
    ]
    cases = [
        (d, numel, cfg)
        for d in programs(nranks).values()
        for numel in (7, 10_001)
        for cfg in settings
    ]
    results = run_local(bits_cases, (cases,), LocalRunConfig(nranks, timeout_s=150))
    assert len(results) == nranks
    for rank, per_rank in enumerate(results):
        assert len(per_rank) == len(cases)
        for res, (d, _, _) in zip(per_rank, cases, strict=True):
            where = f"rank {rank} {res['case']}"
            assert res["identical"], f"{where}: ranks hold different bits"
            assert res["within_tol"], where
            if d["algorithm"] in FOLDS:
                assert res["fold"], f"{where}: not the rank-order fold"


@pytest.mark.slow
def test_the_sparse_executor_adds_in_rank_order_too() -> None:
    """The block-sparse path (executor.sparse) on 4 gloo processes: blocks that two or more
    lower ranks send are summed in rank order too, on the data-flow and the step path."""
    pytest.importorskip("torch")
    from syncplan.executor.localrun import LocalRunConfig, run_local

    from tests.executor.workers import sparse_bits_cases

    cases = [
        (d, numel, cfg)
        for d in programs(4).values()
        for numel in (9, 4001)
        for cfg in (None, {"schedule": "steps"}, {"segment_bytes": 64})
    ]
    results = run_local(sparse_bits_cases, (cases,), LocalRunConfig(4, timeout_s=150))
    for rank, per_rank in enumerate(results):
        assert len(per_rank) == len(cases)
        for res, (d, _, _) in zip(per_rank, cases, strict=True):
            where = f"rank {rank} {res['case']}"
            assert res["mode"] == "sparse", where
            assert res["identical"], f"{where}: ranks hold different bits"
            if d["algorithm"] in FOLDS:
                assert res["fold"], f"{where}: not the rank-order fold"


def simulate_sparse(
    program: PlanDocument, xs: list[np.ndarray], block: int, segment: int | None = None
) -> list[np.ndarray]:
    """What executor.sparse does with executor.blockflow's lists, in lockstep on float32
    blocks: each message carries the sender's start-of-step non-zero blocks, packed."""
    from syncplan.executor.blockflow import block_flow
    from syncplan.executor.dataflow import dataflow

    n = program.nranks
    bufs = [x.reshape(-1, block).copy() for x in xs]
    nblocks = bufs[0].shape[0]
    bits = np.array([b.any(axis=1) for b in bufs])
    scheds = [
        build_schedule(program, r, nblocks, segment=segment, stage_all=True, canonical=False)
        for r in range(n)
    ]
    flows = [dataflow(s) for s in scheds]
    bfs = [block_flow(program, r, bits, flows[r], scheds[r]) for r in range(n)]
    whole = [np.zeros((sum(len(b) for b in bf.recv_blocks), block), np.float32) for bf in bfs]
    offs = [np.cumsum([0] + [len(b) for b in bf.recv_blocks]) for bf in bfs]
    for s in range(len(program.steps)):
        start = [b.copy() for b in bufs]
        for r in range(n):
            js = [
                j
                for j, st in enumerate(st.index for st in scheds[r].steps for _ in st.recvs)
                if st == s
            ]
            for j in js:  # payloads: the sender's start-of-step rows
                whole[r][offs[r][j] : offs[r][j + 1]] = start[flows[r].recvs[j][0]][
                    bfs[r].recv_blocks[j]
                ]
            for j in js:
                rows = whole[r][offs[r][j] : offs[r][j + 1]]
                fold = bfs[r].recv_folds[j] if bfs[r].recv_folds else None
                if fold is not None:
                    for src, dst in zip(fold.acc_src, fold.acc_dst, strict=True):
                        whole[r][dst] += whole[r][src]
                for p in bfs[r].recv_parts[j]:
                    got = rows[p.lo : p.hi] if p.rows is None else rows[p.rows]
                    if p.reduce:
                        bufs[r][p.blocks] += got
                    else:
                        bufs[r][p.blocks] = got
                    bufs[r][p.zero] = 0
                if fold is not None:
                    for blk, row in zip(fold.fin_blocks, fold.fin_rows, strict=True):
                        bufs[r][blk] += whole[r][row]
    return [b.reshape(-1) for b in bufs]


@pytest.mark.parametrize("n", [3, 4, 5])
def test_the_sparse_lists_fold_in_rank_order(n: int) -> None:
    """syncplan.executor.blockflow's parts and folds, replayed: identical bits, and the dense
    rank-order fold, with about half of each rank's blocks zero."""
    rng = np.random.default_rng(n)
    block, nblocks = 4, 60
    for name, d in programs(n).items():
        prog = PlanDocument.from_plan(d)
        for segment in (None, 7):
            xs = mixed(n, block * nblocks, seed=n + 7)
            for x in xs:
                x.reshape(-1, block)[rng.random(nblocks) < 0.5] = 0
            fold = xs[0].copy()
            for x in xs[1:]:
                fold += x
            out = simulate_sparse(prog, xs, block, segment)
            where = f"{name} n={n} segment={segment}"
            assert all(same_bits(o + 0, out[0] + 0) for o in out), f"{where}: ranks differ"
            if name in FOLDS:
                assert same_bits(out[0] + 0, fold + 0), f"{where}: not the rank-order fold"
