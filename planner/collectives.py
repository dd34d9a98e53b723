"""Reduce-scatter and all-gather plans (docs/formats.md) from all-reduce programs.

Every all-reduce algorithm here is reduce-then-broadcast: each unit is summed at one rank
(its root) by ``reduce: true`` transfers and copied back out by ``reduce: false`` ones. Split
a program into those two parts and the reduce part is a reduce-scatter whose owner of each
unit is its root, the broadcast part an all-gather from the same owners. Units are then
renumbered so that each rank owns one contiguous range (``shards``). ``shards: "equal"``
keeps only candidates whose owners hold equal unit counts (ring, hierarchical); ``"any"``
also admits unequal ones, such as forest's rate-sized tree shares, so a slow host roots less.
A split that does not replay as a reduce-scatter and an all-gather is rejected.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from syncplan.core.errors import InfeasibleError, RequestError
from syncplan.core.options import DEFAULT_OPTIONS, PlanOptions
from syncplan.core.program import Program, Step, Transfer, program_to_doc
from syncplan.planner.algorithms import ALGORITHMS, PlanContext
from syncplan.planner.bound_collectives import CollectiveBound, collective_bound
from syncplan.planner.plan_doc import PLAN_FORMAT_VERSION, TIE_TOLERANCE, plan_id, with_routes

SPLIT_COLLECTIVES = ("reducescatter", "allgather")
SHARDS = ("equal", "any")


@dataclass(frozen=True)
class SplitProgram:
    """An all-reduce split at its roots: reduce-scatter, all-gather, and the owned ranges."""

    algorithm: str
    rs: Program
    ag: Program
    shards: list[tuple[int, int]]
    details: dict[str, Any]


def _cuts(program: Program) -> list[int]:
    return sorted({0, program.units} | {b for s in program.steps for t in s for b in (t.lo, t.hi)})


def _owners(program: Program, n: int, cuts: list[int]) -> list[int]:
    """Replay the reduce transfers; per segment of ``cuts``, the rank holding its full sum."""
    seg = {b: i for i, b in enumerate(cuts)}
    nseg = len(cuts) - 1
    mask = [[1 << r] * nseg for r in range(n)]
    for step in program.steps:
        start = {t.src: list(mask[t.src]) for t in step}
        for t in step:
            row, src = mask[t.dst], start[t.src]
            for s in range(seg[t.lo], seg[t.hi]):
                if row[s] & src[s]:
                    raise InfeasibleError("the reduce part counts an input twice")
                row[s] |= src[s]
    full = (1 << n) - 1
    owner = []
    for s in range(nseg):
        roots = [r for r in range(n) if mask[r][s] == full]
        if not roots:
            raise InfeasibleError(
                "not reduce-then-broadcast: no rank holds the full sum of "
                f"units [{cuts[s]}, {cuts[s + 1]}) after the reduce part"
            )
        owner.append(roots[0])
    return owner


def _check_gather(program: Program, owner: list[int], n: int, cuts: list[int]) -> None:
    """Every replace transfer of the broadcast part must carry an owner's value."""
    seg = {b: i for i, b in enumerate(cuts)}
    valid = [[o == r for o in owner] for r in range(n)]
    for step in program.steps:
        start = {t.src: list(valid[t.src]) for t in step}
        for t in step:
            row, src = valid[t.dst], start[t.src]
            for s in range(seg[t.lo], seg[t.hi]):
                row[s] = src[s]
    if not all(all(row) for row in valid):
        raise InfeasibleError("the broadcast part does not leave every rank the owner's value")


def _renumber(steps: Sequence[Step], cuts: list[int], new_lo: list[int]) -> list[Step]:
    """Move every transfer's segments to their new positions, merged where consecutive."""
    seg = {b: i for i, b in enumerate(cuts)}
    out: list[Step] = []
    for step in steps:
        moved: list[Transfer] = []
        for t in step:
            runs = sorted(
                (new_lo[s], new_lo[s] + cuts[s + 1] - cuts[s]) for s in range(seg[t.lo], seg[t.hi])
            )
            lo, hi = runs[0]
            for a, b in runs[1:]:
                if a != hi:
                    moved.append(Transfer(t.src, t.dst, lo, hi, t.reduce, t.path))
                    lo = a
                hi = b
            moved.append(Transfer(t.src, t.dst, lo, hi, t.reduce, t.path))
        out.append(moved)
    return out


