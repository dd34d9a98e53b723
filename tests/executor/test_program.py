"""Plan parsing, the all-reduce self-check and the per-rank schedule (no processes)."""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest
from syncplan.core.document import PlanDocument, PlanError
from syncplan.executor.schedule import build_schedule, element_bounds

from tests.executor.plans import butterfly_plan, crossing_plan, ring_plan


def _program(doc: dict[str, Any]) -> PlanDocument:
    p = PlanDocument.from_plan(doc)
    p.check_allreduce()
    return p


@pytest.mark.parametrize(
    "doc", [ring_plan(2), ring_plan(5, 4096), ring_plan(8, 9), butterfly_plan(4), crossing_plan()]
)
def test_correct_programs_pass(doc: dict[str, Any]) -> None:
    p = _program(doc)
    assert p.nranks == len(doc["ranks"])
    assert p.plan_id == doc["plan_id"]


def test_a_plan_with_a_route_table_runs_the_same_program() -> None:
    from syncplan.core.program import program_from_doc, program_to_doc
    from syncplan.planner.builders import dgx_cluster
    from syncplan.planner.plan import make_plan
    from syncplan.planner.topology import Topology

    topo = Topology.from_dict(dgx_cluster(2, gpus=2))
    doc = make_plan(topo, topo.endpoints(), 1 << 20, "forest")
    tabled = {**doc, "program": program_to_doc(program_from_doc(doc["program"]), route_table=True)}
    assert "routes" in tabled["program"]
    assert _program(tabled).steps == _program(doc).steps


def _broken(mutate: Any) -> dict[str, Any]:
    doc = copy.deepcopy(ring_plan(4, 8))
    mutate(doc)
    return doc


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.pop("program"), "program is missing"),
        (lambda d: d.update(collective="alltoall"), "'alltoall' is not supported"),
        (lambda d: d.update(ranks=["a", "a", "b", "c"]), "must be distinct"),
        (lambda d: d["program"].update(units=0), "units must be a positive integer"),
        (lambda d: d["program"]["steps"][0][0].update(src=4), "src must be a rank index"),
        (lambda d: d["program"]["steps"][0][0].update(dst=True), "dst must be a rank index"),
        (lambda d: d["program"]["steps"][0][0].update(dst=0), "src and dst are both rank 0"),
        (lambda d: d["program"]["steps"][1][2].update(chunk=[3, 3]), "steps[1][2].chunk"),
        (lambda d: d["program"]["steps"][1][2].update(chunk=[0, 9]), "b <= 8"),
        (lambda d: d["program"]["steps"][0][0].update(reduce="yes"), "reduce must be true"),
        (lambda d: d["program"]["steps"].append("x"), "steps[6] must be a list"),
    ],
)
def test_malformed_plans_are_named(mutate: Any, message: str) -> None:
    with pytest.raises(PlanError, match=message.replace("[", r"\[").replace("(", r"\(")):
        PlanDocument.from_plan(_broken(mutate))


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["program"]["steps"].pop(), "lack the inputs"),
        (lambda d: d["program"]["steps"][0][0].update(reduce=False), "lack the inputs"),
        # The same reduce-scatter step twice counts inputs twice.
        (lambda d: d["program"]["steps"].insert(1, d["program"]["steps"][0]), "counts some rank"),
        # Rank 1 gets a replacing value and an added one for the same units in one step.
        (
            lambda d: d["program"]["steps"][0].append(
                {"src": 2, "dst": 1, "chunk": [0, 2], "reduce": False}
            ),
            "replacing value",
        ),
    ],
)
def test_incorrect_programs_are_refused(mutate: Any, message: str) -> None:
    p = PlanDocument.from_plan(_broken(mutate))
    with pytest.raises(PlanError, match=message):
        p.check_allreduce()


def test_many_ranks_self_check() -> None:
    _program(ring_plan(80, 160))  # more ranks than a 64-bit mask holds
    doc = ring_plan(80, 160)
    doc["program"]["steps"].pop()
    with pytest.raises(PlanError, match="lack the inputs"):
        _program(doc)


