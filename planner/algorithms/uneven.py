"""BlueConnect-style decomposition for hosts (and racks) of different sizes.

Levels nest: ranks -> hosts -> racks (hosts behind the same switches) -> everything; any of
the middle levels may be skipped. After a level's reduce-scatter every member of a group
holds the group's partial sum of some pieces of the buffer, and the pieces of the group's
members cover the buffer. At the next level the pieces of a group's children (hosts, say,
with 1 and 4 ranks) are overlaid: every segment between two piece boundaries has exactly one
owner in each child, and those owners reduce-scatter the segment among themselves (a ring,
or a direct exchange in one step). Groups need not be equal: a rank of a 1-GPU host owns
every segment of its host and meets the owners from the other hosts in each. The all-gather
replays the levels in reverse. Every level choice and method is priced on the full program.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from syncplan.core.program import Program, Step, Transfer, split_range
from syncplan.planner.algorithms.base import Candidate, PlanContext
from syncplan.planner.algorithms.common import ready

DIRECT_MAX_GROUP = 16
FULL_PRICE_MAX = 20_000  # transfers: a level with unequal parts is priced step by step up to this
MAX_UNITS = 1 << 24  # beyond it (or below a byte per unit) parts differ by one unit

Piece = tuple[int, int, int]  # (rank, lo, hi): rank holds its group's sum of units lo..hi-1


@dataclass
class _Segment:
    owners: list[int]  # one rank per child, in child order
    parts: list[tuple[int, int]]  # the segment cut into len(owners) parts


def _racks(ctx: PlanContext) -> list[list[int]]:
    """Host indices grouped by the forwarding nodes their NICs reach, racks in first-seen
    order; hosts of a rack stay adjacent so rings leave a rack once."""
    racks: dict[frozenset[str], list[int]] = {}
    for h, ups in enumerate(ctx.host_uplinks):
        racks.setdefault(ups, []).append(h)
    return list(racks.values())


def level_sets(ctx: PlanContext) -> dict[str, list[list[list[int]]]]:
    """Candidate hierarchies by name: each is a list of levels, each level a list of groups,
    each group the indices of its children among the previous level's entities (level 0's
    entities are ranks), children in rack-major order. The last level is one group."""
    hosts = ctx.host_groups
    racks = _racks(ctx)
    pos = {r: i for i, r in enumerate(r for rack in racks for h in rack for r in hosts[h])}
    out: dict[str, list[list[list[int]]]] = {}
    seen: set[str] = set()
    for keep_host, keep_rack in ((False, False), (True, False), (False, True), (True, True)):
        levels: list[list[list[int]]] = []
        members = [[r] for r in range(len(ctx.ranks))]  # ranks of each current entity
        rack_groups = [[r for h in rack for r in hosts[h]] for rack in racks]
        for keep, groups in ((keep_host, hosts), (keep_rack, rack_groups), (True, None)):
            if not keep:
                continue
            owner = {r: e for e, m in enumerate(members) for r in m}
            level = [
                sorted({owner[r] for r in g}, key=lambda e: min(pos[r] for r in members[e]))
                for g in (groups if groups is not None else [list(pos)])
            ]
            levels.append(level)
            members = [[r for e in g for r in members[e]] for g in level]
        key = repr([lv for lv in levels if any(len(g) > 1 for g in lv)])
        if key not in seen:
            seen.add(key)
            name = "+".join(n for n, k in (("host", keep_host), ("rack", keep_rack)) if k)
            out[name or "flat"] = levels
    return out


def _units(levels: list[list[list[int]]], size_bytes: int) -> int:
    """Units in which every part of every level is whole: the product over levels of the
    lcm of the level's group sizes (at most MAX_UNITS, and never finer than a byte)."""
    units = 1
    for level in levels:
        units *= math.lcm(*(len(g) for g in level))
    return max(1, min(units, MAX_UNITS, size_bytes))


def _history(
    levels: list[list[list[int]]], methods: list[str], nranks: int, units: int
) -> list[list[_Segment]]:
    """Per level, the segments its groups reduce-scatter (one owner per child each)."""
    pieces: list[list[Piece]] = [[(r, 0, units)] for r in range(nranks)]
    history: list[list[_Segment]] = []
    for level, method in zip(levels, methods, strict=True):
        segments: list[_Segment] = []
        new_pieces: list[list[Piece]] = []
        for group in level:
            if len(group) == 1:
                new_pieces.append(pieces[group[0]])
                continue
            out: list[Piece] = []
            for seg in _overlay([pieces[c] for c in group]):
                segments.append(seg)
                m = len(seg.owners)
                for i, o in enumerate(seg.owners):
                    lo, hi = seg.parts[i if method == "direct" else (i + 1) % m]
                    if hi > lo:
                        out.append((o, lo, hi))
            new_pieces.append(out)
        pieces = new_pieces
        history.append(segments)
    return history


def build(history: list[list[_Segment]], methods: list[str], units: int) -> Program:
    """The program: every level's reduce-scatter, then their all-gathers in reverse."""
    rs = [st for segs, m in zip(history, methods, strict=True) for st in _phase(segs, m, True)]
    ag = [
        st
        for segs, m in zip(reversed(history), reversed(methods), strict=True)
        for st in _phase(segs, m, False)
    ]
    return Program(units, [s for s in rs + ag if s])


