"""Hierarchical all-reduce after BlueConnect: reduce-scatter level by level, all-gather back.

Ranks are laid out on a grid whose dimensions follow the fabric: local index within a host,
host within a rack (hosts behind the same switches), rack. A factorisation merges adjacent
dimensions into stages; each stage reduce-scatters among the ranks that differ only in its
dimensions (a ring, or a direct exchange in one step), so ranks with the same local index
meet across hosts over their own NIC or rail. The all-gather replays the stages in reverse.
Every factorisation, stage order and stage method is priced by the cost model; the fastest
wins.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from functools import partial

from syncplan.core.errors import InfeasibleError
from syncplan.core.program import Program, Step, Transfer
from syncplan.planner.algorithms.base import Candidate, PlanContext
from syncplan.planner.algorithms.common import PRICE_BUDGET, coarsen, price
from syncplan.planner.algorithms.uneven import uneven_hierarchical

DIRECT_MAX_GROUP = 16  # a direct exchange puts p*(p-1) transfers in one step


def rank_grid(ctx: PlanContext) -> list[list[list[int]]]:
    """grid[rack][host][local] -> rank index; raise InfeasibleError when not uniform."""
    racks: dict[frozenset[str], list[list[int]]] = {}
    for group, ups in zip(ctx.host_groups, ctx.host_uplinks, strict=True):
        racks.setdefault(ups, []).append(group)
    grid = list(racks.values())
    local = {len(h) for rack in grid for h in rack}
    hosts = {len(rack) for rack in grid}
    if len(local) != 1:
        raise InfeasibleError(
            f"hierarchical needs the same number of ranks on every host, got {sorted(local)}"
        )
    if len(hosts) != 1:
        grid = [[h for rack in grid for h in rack]]  # uneven racks: treat as one rack
    return grid


def _dims(grid: list[list[list[int]]]) -> list[int]:
    """Sizes of the grid's dimensions, innermost (local) first, size-1 dimensions dropped."""
    return [d for d in (len(grid[0][0]), len(grid[0]), len(grid)) if d > 1]


def _groupings(ndims: int) -> Iterator[tuple[tuple[int, ...], ...]]:
    """Ordered partitions of dims 0..ndims-1 into runs of adjacent dims, in both orders."""
    for cuts in itertools.product((False, True), repeat=max(ndims - 1, 0)):
        runs, current = [], [0]
        for d, cut in zip(range(1, ndims), cuts, strict=True):
            if cut:
                runs.append(tuple(current))
                current = [d]
            else:
                current.append(d)
        runs.append(tuple(current))
        yield tuple(runs)
        if len(runs) > 1:
            yield tuple(reversed(runs))


def _stage_groups(
    flat: dict[tuple[int, ...], int], dims: list[int], stage: tuple[int, ...]
) -> list[list[int]]:
    """Groups of rank indices differing only in ``stage`` dims, members outer-dim major."""
    others = [d for d in range(len(dims)) if d not in stage]
    groups = []
    for fixed in itertools.product(*(range(dims[d]) for d in others)):
        members = []
        for varying in itertools.product(*(range(dims[d]) for d in reversed(stage))):
            coord = [0] * len(dims)
            for d, v in zip(others, fixed, strict=True):
                coord[d] = v
            for d, v in zip(reversed(stage), varying, strict=True):
                coord[d] = v
            members.append(flat[tuple(coord)])
        groups.append(members)
    return groups