def test_digest_tracks_the_program() -> None:
    a, b = ring_plan(4, 8), ring_plan(4, 8)
    assert PlanDocument.from_plan(a).digest == PlanDocument.from_plan(b).digest
    b["program"]["steps"][0][0]["chunk"] = [0, 1]
    assert PlanDocument.from_plan(a).digest != PlanDocument.from_plan(b).digest


@pytest.mark.parametrize(("units", "numel"), [(4096, 1_000_003), (7, 3), (5, 5), (3, 0)])
def test_element_bounds_cover_the_buffer(units: int, numel: int) -> None:
    b = element_bounds(units, numel)
    assert b[0] == 0 and b[-1] == numel and len(b) == units + 1
    assert all(x <= y for x, y in itertools.pairwise(b))
    assert max(y - x for x, y in itertools.pairwise(b)) <= -(-numel // units)


@pytest.mark.parametrize("numel", [1_000_003, 4095, 5])
@pytest.mark.parametrize("segment", [None, 1000])
def test_senders_and_receivers_agree(numel: int, segment: int | None) -> None:
    """Every message one rank sends is received, same size and order, by its peer."""
    for doc in (ring_plan(4, 4096), butterfly_plan(8), crossing_plan()):
        p = _program(doc)
        scheds = [build_schedule(p, r, numel, segment=segment) for r in range(p.nranks)]
        for s in range(len(p.steps)):
            sent = [
                (r, m.peer, m.stop - m.start)
                for sc in scheds
                for st in sc.steps
                if st.index == s
                for m in st.sends
                for r in [sc.rank]
            ]
            got = [
                (m.peer, r, m.stop - m.start)
                for sc in scheds
                for st in sc.steps
                if st.index == s
                for m in st.recvs
                for r in [sc.rank]
            ]
            # Same messages, and between each pair in the same order.
            assert sorted(sent) == sorted(got)
            for x, y in {(a, b) for a, b, _ in sent}:
                assert [n for a, b, n in sent if (a, b) == (x, y)] == [
                    n for a, b, n in got if (a, b) == (x, y)
                ]
            assert all(size > 0 for *_, size in sent)


def test_crossing_values_are_staged_and_adjacent_chunks_coalesced() -> None:
    p = _program(crossing_plan())
    r1 = build_schedule(p, 1, 11)
    step0 = r1.steps[0]
    # Rank 1 sends units 0..1 in step 0 while rank 0's value replaces them: staged.
    assert step0.recvs[0].staged is not None
    assert [(a.start, a.stop, a.reduce) for a in step0.recvs[0].applies] == [(0, 11, False)]
    # Step 2: two adjacent one-unit chunks from rank 0 arrive as one message, staged since
    # it may be posted while step 1 still sends from those elements.
    last = r1.steps[-1]
    assert len(last.recvs) == 1 and last.recvs[0].staged is not None
    assert (last.recvs[0].start, last.recvs[0].stop) == (0, 11)
    assert [(a.start, a.stop, a.reduce) for a in last.recvs[0].applies] == [(0, 11, False)]
    r0 = build_schedule(p, 0, 11)
    assert len(r0.steps[-1].sends) == 3
    assert r0.staging_numel == 22  # two reductions into the same units in step 1


def test_ring_schedule_shape() -> None:
    p = _program(ring_plan(4, 4096))
    s = build_schedule(p, 2, 1_000_003)
    assert len(s.steps) == 6 and s.messages == 12
    # Reduce-scatter receives are staged and added; all-gather receives land in place.
    assert all(st.recvs[0].staged is not None for st in s.steps[:3])
    assert all(st.recvs[0].staged is None and not st.recvs[0].applies for st in s.steps[3:])
    assert s.staging_numel == max(st.recvs[0].stop - st.recvs[0].start for st in s.steps[:3])


def test_idle_steps_are_skipped() -> None:
    p = _program(crossing_plan())
    assert [st.index for st in build_schedule(p, 3, 11).steps] == [1, 2]
    with pytest.raises(ValueError, match="outside"):
        build_schedule(p, 4, 11)


def test_long_messages_are_cut_into_segments() -> None:
    p = _program(ring_plan(4, 4096))
    whole = build_schedule(p, 1, 1_000_003)
    cut = build_schedule(p, 1, 1_000_003, segment=100_000)
    for a, b in zip(whole.steps, cut.steps, strict=True):
        assert len(b.sends) == len(b.recvs) == 3  # 250,000 elements in 3 segments
        assert (b.sends[0].start, b.sends[-1].stop) == (a.sends[0].start, a.sends[0].stop)
        assert all(m.stop - m.start <= 100_000 for m in b.sends + b.recvs)
        for r in b.recvs:
            if r.staged is not None:  # each segment applies exactly its own elements
                assert [(x.start, x.stop) for x in r.applies] == [(r.start, r.stop)]
    assert cut.staging_numel == whole.staging_numel
    with pytest.raises(ValueError, match="segment"):
        build_schedule(p, 1, 10, segment=0)


def test_messages_of_enough_elements_are_split_into_pieces() -> None:
    """pieces=2: a message of at least 2 x piece_min elements goes as two halves, so the
    receiver forwards the first while the second arrives; shorter ones stay whole."""
    p = _program(ring_plan(4, 4096))
    whole = build_schedule(p, 1, 1_000_000)  # 250,000-element messages
    split = build_schedule(p, 1, 1_000_000, pieces=2, piece_min=100_000)
    for a, b in zip(whole.steps, split.steps, strict=True):
        assert [m.stop - m.start for m in b.sends] == [125_000, 125_000]
        assert (b.sends[0].start, b.sends[-1].stop) == (a.sends[0].start, a.sends[0].stop)
        assert len(b.recvs) == 2
    assert build_schedule(p, 1, 1_000_000, pieces=2, piece_min=125_001) == whole
    # segment still caps every piece; pieces only ever cut further
    both = build_schedule(p, 1, 1_000_000, segment=100_000, pieces=2, piece_min=10)
    assert both == build_schedule(p, 1, 1_000_000, segment=100_000)
    three = build_schedule(p, 1, 1_000_000, segment=100_000, pieces=4, piece_min=10)
    assert all(len(st.sends) == 4 for st in three.steps)
    # every rank derives the same messages from each peer as that peer sends it
    scheds = [build_schedule(p, r, 1_000_000, pieces=3, piece_min=7) for r in range(4)]
    for r, sched in enumerate(scheds):
        for st in sched.steps:
            for m in st.recvs:
                peer = next(x for x in scheds[m.peer].steps if x.index == st.index)
                assert any(
                    (s.start, s.stop) == (m.start, m.stop) and s.peer == r for s in peer.sends
                )
    with pytest.raises(ValueError, match="pieces"):
        build_schedule(p, 1, 10, pieces=0)


def _check_flow(sched: Any, lookahead: int | None = None) -> None:
    """Every send reads its step's start value; writes land in step order."""
    from syncplan.executor.dataflow import (
        APPLY,
        POST_RECV,
        POST_SEND,
        WAIT_RECV,
        WAIT_SEND,
        dataflow,
    )

    flow = dataflow(sched, lookahead)
    send_step = [k for k, st in enumerate(sched.steps) for _ in st.sends]
    recv_step = [k for k, st in enumerate(sched.steps) for _ in st.recvs]
    at: dict[tuple[int, int], int] = {}
    for t, (op, i) in enumerate(flow.instructions):
        assert (op, i) not in at, f"instruction {(op, i)} twice"
        at[op, i] = t
    reads = [
        (send_step[i], a, b, at[POST_SEND, i], at[WAIT_SEND, i])
        for i, (_, a, b, _) in enumerate(flow.sends)
    ]
    writes = []
    for j, (_, a, b, _) in enumerate(flow.recvs):
        assert at[POST_RECV, j] < at[WAIT_RECV, j]
        if flow.staged[j] is None:
            writes.append((recv_step[j], a, b, at[POST_RECV, j], at[WAIT_RECV, j]))
        else:
            assert at[WAIT_RECV, j] < at[APPLY, j]
            writes.append((recv_step[j], a, b, at[APPLY, j], at[APPLY, j]))
    for i in range(len(flow.sends)):
        assert at[POST_SEND, i] < at[WAIT_SEND, i]
    for ws, wa, wb, w0, w1 in writes:
        for rs, ra, rb, r0, r1 in reads:
            if wa < rb and ra < wb:
                assert (w1 < r0) if ws < rs else (r1 < w0), (ws, rs, wa, wb, ra, rb)
        for vs, va, vb, v0, _ in writes:
            if wa < vb and va < wb and ws < vs:
                assert w1 < v0


@pytest.mark.parametrize(
    ("stage_all", "lookahead"), [(False, None), (True, None), (False, 0), (True, 1), (True, 4)]
)
@pytest.mark.parametrize("segment", [None, 7, 1000])
def test_dataflow_orders_reads_and_writes_like_the_steps(
    segment: int | None, stage_all: bool, lookahead: int | None
) -> None:
    for doc in (ring_plan(4, 4096), ring_plan(3, 5), butterfly_plan(8), crossing_plan()):
        p = _program(doc)
        for r in range(p.nranks):
            _check_flow(
                build_schedule(p, r, 2_003, segment=segment, stage_all=stage_all), lookahead
            )


def test_stage_all_posts_every_receive_before_any_send() -> None:
    """With every receive staged, all receiver-ready notices go out first."""
    from syncplan.executor.dataflow import POST_RECV, POST_SEND, dataflow

    sched = build_schedule(_program(ring_plan(4, 4)), 1, 100, segment=10, stage_all=True)
    assert all(r.staged is not None for st in sched.steps for r in st.recvs)
    assert (
        sched.total_recv_numel == sum(r.stop - r.start for st in sched.steps for r in st.recvs) > 0
    )
    flow = dataflow(sched)
    code = flow.instructions
    recvs = [t for t, (op, _) in enumerate(code) if op == POST_RECV]
    assert len(recvs) == len(flow.recvs)
    assert max(recvs) < min(t for t, (op, _) in enumerate(code) if op == POST_SEND)


def test_lookahead_holds_sends_that_depend_on_nothing() -> None:
    """A rank whose sends read only its own input (a leaf that sends a piece per step and
    receives one per step) posts the send of step s only after the receives of the steps
    before s - lookahead; without a limit it posts them all at once."""
    from syncplan.executor.dataflow import POST_SEND, WAIT_RECV, dataflow

    steps = [
        [
            {"src": 1, "dst": 0, "chunk": [k, k + 1], "reduce": True},
            {"src": 0, "dst": 1, "chunk": [k - 1, k], "reduce": False},
        ]
        if k
        else [{"src": 1, "dst": 0, "chunk": [0, 1], "reduce": True}]
        for k in range(8)
    ]
    steps.append([{"src": 0, "dst": 1, "chunk": [7, 8], "reduce": False}])
    doc = {
        "plan_id": "leaf",
        "ranks": ["a", "b"],
        "size_bytes": 32,
        "program": {"units": 8, "steps": steps},
    }
    sched = build_schedule(_program(doc), 1, 8, stage_all=True)
    free = dataflow(sched).instructions
    assert free.index((POST_SEND, 7)) < free.index((WAIT_RECV, 0))
    paced = dataflow(sched, lookahead=2).instructions
    # the receive of step k has index k - 1: the send of step s waits for the receives of
    # steps < s - 2, the last of which is index s - 4, and for no later one
    for s in range(4, 8):
        assert paced.index((WAIT_RECV, s - 4)) < paced.index((POST_SEND, s))
        assert paced.index((POST_SEND, s)) < paced.index((WAIT_RECV, s - 3))
    _check_flow(sched, 2)


def test_dataflow_pipelines_a_ring() -> None:
    """A reduce-scatter segment is forwarded as soon as it is added, before the rest of
    its step arrived."""
    from syncplan.executor.dataflow import APPLY, POST_SEND, WAIT_RECV, dataflow

    flow = dataflow(build_schedule(_program(ring_plan(4, 4)), 0, 100, segment=10))
    code = flow.instructions
    first_apply = code.index((APPLY, 0))
    assert code[first_apply + 1] == (POST_SEND, 3)  # step 1's first segment goes out
    assert code.index((WAIT_RECV, 2)) > first_apply  # while step 0's last is pending