def split_allreduce(program: Program, n: int, algorithm: str = "") -> SplitProgram:
    """Split a reduce-then-broadcast all-reduce program over ``n`` ranks (see module doc)."""
    reduce_steps = [s for s in ([t for t in s if t.reduce] for s in program.steps) if s]
    bcast_steps = [s for s in ([t for t in s if not t.reduce] for s in program.steps) if s]
    if n == 1:
        return SplitProgram(
            algorithm, Program(1, []), Program(1, []), [(0, 1)], {"owned_units": [1]}
        )
    cuts = _cuts(program)
    owner = _owners(Program(program.units, reduce_steps), n, cuts)
    _check_gather(Program(program.units, bcast_steps), owner, n, cuts)
    order = sorted(range(len(owner)), key=lambda s: (owner[s], cuts[s]))
    new_lo = [0] * len(owner)
    counts = [0] * n
    at = 0
    for s in order:
        new_lo[s] = at
        at += cuts[s + 1] - cuts[s]
        counts[owner[s]] += cuts[s + 1] - cuts[s]
    shards, lo = [], 0
    for c in counts:
        shards.append((lo, lo + c))
        lo += c
    return SplitProgram(
        algorithm,
        Program(program.units, _renumber(reduce_steps, cuts, new_lo)),
        Program(program.units, _renumber(bcast_steps, cuts, new_lo)),
        shards,
        {"owned_units": counts},
    )


def equal_shards(shards: Sequence[tuple[int, int]]) -> bool:
    return len({b - a for a, b in shards}) == 1


def price_splits(
    ctx: PlanContext, names: Sequence[str], shards: str = "equal"
) -> tuple[dict[str, tuple[SplitProgram, float, float]], dict[str, str]]:
    """Build and split every named algorithm; ({name: (split, rs time, ag time)}, why not)."""
    priced: dict[str, tuple[SplitProgram, float, float]] = {}
    infeasible: dict[str, str] = {}
    for name in names:
        try:
            cand = ALGORITHMS[name](ctx)
            split = split_allreduce(cand.build(), len(ctx.ranks), name)
        except InfeasibleError as exc:
            infeasible[name] = str(exc)
            continue
        if shards == "equal" and not equal_shards(split.shards):
            infeasible[name] = (
                "its roots own unequal unit counts "
                f"{split.details['owned_units']}; ask for shards 'any'"
            )
            continue
        priced[name] = (split, _price(ctx, split.rs), _price(ctx, split.ag))
    return priced, infeasible


def _price(ctx: PlanContext, program: Program) -> float:
    return ctx.cost.program_time(ctx.ranks, program, ctx.size_bytes)


def make_collective_plan(
    topo: Any,
    ranks: list[str],
    size_bytes: int,
    algorithm: str,
    collective: str,
    *,
    shards: str = "equal",
    seed: int = 0,
    options: PlanOptions = DEFAULT_OPTIONS,
) -> dict[str, Any]:
    """A reduce-scatter or all-gather plan document (docs/formats.md, Plan document: ``shards``)."""
    if collective not in SPLIT_COLLECTIVES:
        raise RequestError(f"collective {collective!r} is not a reduce-scatter or all-gather")
    if shards not in SHARDS:
        raise RequestError(f"shards must be one of {', '.join(SHARDS)}, got {shards!r}")
    t0 = time.perf_counter()
    ctx = PlanContext.create(topo, ranks, size_bytes, seed=seed, options=options)
    names = list(ALGORITHMS) if algorithm == "auto" else [algorithm]
    splits, infeasible = price_splits(ctx, names, shards)
    scatter = collective == "reducescatter"
    priced = {
        k: (sp, sp.rs, rs_s) if scatter else (sp, sp.ag, ag_s)
        for k, (sp, rs_s, ag_s) in splits.items()
    }
    if not priced:
        raise InfeasibleError(
            f"no algorithm can serve this {collective}: "
            + "; ".join(f"{k}: {v}" for k, v in infeasible.items())
        )
    fastest = min(p[2] for p in priced.values())
    order = {name: i for i, name in enumerate(ALGORITHMS)}
    chosen = min(
        (k for k, p in priced.items() if p[2] <= fastest * (1 + TIE_TOLERANCE)),
        key=lambda k: (order.get(k, len(order)), priced[k][2]),
    )
    split, half, predicted = priced[chosen]
    bound: CollectiveBound = collective_bound(
        ctx, collective, split.shards if shards == "equal" else None, split.rs.units
    )
    program = with_routes(half, ranks, ctx.router)
    doc: dict[str, Any] = {
        "plan_id": "",
        "format_version": PLAN_FORMAT_VERSION,
        "algorithm": chosen,
        "requested_algorithm": algorithm,
        "collective": collective,
        "ranks": list(ranks),
        "size_bytes": size_bytes,
        "shards": [list(s) for s in split.shards],
        "shards_request": shards,
        "predicted_time_s": predicted,
        "lower_bound_time_s": bound.time_s,
        "lower_bound_family": bound.family,
        "lower_bound_method": bound.method,
        "lower_bound_bandwidth_s": bound.bandwidth_s,
        "details": {"split_from": "allreduce", **split.details},
        "candidates": {k: p[2] for k, p in priced.items()},
        "solve_time_s": time.perf_counter() - t0,
        "program": program_to_doc(program),
    }
    if options.min_step_s:
        doc["min_step_s"] = options.min_step_s
    base = plan_id(topo, doc)
    doc["plan_id"] = hashlib.sha256(f"{base}:{collective}:{shards}".encode()).hexdigest()[:20]
    return doc
