"""A rank's data-flow order: the instructions that run its schedule (``syncplan.executor.schedule``)
with steps overlapping wherever the data allows, on gloo's point-to-point messages."""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass

from syncplan.executor.schedule import Apply, RankSchedule


def _last_recv_below(done_before: list[tuple[int, int]], limit: int) -> int:
    """The last receive of the steps whose program index is below ``limit`` (-1: none);
    ``done_before`` lists (step index, last receive before that step) in step order."""
    k = bisect.bisect_left(done_before, (limit, -2))
    return done_before[k][1] if k < len(done_before) else done_before[-1][1]


POST_SEND, POST_RECV, WAIT_SEND, WAIT_RECV, APPLY = range(5)


@dataclass(frozen=True, slots=True)
class Flow:
    """A rank's messages in program order and the instructions that run them.

    ``sends[i]`` / ``recvs[j]``: (peer, start, stop, tag). A staged receive lands in
    staging elements ``staged[j] ..`` and ``recv_applies[j]`` (offsets into the whole
    staging buffer) are applied by its APPLY instruction."""

    sends: tuple[tuple[int, int, int, int], ...]
    recvs: tuple[tuple[int, int, int, int], ...]
    staged: tuple[int | None, ...]
    recv_applies: tuple[tuple[Apply, ...], ...]
    instructions: tuple[tuple[int, int], ...]
    staging_numel: int


def dataflow(sched: RankSchedule, lookahead: int | None = None) -> Flow:
    """Order this rank's operations so that steps overlap wherever the data allows, which
    pipelines a ring segment by segment as native implementations do, while every transfer
    still carries the value its source held at the start of its step.

    ``lookahead`` (None: unlimited) paces sends: a send of program step ``s`` is also held
    until every receive of this rank from the steps before ``s - lookahead`` is done, so a
    rank whose sends depend on nothing (a tree's leaf) cannot flood its links with pieces
    the plan schedules much later, ahead of the pieces the others are waiting for.

    Every staged receive gets its own staging area and is posted at the start. Receives are
    waited for (and applied) in program order. A send is posted once every earlier step's
    write to its elements is done; a receive that lands in place is posted once earlier
    writes to its elements are done and the sends that read them before completed; a staged
    value is applied once the sends reading those elements (same step included) completed.
    Tags number the messages between each pair, so matching never depends on posting order.
    """
    sends: list[tuple[int, int, int, int]] = []
    recvs: list[tuple[int, int, int, int]] = []
    staged: list[int | None] = []
    applies: list[tuple[Apply, ...]] = []
    tags: dict[tuple[str, int], int] = defaultdict(int)
    by_step: list[tuple[list[int], list[int]]] = []
    offset = 0
    for step in sched.steps:
        si, ri = [], []
        for m in step.sends:
            si.append(len(sends))
            sends.append((m.peer, m.start, m.stop, tags["s", m.peer]))
            tags["s", m.peer] += 1
        for r in step.recvs:
            ri.append(len(recvs))
            recvs.append((r.peer, r.start, r.stop, tags["r", r.peer]))
            tags["r", r.peer] += 1
            if r.staged is None:
                staged.append(None)
                applies.append(())
            else:
                shift = offset - r.staged
                staged.append(offset)
                applies.append(tuple(a.shifted(shift) for a in r.applies))
                offset += r.stop - r.start
        by_step.append((si, ri))

    # Elementary pieces between all message boundaries; per piece, the last receive that
    # wrote it and the sends that read it since.
    cuts = sorted({x for _, a, b, _ in sends + recvs for x in (a, b)})
    where = {x: k for k, x in enumerate(cuts)}
    last_writer = [-1] * max(len(cuts) - 1, 0)
    readers: list[list[int]] = [[] for _ in last_writer]

    def pieces(a: int, b: int) -> range:
        return range(where[a], where[b])

    send_trigger = [-1] * len(sends)  # post after this receive's WAIT_RECV (-1: at once)
    recv_trigger: dict[int, int] = {}  # receives landing in place
    recv_readers: list[list[int]] = [[] for _ in recvs]
    for si, ri in by_step:
        for i in si:  # reads of this step see the writes of earlier steps
            _, a, b, _ = sends[i]
            send_trigger[i] = max((last_writer[p] for p in pieces(a, b)), default=-1)
        for i in si:
            for p in pieces(sends[i][1], sends[i][2]):
                readers[p].append(i)
        for j in ri:
            _, a, b, _ = recvs[j]
            rd = sorted({i for p in pieces(a, b) for i in readers[p]})
            recv_readers[j] = rd
            if staged[j] is None:
                recv_trigger[j] = max(
                    [*(last_writer[p] for p in pieces(a, b)), *(send_trigger[i] for i in rd)],
                    default=-1,
                )
        for j in ri:
            for p in pieces(recvs[j][1], recvs[j][2]):
                last_writer[p] = j
                readers[p] = []

    # Post a receive that lands in place no earlier than one step ahead: posting it sooner
    # would only make this rank wait for its own earlier sends sooner.
    last_recv_before = []  # per step: index of the last receive of the steps before it
    seen = -1
    for _, ri in by_step:
        last_recv_before.append(seen)
        seen = ri[-1] if ri else seen
    step_of_send = {i: k for k, (si, _) in enumerate(by_step) for i in si}
    step_of_recv = {j: k for k, (_, ri) in enumerate(by_step) for j in ri}
    if lookahead is not None:
        if lookahead < 0:
            raise ValueError(f"lookahead must be >= 0, got {lookahead}")
        # (program step index, the last receive of the rank's steps before it)
        prog = [st.index for st in sched.steps]
        done_before = []
        seen = -1
        for k, (_, ri) in enumerate(by_step):
            done_before.append((prog[k], seen))
            seen = ri[-1] if ri else seen
        done_before.append((1 << 62, seen))
        for i in range(len(sends)):
            limit = prog[step_of_send[i]] - lookahead
            send_trigger[i] = max(send_trigger[i], _last_recv_below(done_before, limit))
        for j in recv_trigger:  # an in-place receive still follows the sends it waits for
            recv_trigger[j] = max([recv_trigger[j], *(send_trigger[i] for i in recv_readers[j])])
    triggered: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    for i, t in enumerate(send_trigger):
        triggered[t].append((step_of_send[i], 0, i))
    for j, t in recv_trigger.items():
        k = step_of_recv[j]
        t = max(t, last_recv_before[k - 1]) if k > 0 else t
        triggered[t].append((k, 1, j))

    code: list[tuple[int, int]] = [
        (POST_RECV, j) for j in range(len(recvs)) if staged[j] is not None
    ]
    waited: set[int] = set()

    def wait_sends(items: list[int]) -> None:
        for i in items:
            if i not in waited:
                waited.add(i)
                code.append((WAIT_SEND, i))

    def post(after: int) -> None:
        for _, kind, idx in sorted(triggered.get(after, ())):  # by step, sends first
            if kind == 0:
                code.append((POST_SEND, idx))
            else:
                wait_sends(recv_readers[idx])
                code.append((POST_RECV, idx))

    post(-1)
    for j in range(len(recvs)):
        code.append((WAIT_RECV, j))
        if staged[j] is not None:
            wait_sends(recv_readers[j])
            code.append((APPLY, j))
        post(j)
    wait_sends(list(range(len(sends))))
    return Flow(tuple(sends), tuple(recvs), tuple(staged), tuple(applies), tuple(code), offset)
