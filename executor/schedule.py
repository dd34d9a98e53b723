"""Per-rank message schedule of a program for one element count; no torch needed.

Units map to elements by ``boundary(u) = u * numel // units``, so any element count works.
Transfers between the same pair in one step whose element ranges touch are coalesced into
one message, and a message longer than ``segment`` elements is cut into segments (a message
of at least ``pieces`` x ``piece_min`` elements into at least ``pieces``), so the receiver can
apply one segment while the next is still arriving. Sender and receiver derive the same
messages in the same order.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass

from executor.program import Program, Transfer


@dataclass(frozen=True, slots=True)
class Send:
    peer: int  # plan rank
    start: int  # element range of the local buffer
    stop: int


@dataclass(frozen=True, slots=True)
class Apply:
    """``buf[start:stop] (+)= staging[staged:staged + stop - start]``; with ``target`` set,
    ``staging[target:target + stop - start] += staging[staged:...]`` instead (a partial sum
    of the step's received values, see ``fold_in_rank_order``)."""

    start: int
    stop: int
    staged: int
    reduce: bool
    target: int | None = None

    def shifted(self, by: int) -> Apply:
        """The same apply with its staging offsets moved by ``by``."""
        return Apply(self.start, self.stop, self.staged + by, self.reduce,
                     None if self.target is None else self.target + by)


@dataclass(frozen=True, slots=True)
class Recv:
    """A message into ``[start, stop)``: in place (``staged`` is None), or into staging
    elements ``staged .. staged + stop - start`` followed by ``applies`` once it arrived."""

    peer: int
    start: int
    stop: int
    staged: int | None
    applies: tuple[Apply, ...] = ()


@dataclass(frozen=True, slots=True)
class RankStep:
    index: int  # step index in the program
    sends: tuple[Send, ...]
    recvs: tuple[Recv, ...]


@dataclass(frozen=True, slots=True)
class RankSchedule:
    """What one plan rank does; steps where it does nothing are left out."""

    rank: int
    numel: int
    steps: tuple[RankStep, ...]
    staging_numel: int  # largest staging area any one step needs

    @property
    def messages(self) -> int:
        return sum(len(s.sends) + len(s.recvs) for s in self.steps)

    @property
    def total_recv_numel(self) -> int:
        """Elements received over the whole program (the staging a data-flow run needs
        when every receive is staged)."""
        return sum(r.stop - r.start for s in self.steps for r in s.recvs)


def element_bounds(units: int, numel: int) -> list[int]:
    """Element offset of every unit boundary 0..units."""
    return [u * numel // units for u in range(units + 1)]


Part = tuple[int, int, bool]  # element range and reduce flag of one transfer's share


def _messages(transfers: list[Transfer], bounds: list[int], segment: int | None,
              pieces: int = 1, piece_min: int = 1) -> list[list[Part]]:
    """One pair's transfers as messages, each a list of contiguous parts; empty parts are
    dropped, touching ones coalesced, long ones cut into segments: at most ``segment``
    elements, and a message of at least ``pieces`` x ``piece_min`` elements into at least
    ``pieces`` (equal, rounded up)."""
    parts = sorted((bounds[t.start], bounds[t.stop], t.reduce) for t in transfers)
    merged: list[list[Part]] = []
    for a, b, red in parts:
        if a == b:
            continue
        if merged and merged[-1][-1][1] == a:
            merged[-1].append((a, b, red))
        else:
            merged.append([(a, b, red)])
    if not segment and pieces <= 1:
        return merged
    out: list[list[Part]] = []
    for m in merged:
        lo, hi = m[0][0], m[-1][1]
        seg = segment or hi - lo
        if pieces > 1 and hi - lo >= pieces * piece_min:
            seg = min(seg, -(-(hi - lo) // pieces))
        for c in range(lo, hi, seg):
            d = min(c + seg, hi)
            out.append([(max(a, c), min(b, d), red) for a, b, red in m if a < d and c < b])
    return out


def build_schedule(program: Program, rank: int, numel: int, *,
                   segment: int | None = None, stage_all: bool = False,
                   canonical: bool = True, pieces: int = 1,
                   piece_min: int = 1) -> RankSchedule:
    """The messages plan rank ``rank`` sends and receives per step for ``numel`` elements,
    messages cut at ``segment`` elements (None: never), and a message of at least ``pieces``
    x ``piece_min`` elements into at least ``pieces`` segments. ``stage_all`` stages every receive
    (none lands in place), so that ``dataflow`` posts all of them at the start.

    Applying every receive's applies in receive order (peers ascending) adds a step's
    received values in the canonical order of ``fold_in_rank_order`` unless ``canonical``
    is False (then each value is added to the buffer as its message arrives).

    Receives may be posted while the rank's previous active step is still running (the
    engine posts them early to hide the receiver-ready handshake), so a replacing message
    lands in place only if neither that step nor the previous one touches its elements;
    staging offsets are relative to the step's staging area.
    """
    if not 0 <= rank < program.nranks:
        raise ValueError(f"rank {rank} is outside the plan's {program.nranks} ranks")
    if numel < 0:
        raise ValueError(f"numel must be >= 0, got {numel}")
    if segment is not None and segment < 1:
        raise ValueError(f"segment must be >= 1 element, got {segment}")
    if pieces < 1 or piece_min < 1:
        raise ValueError(f"pieces and piece_min must be >= 1, got {pieces}, {piece_min}")
    bounds = element_bounds(program.units, numel)
    steps: list[RankStep] = []
    staging_max = 0
    busy_before: list[tuple[int, int]] = []  # elements the previous active step touches
    for s, step in enumerate(program.steps):
        out: dict[int, list[Transfer]] = defaultdict(list)
        inc: dict[int, list[Transfer]] = defaultdict(list)
        for t in step:
            if t.src == rank:
                out[t.dst].append(t)
            elif t.dst == rank:
                inc[t.src].append(t)
        sends = [Send(peer, m[0][0], m[-1][1]) for peer in sorted(out)
                 for m in _messages(out[peer], bounds, segment, pieces, piece_min)]
        incoming = [(peer, m) for peer in sorted(inc)
                    for m in _messages(inc[peer], bounds, segment, pieces, piece_min)]
        ranges = [(m[0][0], m[-1][1]) for _, m in incoming]
        busy = [(m.start, m.stop) for m in sends] + busy_before
        recvs: list[Recv] = []
        staged = 0
        for j, (peer, m) in enumerate(incoming):
            a, b = ranges[j]
            others = ranges[:j] + ranges[j + 1:]
            if (not stage_all and not any(p[2] for p in m)
                    and not _overlaps(a, b, busy + others)):
                recvs.append(Recv(peer, a, b, None))
                continue
            applies: list[Apply] = []
            for pa, pb, red in m:
                prev = applies[-1] if applies else None
                if prev is not None and prev.reduce == red:
                    applies[-1] = Apply(prev.start, pb, prev.staged, red)
                else:
                    applies.append(Apply(pa, pb, staged + pa - a, red))
            recvs.append(Recv(peer, a, b, staged, tuple(applies)))
            staged += b - a
        if canonical:
            recvs = fold_in_rank_order(recvs, rank)
        staging_max = max(staging_max, staged)
        if sends or recvs:
            steps.append(RankStep(s, tuple(sends), tuple(recvs)))
            busy_before = [(m.start, m.stop) for m in sends] + ranges
    return RankSchedule(rank=rank, numel=numel, steps=tuple(steps), staging_numel=staging_max)


def fold_in_rank_order(recvs: list[Recv], rank: int) -> list[Recv]:
    """Rewrite one step's applies of plan rank ``rank`` so that, run in receive order, they
    add the values received for each element as a left fold over the source ranks in rank
    order with this rank's own value in its own place: at rank 2, with values from ranks 0,
    1 and 3, ``t = x0 + x1`` (in x0's staging), ``own = own + t``, ``own = own + x3``. Float
    addition is commutative (``own + t == t + own`` bitwise), so every rank that sums the
    same ranks' values for an element computes the same expression and ends with the same
    bits, whatever order the messages arrive in.

    ``recvs`` are in peer order (``build_schedule``), so values from ranks above ``rank``
    already come after the own value, and a single value from below is ``own + x ==
    x + own``; only elements with values from two or more ranks below ``rank`` change: the
    first such value is not applied, each later one is added into the first one's staging,
    and the last of them also adds that partial sum to the buffer. Ranges need not match:
    this works per elementary piece between all the step's range boundaries."""
    low = [(j, x) for j, r in enumerate(recvs) if r.peer < rank for x in r.applies
           if x.reduce]
    if len({recvs[j].peer for j, _ in low}) < 2:
        return recvs
    cuts = sorted({v for _, x in low for v in (x.start, x.stop)})
    where = {c: k for k, c in enumerate(cuts)}
    cover: list[list[tuple[int, int]]] = [[] for _ in range(len(cuts) - 1)]
    for j, x in low:  # per piece, (receive, staging offset of the piece) in peer order
        for k in range(where[x.start], where[x.stop]):
            cover[k].append((j, x.staged + cuts[k] - x.start))
    if all(len(c) < 2 for c in cover):
        return recvs
    partial: list[list[Apply]] = [[] for _ in recvs]  # staging += staging
    final: list[list[Apply]] = [[x for x in r.applies if not (x.reduce and r.peer < rank)]
                                for r in recvs]
    for k, c in enumerate(cover):
        a, b = cuts[k], cuts[k + 1]
        if not c:  # between two ranges
            continue
        if len(c) == 1:
            final[c[0][0]].append(Apply(a, b, c[0][1], True))
            continue
        first = c[0][1]
        for j, off in c[1:]:
            partial[j].append(Apply(a, b, off, True, first))
        final[c[-1][0]].append(Apply(a, b, first, True))
    return [Recv(r.peer, r.start, r.stop, r.staged,
                 tuple(_merged(partial[j]) + _merged(sorted(final[j], key=lambda x: x.start))))
            if partial[j] or final[j] != list(r.applies) else r
            for j, r in enumerate(recvs)]


def _merged(applies: list[Apply]) -> list[Apply]:
    """Join applies that continue each other (elements, staging and target)."""
    out: list[Apply] = []
    for x in applies:
        p = out[-1] if out else None
        if (p is not None and p.reduce == x.reduce and p.stop == x.start
                and p.staged + p.stop - p.start == x.staged
                and (p.target is None) == (x.target is None)
                and (p.target is None or p.target + p.stop - p.start == x.target)):
            out[-1] = Apply(p.start, x.stop, p.staged, p.reduce, p.target)
        else:
            out.append(x)
    return out


def _last_recv_below(done_before: list[tuple[int, int]], limit: int) -> int:
    """The last receive of the steps whose program index is below ``limit`` (-1: none);
    ``done_before`` lists (step index, last receive before that step) in step order."""
    import bisect

    k = bisect.bisect_left(done_before, (limit, -2))
    return done_before[k][1] if k < len(done_before) else done_before[-1][1]


def _overlaps(a: int, b: int, ranges: list[tuple[int, int]]) -> bool:
    return any(x < b and a < y for x, y in ranges)


# Instructions of a rank's data-flow program (see ``dataflow``): (opcode, message index).
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


def dataflow(sched: RankSchedule, lookahead: int | None = None,
             window: int | None = None) -> Flow:
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

    ``window`` (None: off; only where every receive is staged, so a send completes without
    its receiver's program moving on): a send of step ``s`` is also held until this rank's
    sends of the steps before ``s - window`` are done, which keeps the program's order on a
    host that queues each destination separately (docs/executor.md). A send that a write
    must wait for is posted then, window or not.
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
                recv_trigger[j] = max([*(last_writer[p] for p in pieces(a, b)),
                                       *(send_trigger[i] for i in rd)], default=-1)
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

    code: list[tuple[int, int]] = [(POST_RECV, j) for j in range(len(recvs))
                                   if staged[j] is not None]
    waited: set[int] = set()
    posted: set[int] = set()
    held: list[int] = []  # sends the window holds, by step
    if window is not None and window < 0:
        raise ValueError(f"window must be >= 0, got {window}")
    # the window: send i waits for the sends by_step[:need[i]] (the steps before its own
    # minus ``window``); out = how many of by_step, from the first, are posted
    by_step: list[int] = []
    need: list[int] = []
    out = waited_out = 0
    if window is not None and all(x is not None for x in staged):
        steps_of = [sched.steps[step_of_send[i]].index for i in range(len(sends))]
        by_step = sorted(range(len(sends)), key=steps_of.__getitem__)
        keys = [steps_of[j] for j in by_step]
        need = [bisect.bisect_left(keys, steps_of[i] - window) for i in range(len(sends))]

    def post_send(i: int) -> None:
        nonlocal out, waited_out
        if need:
            while waited_out < len(by_step) and by_step[waited_out] in waited:
                waited_out += 1
            wait_sends([j for j in by_step[waited_out:need[i]] if j in posted])
        code.append((POST_SEND, i))
        posted.add(i)
        while out < len(by_step) and by_step[out] in posted:
            out += 1

    def send(i: int) -> None:
        if need and need[i] > out:
            held.append(i)
            return
        post_send(i)
        while held:  # release the held sends whose earlier steps' sends are all out
            ready = next((h for h in held if need[h] <= out), None)
            if ready is None:
                break
            held.remove(ready)
            post_send(ready)

    def wait_sends(items: list[int]) -> None:
        for i in items:
            if i not in waited:
                if i in held:  # a write waits for it: out now, window or not
                    held.remove(i)
                    post_send(i)
                waited.add(i)
                code.append((WAIT_SEND, i))

    def post(after: int) -> None:
        for _, kind, idx in sorted(triggered.get(after, ())):  # by step, sends first
            if kind == 0:
                send(idx)
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
    while held:
        post_send(held.pop(0))
    wait_sends(list(range(len(sends))))
    return Flow(tuple(sends), tuple(recvs), tuple(staged), tuple(applies), tuple(code), offset)