class _Schedule:
    """Builds the reduce-scatter and all-gather steps of one factorisation."""

    def __init__(self, units: int, stages: list[tuple[list[list[int]], str]], nranks: int):
        self.units, self.stages = units, stages
        self.region = [(0, units)] * nranks

    def reduce_scatter(self, stage: int, first_only: bool = False) -> list[Step]:
        """The stage's steps (``first_only``: just its first step; regions still advance)."""
        groups, method = self.stages[stage]
        p = len(groups[0])
        nsteps = 1 if method == "direct" or first_only else p - 1
        steps: list[Step] = [[] for _ in range(nsteps)]
        new_region = list(self.region)
        for members in groups:
            lo, hi = self.region[members[0]]
            parts = [(lo + (hi - lo) * k // p, lo + (hi - lo) * (k + 1) // p) for k in range(p)]
            if method == "direct":
                for i, src in enumerate(members):
                    for j, dst in enumerate(members):
                        if i != j:
                            steps[0].append(Transfer(src, dst, *parts[j], True))
                for j, r in enumerate(members):
                    new_region[r] = parts[j]
            else:
                for s in range(nsteps):
                    for i in range(p):
                        a, b = parts[(i - s) % p]
                        steps[s].append(Transfer(members[i], members[(i + 1) % p], a, b, True))
                for i, r in enumerate(members):
                    new_region[r] = parts[(i + 1) % p]
        self.region = new_region
        return steps

    def all_gather(
        self, stage: int, regions_before: list[tuple[int, int]], first_only: bool = False
    ) -> list[Step]:
        groups, method = self.stages[stage]
        p = len(groups[0])
        nsteps = 1 if method == "direct" or first_only else p - 1
        steps: list[Step] = [[] for _ in range(nsteps)]
        for members in groups:
            lo, hi = regions_before[members[0]]
            parts = [(lo + (hi - lo) * k // p, lo + (hi - lo) * (k + 1) // p) for k in range(p)]
            if method == "direct":
                for j, src in enumerate(members):
                    for i, dst in enumerate(members):
                        if i != j:
                            steps[0].append(Transfer(src, dst, *parts[j], False))
            else:
                for s in range(nsteps):
                    for i in range(p):
                        a, b = parts[(i + 1 - s) % p]
                        steps[s].append(Transfer(members[i], members[(i + 1) % p], a, b, False))
        return steps

    def program(self) -> Program:
        history, rs = [], []
        for k in range(len(self.stages)):
            history.append(self.region)
            rs.extend(self.reduce_scatter(k))
        ag = []
        for k in reversed(range(len(self.stages))):
            ag.extend(self.all_gather(k, history[k]))
        return Program(self.units, [s for s in rs + ag if s])


def hierarchical(ctx: PlanContext) -> Candidate:
    n = len(ctx.ranks)
    if n == 1:
        return Candidate("hierarchical", 0.0, lambda: Program(1, []), {"levels": []})
    if len({len(g) for g in ctx.host_groups}) > 1:
        return uneven_hierarchical(ctx)  # hosts of different sizes: nested groups, no grid
    grid = rank_grid(ctx)
    dims = _dims(grid)
    flat: dict[tuple[int, ...], int] = {}
    full_dims = (len(grid[0][0]), len(grid[0]), len(grid))
    for k, rack in enumerate(grid):
        for h, host in enumerate(rack):
            for i, r in enumerate(host):
                coord = tuple(c for c, size in zip((i, h, k), full_dims, strict=True) if size > 1)
                flat[coord] = r
    best: Candidate | None = None
    for grouping in _groupings(len(dims)):
        groups_per_stage = [_stage_groups(flat, dims, stage) for stage in grouping]
        sizes = [len(g[0]) for g in groups_per_stage]
        choices = [
            ("ring", "direct") if p <= DIRECT_MAX_GROUP and p > 2 else ("ring",) for p in sizes
        ]
        for methods in itertools.product(*choices):
            stages = list(zip(groups_per_stage, methods, strict=True))
            whole = ctx.size_bytes < n or ctx.cost.switch_overhead
            if whole and 2 * n * sum(p - 1 for p in sizes) <= PRICE_BUDGET:
                # fewer bytes than ranks (units would be finer than a byte), or a switch
                # term (it depends on consecutive steps): priced on the whole program
                prog = _Schedule(n, stages, n).program()
                if ctx.size_bytes < n:
                    prog = coarsen(prog, ctx.size_bytes)
                t, build = price(ctx, prog), partial(_same, prog)
            elif ctx.size_bytes >= n:  # above the budget the switch term is left out
                t = _predict(ctx, stages, n)
                build = partial(_build, n, stages)
            else:
                continue
            if best is None or t < best.predicted_time_s:
                desc = [
                    {
                        "group_size": p,
                        "method": m,
                        "dims": [
                            ("local", "host", "rack")[d] for d in _named_dims(full_dims, stage)
                        ],
                    }
                    for p, m, stage in zip(sizes, methods, grouping, strict=True)
                ]
                best = Candidate("hierarchical", t, build, {"levels": desc})
    if best is None:
        raise InfeasibleError(
            f"hierarchical: {ctx.size_bytes} bytes over {n} ranks is fewer bytes than its "
            f"units, and every factorisation would build more than {PRICE_BUDGET} transfers "
            "to price on 1-byte units"
        )
    return best


def _build(n: int, stages: list[tuple[list[list[int]], str]]) -> Program:
    return _Schedule(n, stages, n).program()


def _same(program: Program) -> Program:
    return program


def _named_dims(full_dims: tuple[int, int, int], stage: tuple[int, ...]) -> list[int]:
    kept = [d for d, size in enumerate(full_dims) if size > 1]
    return [kept[d] for d in stage]


def _predict(ctx: PlanContext, stages: list[tuple[list[list[int]], str]], n: int) -> float:
    """Cost of a factorisation from one representative step per stage and phase."""
    sched = _Schedule(n, stages, n)
    bpu = ctx.size_bytes / n
    total = 0.0
    history = []
    for k, (groups, method) in enumerate(stages):
        history.append(sched.region)
        steps = sched.reduce_scatter(k, first_only=True)[0]
        reps = 1 if method == "direct" else len(groups[0]) - 1
        total += reps * ctx.cost.step_time(ctx.ranks, steps, bpu)
    for k, (groups, method) in enumerate(stages):
        steps = sched.all_gather(k, history[k], first_only=True)[0]
        reps = 1 if method == "direct" else len(groups[0]) - 1
        total += reps * ctx.cost.step_time(ctx.ranks, steps, bpu)
    return total
