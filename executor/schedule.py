"""Per-rank message schedule of a program for one element count; no torch needed.

Units map to elements by ``boundary(u) = u * numel // units``, so any element count works.
Transfers between the same pair in one step whose element ranges touch are coalesced into
one message, and a message longer than ``segment`` elements is cut into segments, so the
receiver can apply one segment while the next is still arriving. Sender and receiver derive
the same messages in the same order.
"""

from __future__ import annotations

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
    """``buf[start:stop] (+)= staging[staged:staged + stop - start]``."""

    start: int
    stop: int
    staged: int
    reduce: bool


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


def element_bounds(units: int, numel: int) -> list[int]:
    """Element offset of every unit boundary 0..units."""
    return [u * numel // units for u in range(units + 1)]


Part = tuple[int, int, bool]  # element range and reduce flag of one transfer's share


def _messages(transfers: list[Transfer], bounds: list[int], segment: int | None
              ) -> list[list[Part]]:
    """One pair's transfers as messages, each a list of contiguous parts; empty parts are
    dropped, touching ones coalesced, long ones cut into segments."""
    parts = sorted((bounds[t.start], bounds[t.stop], t.reduce) for t in transfers)
    merged: list[list[Part]] = []
    for a, b, red in parts:
        if a == b:
            continue
        if merged and merged[-1][-1][1] == a:
            merged[-1].append((a, b, red))
        else:
            merged.append([(a, b, red)])
    if not segment:
        return merged
    out: list[list[Part]] = []
    for m in merged:
        lo, hi = m[0][0], m[-1][1]
        for c in range(lo, hi, segment):
            d = min(c + segment, hi)
            out.append([(max(a, c), min(b, d), red) for a, b, red in m if a < d and c < b])
    return out


def build_schedule(program: Program, rank: int, numel: int, *,
                   segment: int | None = None) -> RankSchedule:
    """The messages plan rank ``rank`` sends and receives per step for ``numel`` elements,
    messages cut at ``segment`` elements (None: never).

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
        sends = [Send(peer, m[0][0], m[-1][1])
                 for peer in sorted(out) for m in _messages(out[peer], bounds, segment)]
        incoming = [(peer, m) for peer in sorted(inc)
                    for m in _messages(inc[peer], bounds, segment)]
        ranges = [(m[0][0], m[-1][1]) for _, m in incoming]
        busy = [(m.start, m.stop) for m in sends] + busy_before
        recvs: list[Recv] = []
        staged = 0
        for j, (peer, m) in enumerate(incoming):
            a, b = ranges[j]
            others = ranges[:j] + ranges[j + 1:]
            if not any(p[2] for p in m) and not _overlaps(a, b, busy + others):
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
        staging_max = max(staging_max, staged)
        if sends or recvs:
            steps.append(RankStep(s, tuple(sends), tuple(recvs)))
            busy_before = [(m.start, m.stop) for m in sends] + ranges
    return RankSchedule(rank=rank, numel=numel, steps=tuple(steps), staging_numel=staging_max)


def _overlaps(a: int, b: int, ranges: list[tuple[int, int]]) -> bool:
    return any(x < b and a < y for x, y in ranges)
