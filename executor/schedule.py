"""Per-rank message schedule of a program for one element count; no torch needed.

Units map to elements by ``boundary(u) = u * numel // units``, so any element count works.
Transfers between the same pair in one step whose element ranges touch are coalesced into
one message, and a message longer than ``segment`` elements is cut into segments (a message
of at least ``pieces`` x ``piece_min`` elements into at least ``pieces``), so the receiver can
apply one segment while the next is still arriving. Sender and receiver derive the same
messages in the same order.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from syncplan.core.document import PlanDocument, Transfer


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
        return Apply(
            self.start,
            self.stop,
            self.staged + by,
            self.reduce,
            None if self.target is None else self.target + by,
        )


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


def _messages(
    transfers: list[Transfer],
    bounds: list[int],
    segment: int | None,
    pieces: int = 1,
    piece_min: int = 1,
) -> list[list[Part]]:
    """One pair's transfers as messages, each a list of contiguous parts; empty parts are
    dropped, touching ones coalesced, long ones cut into segments: at most ``segment``
    elements, and a message of at least ``pieces`` x ``piece_min`` elements into at least
    ``pieces`` (equal, rounded up)."""
    parts = sorted((bounds[t.lo], bounds[t.hi], t.reduce) for t in transfers)
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


def build_schedule(
    program: PlanDocument,
    rank: int,
    numel: int,
    *,
    segment: int | None = None,
    stage_all: bool = False,
    canonical: bool = True,
    pieces: int = 1,
    piece_min: int = 1,
) -> RankSchedule:
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
        sends = [
            Send(peer, m[0][0], m[-1][1])
            for peer in sorted(out)
            for m in _messages(out[peer], bounds, segment, pieces, piece_min)
        ]
        incoming = [
            (peer, m)
            for peer in sorted(inc)
            for m in _messages(inc[peer], bounds, segment, pieces, piece_min)
        ]
        ranges = [(m[0][0], m[-1][1]) for _, m in incoming]
        busy = [(m.start, m.stop) for m in sends] + busy_before
        recvs: list[Recv] = []
        staged = 0
        for j, (peer, m) in enumerate(incoming):
            a, b = ranges[j]
            others = ranges[:j] + ranges[j + 1 :]
            if not stage_all and not any(p[2] for p in m) and not _overlaps(a, b, busy + others):
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
    low = [(j, x) for j, r in enumerate(recvs) if r.peer < rank for x in r.applies if x.reduce]
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
    final: list[list[Apply]] = [
        [x for x in r.applies if not (x.reduce and r.peer < rank)] for r in recvs
    ]
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
    return [
        Recv(
            r.peer,
            r.start,
            r.stop,
            r.staged,
            tuple(_merged(partial[j]) + _merged(sorted(final[j], key=lambda x: x.start))),
        )
        if partial[j] or final[j] != list(r.applies)
        else r
        for j, r in enumerate(recvs)
    ]


def _merged(applies: list[Apply]) -> list[Apply]:
    """Join applies that continue each other (elements, staging and target)."""
    out: list[Apply] = []
    for x in applies:
        p = out[-1] if out else None
        if (
            p is not None
            and p.reduce == x.reduce
            and p.stop == x.start
            and p.staged + p.stop - p.start == x.staged
            and (p.target is None) == (x.target is None)
            and (p.target is None or p.target + p.stop - p.start == x.target)
        ):
            out[-1] = Apply(p.start, x.stop, p.staged, p.reduce, p.target)
        else:
            out.append(x)
    return out


def _overlaps(a: int, b: int, ranges: list[tuple[int, int]]) -> bool:
    return any(x < b and a < y for x, y in ranges)


# Instructions of a rank's data-flow program (see ``dataflow``): (opcode, message index).