def _overlay(children: list[list[Piece]]) -> list[_Segment]:
    """Segments between every boundary of the children's pieces, with their owners."""
    cuts = sorted({x for pcs in children for _, lo, hi in pcs for x in (lo, hi)})
    found = [sorted((lo, hi, r) for r, lo, hi in pcs) for pcs in children]
    at = [0] * len(children)
    segments = []
    for a, b in itertools.pairwise(cuts):
        owners = []
        for c, pcs in enumerate(found):
            while pcs[at[c]][1] <= a:
                at[c] += 1
            owners.append(pcs[at[c]][2])
        segments.append(_Segment(owners, split_range(a, b, len(owners))))
    return segments


def _ring_step(segments: list[_Segment], s: int, reduce: bool) -> Step:
    """Step ``s`` of the rings of every segment (reduce-scatter or all-gather)."""
    step = []
    for seg in segments:
        m = len(seg.owners)
        if s >= m - 1:
            continue
        for i in range(m):
            lo, hi = seg.parts[(i - s) % m if reduce else (i + 1 - s) % m]
            if hi > lo:
                step.append(Transfer(seg.owners[i], seg.owners[(i + 1) % m], lo, hi, reduce))
    return step


def _direct_step(segments: list[_Segment], reduce: bool) -> Step:
    step = []
    for seg in segments:
        for i, src in enumerate(seg.owners):
            for j, dst in enumerate(seg.owners):
                lo, hi = seg.parts[j] if reduce else seg.parts[i]
                if i != j and hi > lo:
                    step.append(Transfer(src, dst, lo, hi, reduce))
    return step


def _phase(segments: list[_Segment], method: str, reduce: bool) -> list[Step]:
    """Reduce-scatter (``reduce``) or all-gather steps of every segment, side by side."""
    if not segments:
        return []
    if method == "direct":
        return [_direct_step(segments, reduce)]
    return [
        _ring_step(segments, s, reduce) for s in range(max(len(seg.owners) for seg in segments) - 1)
    ]


class _TooCostly(Exception):
    """Pricing this candidate step by step would exceed FULL_PRICE_MAX transfers."""


def _level_time(
    ctx: PlanContext, segments: list[_Segment], method: str, bpu: float, budget: float
) -> float:
    """Cost of a level's reduce-scatter and all-gather steps. Ring steps whose parts are all
    equal load every arc alike while the same segments are active: one is priced per run.
    Raise _TooCostly where unequal parts need more than ``budget`` transfers priced."""

    def price(step: Step) -> float:
        return ctx.cost.step_time(ctx.ranks, step, bpu) if step else 0.0

    if not segments:
        return 0.0
    if method == "direct":
        return price(_direct_step(segments, True)) + price(_direct_step(segments, False))
    if any(len({hi - lo for lo, hi in seg.parts}) > 1 for seg in segments):
        if sum(len(seg.owners) ** 2 for seg in segments) > budget:
            raise _TooCostly
        return sum(price(st) for r in (True, False) for st in _phase(segments, method, r))
    total, done = 0.0, 0
    for m in sorted({len(seg.owners) for seg in segments}):
        if m - 1 > done:
            total += 2 * (m - 1 - done) * price(_ring_step(segments, done, True))
            done = m - 1
    return total


def uneven_hierarchical(ctx: PlanContext) -> Candidate:
    """The fastest hierarchy and method per level under the cost model. Candidates whose
    parts are unequal (units capped) and large are priced only if nothing else could be."""
    best = _search(ctx, FULL_PRICE_MAX) or _search(ctx, float("inf"))
    assert best is not None
    return best


def _search(ctx: PlanContext, budget: float) -> Candidate | None:
    n = len(ctx.ranks)
    best: Candidate | None = None
    for name, levels in level_sets(ctx).items():
        units = _units(levels, ctx.size_bytes)
        bpu = ctx.size_bytes / units
        choices = [
            ("ring", "direct") if 2 < max(len(g) for g in lv) <= DIRECT_MAX_GROUP else ("ring",)
            for lv in levels
        ]
        for methods in itertools.product(*choices):
            history = _history(levels, list(methods), n, units)
            try:
                t = sum(
                    _level_time(ctx, segs, m, bpu, budget)
                    for segs, m in zip(history, methods, strict=True)
                )
            except _TooCostly:
                continue
            make: Callable[[], Program] = partial(build, history, list(methods), units)
            if ctx.cost.switch_overhead and (best is None or t < best.predicted_time_s):
                # the switch term depends on consecutive steps: the program itself is priced
                # (within the pricing budget; above it the term is left out) and kept
                prog = make()
                if sum(len(step) for step in prog.steps) <= budget:
                    t = ctx.cost.program_time(ctx.ranks, prog, ctx.size_bytes)
                    make = ready(prog)
            if best is None or t < best.predicted_time_s:
                desc = [
                    {"groups": len(lv), "largest_group": max(len(g) for g in lv), "method": m}
                    for lv, m in zip(levels, methods, strict=True)
                ]
                best = Candidate(
                    "hierarchical", t, make, {"levels": desc, "hierarchy": name, "uneven": True}
                )
    return best
