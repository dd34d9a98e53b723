"""Per-rank message schedule of a program for one element count; no torch needed.

Units map to elements by ``boundary(u) = u * numel // units``, so any element count works.
Transfers between the same pair in one step whose element ranges touch are coalesced into
one message; sender and receiver derive the same messages in the same order.
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
class Recv:
    """A message into ``[start, stop)``: directly (``staged`` is None) or into staging
    elements ``staged .. staged + stop - start`` and applied after the step."""

    peer: int
    start: int
    stop: int
    staged: int | None


@dataclass(frozen=True, slots=True)
class Apply:
    """After the step: ``buf[start:stop] (+)= staging[staged:staged + stop - start]``."""

    start: int
    stop: int
    staged: int
    reduce: bool


@dataclass(frozen=True, slots=True)
class RankStep:
    index: int  # step index in the program
    sends: tuple[Send, ...]
    recvs: tuple[Recv, ...]
    applies: tuple[Apply, ...]


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


def _messages(transfers: list[Transfer], bounds: list[int]) -> list[list[tuple[int, int, bool]]]:
    """Coalesce one pair's transfers into messages; each is a list of (start, stop, reduce)
    element parts, empty parts dropped."""
    parts = sorted((bounds[t.start], bounds[t.stop], t.reduce) for t in transfers)
    out: list[list[tuple[int, int, bool]]] = []
    for a, b, red in parts:
        if a == b:
            continue
        if out and out[-1][-1][1] == a:
            out[-1].append((a, b, red))
        else:
            out.append([(a, b, red)])
    return out


def build_schedule(program: Program, rank: int, numel: int) -> RankSchedule:
    """The messages plan rank ``rank`` sends and receives per step for ``numel`` elements.

    Receives may be posted while the rank's previous active step is still running (the
    engine posts them early to hide the receiver-ready handshake), so a replacing message
    lands in place only if neither that step nor the previous one touches its elements;
    staging offsets are relative to the step's staging area.
    """
    if not 0 <= rank < program.nranks:
        raise ValueError(f"rank {rank} is outside the plan's {program.nranks} ranks")
    if numel < 0:
        raise ValueError(f"numel must be >= 0, got {numel}")
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
                 for peer in sorted(out) for m in _messages(out[peer], bounds)]
        incoming = [(peer, m) for peer in sorted(inc) for m in _messages(inc[peer], bounds)]
        recvs: list[Recv] = []
        applies: list[Apply] = []
        staged = 0
        busy = [(m.start, m.stop) for m in sends] + busy_before
        for j, (peer, m) in enumerate(incoming):
            a, b = m[0][0], m[-1][1]
            others = [(mm[0][0], mm[-1][1]) for k, (_, mm) in enumerate(incoming) if k != j]
            if not any(p[2] for p in m) and not _overlaps(a, b, busy + others):
                recvs.append(Recv(peer, a, b, None))
                continue
            recvs.append(Recv(peer, a, b, staged))
            for pa, pb, red in m:
                prev = applies[-1] if applies else None
                if (prev is not None and prev.reduce == red and prev.stop == pa
                        and prev.staged + prev.stop - prev.start == staged + pa - a):
                    applies[-1] = Apply(prev.start, pb, prev.staged, red)
                else:
                    applies.append(Apply(pa, pb, staged + pa - a, red))
            staged += b - a
        staging_max = max(staging_max, staged)
        if sends or recvs:
            steps.append(RankStep(s, tuple(sends), tuple(recvs), tuple(applies)))
            busy_before = ([(m.start, m.stop) for m in sends]
                           + [(m.start, m.stop) for m in recvs])
    return RankSchedule(rank=rank, numel=numel, steps=tuple(steps), staging_numel=staging_max)


def _overlaps(a: int, b: int, ranges: list[tuple[int, int]]) -> bool:
    return any(x < b and a < y for x, y in ranges)
