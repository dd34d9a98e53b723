"""The host partition bound with aggregation fill and each step's latency.

The partition bound over hosts (``syncplan.planner.bound``) counts the bytes that must cross host
boundaries and ignores when they can cross. In a reduce-then-broadcast program a byte that
leaves a host carries only the contributions of that host's ranks that reached its sender
inside the host first, and a byte that enters a host reaches that host's other ranks only in
later steps. So a program of few steps cannot move every crossing byte fully aggregated (it
crosses more bytes), and a program of many steps pays each step's latency. This module
bounds both together: for K lockstep steps, an LP relaxes every program of K steps, and the
bound is the least, over K, of the LP's bandwidth time plus K steps' latencies.

Why the LP holds every program (``M`` bytes, host ``h`` holding ``g_h`` ranks): for a byte
rooted outside ``h``, each rank of ``h``'s contribution first leaves ``h`` in one transfer
(its *coverage*); a transfer covering ``j`` ranks was fed by ``j - 1`` transfers inside ``h``
in earlier steps, disjoint from those feeding other transfers, so by every step the coverage
is at most the crossings plus the intra-host transfers of the steps before (``C <= X +
I(earlier)``). Mirrored for the broadcast: each rank of ``h`` last enters by one transfer,
whose subtree inside ``h`` takes ``j - 1`` transfers in later steps. A byte is reduced once
every other host covered all its ranks and some transfer entered its root's host; its
broadcast starts after that. Transfers staying inside a host leave a rank by one of its arcs
inside the host, so they share the host's intra capacity; crossings share the host's out and
in capacity, and all of them the total crossing capacity. A step with a crossing lasts at
least the least cross-host latency, any other step the least rank-to-rank latency; steps
without crossings other than the first and the last can be dropped without raising the LP
(their intra-host transfers move one step earlier, reduce, or later, broadcast), so only the
first and the last step need to be considered without crossings. The LP's time never rises
with K (an empty step can be added), which bounds whole ranges of K from two solves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import highspy
import numpy as np
from scipy.sparse import csc_matrix
from syncplan.planner.bound_parts import (
    caps,
    cross_host_latency,
    partition_time,
    parts_by_host,
    rank_to_rank_latency,
)

if TYPE_CHECKING:
    from syncplan.planner.algorithms.base import PlanContext

MAX_CLASSES = 8  # classes of alike hosts above which the LP is not solved (it grows with
# classes x steps); the number of hosts only costs the capacities' sums
MAX_CELLS = 48  # host classes x steps of the largest LP solved (16 ms to 0.2 s of HiGHS at
# 48); past it every K is bounded by the partition bound plus its latency alone
TOLERANCE = 1e-4  # relative: ranges of K whose bound is this close to the best stop splitting
GAIN = 1e-3  # relative: where one K's LP and latency are within this of the bound it would
# raise, the search is skipped (it could gain at most that)


class _Rows:
    """A sparse LP built row by row over named variables."""

    def __init__(self) -> None:
        self.index: dict[tuple, int] = {}
        self.r: list[int] = []
        self.c: list[int] = []
        self.v: list[float] = []
        self.lo: list[float] = []
        self.hi: list[float] = []

    def var(self, *key) -> int:
        j = self.index.get(key)
        if j is None:
            j = self.index[key] = len(self.index)
        return j

    def row(self, terms: dict[int, float], lo: float, hi: float) -> None:
        k = len(self.lo)
        for j, x in terms.items():
            self.r.append(k)
            self.c.append(j)
            self.v.append(x)
        self.lo.append(lo)
        self.hi.append(hi)


CUMULATIVE = "XYRBIJCD"  # per host and step, cumulative bytes (fractions of the buffer):
# X reduce crossings out, Y broadcast crossings in, R reduce crossings into the host of the
# byte's root, B broadcast crossings out of it, I / J reduce / broadcast transfers inside the
# host, C / D reduce / broadcast coverage (ranks x bytes)


def _lp(
    steps: int,
    first_intra: bool,
    last_intra: bool,
    ranks: list[int],
    count: list[int],
    out: list[float],
    inn: list[float],
    intra: list[float],
    total: float,
) -> float:
    """The LP's least sum of step times, in units of the capacities' time (inf: no K-step
    program of this pattern). Hosts come in classes of ``count`` alike hosts (the same
    ranks and capacities): the LP is the same under any exchange of alike hosts, so it has
    an optimum that treats them alike (the mean of an optimum's images), and one host
    stands for its class."""
    inf = highspy.kHighsInf
    hosts = range(len(ranks))
    lp = _Rows()
    cum = {(t, h, s): lp.var(t, h, s) for t in CUMULATIVE for h in hosts for s in range(steps)}
    for s in range(steps):
        lp.var("u", s)
    u = [lp.index["u", s] for s in range(steps)]

    def inc(t: str, h: int, s: int) -> dict[int, float]:
        d = {cum[t, h, s]: 1.0}
        if s > 0:
            d[cum[t, h, s - 1]] = -1.0
        return d

    def add(*parts: tuple[float, dict[int, float]]) -> dict[int, float]:
        out_: dict[int, float] = {}
        for k, d in parts:
            for j, x in d.items():
                out_[j] = out_.get(j, 0.0) + k * x
        return out_

    root = {h: lp.var("x", h) for h in hosts}
    done = {(h, s): lp.var("F", h, s) for h in hosts for s in range(steps)}
    lp.row({root[h]: float(count[h]) for h in hosts}, 1.0, 1.0)
    last = steps - 1
    crossing = "XYRB"
    for h in hosts:
        g = float(ranks[h])
        lp.row({cum["C", h, last]: 1.0, root[h]: g}, g, g)
        lp.row({cum["D", h, last]: 1.0, root[h]: g}, g, g)
        lp.row({done[h, steps - 2]: 1.0, root[h]: -1.0}, 0.0, 0.0)  # reduced before the end
        lp.row({cum["B", h, last]: 1.0, root[h]: -1.0}, 0.0, inf)
        others = [(k, float(count[k] - (k == h))) for k in hosts if count[k] > (k == h)]
        for s in range(steps):
            for t in CUMULATIVE:
                fixed = (
                    (t in "YB" and s == 0)
                    or (t in "XR" and s == last)
                    or (first_intra and s == 0 and t in crossing)
                    or (last_intra and s == last and t in crossing)
                )
                lp.row(inc(t, h, s), 0.0, 0.0 if fixed else inf)
            lp.row(add((1, inc("C", h, s)), (-g, inc("X", h, s))), -inf, 0.0)
            lp.row(add((1, inc("D", h, s)), (-g, inc("Y", h, s))), -inf, 0.0)
            reduce = {cum["C", h, s]: 1.0, cum["X", h, s]: -1.0}
            if s > 0:
                reduce[cum["I", h, s - 1]] = -1.0
            lp.row(reduce, -inf, 0.0)
            bcast = add(
                (1, {cum["D", h, last]: 1.0}),
                (-1, {cum["Y", h, last]: 1.0}),
                (-1, {cum["J", h, last]: 1.0}),
                (1, {cum["J", h, s]: 1.0}),
            )
            if s > 0:
                bcast = add(
                    (1, bcast), (-1, {cum["D", h, s - 1]: 1.0}), (1, {cum["Y", h, s - 1]: 1.0})
                )
            lp.row(bcast, -inf, 0.0)
            covered = {done[k, s]: g * m for k, m in others}
            covered[cum["C", h, s]] = -1.0
            lp.row(covered, -inf, 0.0)
            heard = {cum["D", h, s]: 1.0}
            if s > 0:
                heard.update({done[k, s - 1]: -g * m for k, m in others})
            lp.row(heard, -inf, 0.0)
            lp.row({done[h, s]: 1.0, cum["R", h, s]: -1.0}, -inf, 0.0)
            lp.row({done[h, s]: 1.0, root[h]: -1.0}, -inf, 0.0)
            if s > 0:
                lp.row({done[h, s]: 1.0, done[h, s - 1]: -1.0}, 0.0, inf)
            lp.row(add((1, inc("X", h, s)), (1, inc("B", h, s)), (-out[h], {u[s]: 1.0})), -inf, 0.0)
            lp.row(add((1, inc("Y", h, s)), (1, inc("R", h, s)), (-inn[h], {u[s]: 1.0})), -inf, 0.0)
            lp.row(
                add((1, inc("I", h, s)), (1, inc("J", h, s)), (-intra[h], {u[s]: 1.0})), -inf, 0.0
            )
    for s in range(steps):
        parts = [(float(count[h]), inc(t, h, s)) for h in hosts for t in "XY"]
        lp.row(add(*parts, (-total, {u[s]: 1.0})), -inf, 0.0)
    n = len(lp.index)
    matrix = csc_matrix((lp.v, (lp.r, lp.c)), shape=(len(lp.lo), n))
    cost = np.zeros(n)
    cost[u] = 1.0
    model = highspy.HighsLp()
    model.num_col_, model.num_row_ = n, len(lp.lo)
    model.col_cost_ = cost
    model.col_lower_ = np.zeros(n)
    model.col_upper_ = np.full(n, inf)
    model.row_lower_ = np.asarray(lp.lo)
    model.row_upper_ = np.asarray(lp.hi)
    model.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    model.a_matrix_.start_ = matrix.indptr
    model.a_matrix_.index_ = matrix.indices
    model.a_matrix_.value_ = matrix.data
    from syncplan.planner.algorithms.packing import quiet_highs as _highs

    solver = _highs()
    solver.passModel(model)
    solver.run()
    if solver.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return float("inf")
    return float(solver.getInfo().objective_function_value)


def _fluid(count: list[int], out: list[float], inn: list[float], total: float) -> float:
    """The LP without steps (every step's rows summed), a floor under its value at any K:
    each host sends every byte rooted elsewhere out and hears it back at least once, and
    each byte rooted in it comes in and goes out at least once."""
    from scipy.optimize import linprog

    n = len(count)
    # columns: x, X, Y, R, B (n each), then u
    col = {name: k * n for k, name in enumerate("xXYRB")}
    u = 5 * n
    rows, rhs = [], []
    for c in range(n):
        for name, sign in (("X", 1), ("Y", 1), ("R", -1), ("B", -1)):
            r = np.zeros(u + 1)  # -(name) - sign * x <= -1 (X, Y) or 0 (R, B)
            r[col[name] + c] = -1.0
            r[col["x"] + c] = -sign
            rows.append(r)
            rhs.append(-1.0 if sign > 0 else 0.0)
        for a, b, cap in (("X", "B", out[c]), ("Y", "R", inn[c])):
            r = np.zeros(u + 1)
            r[col[a] + c] = r[col[b] + c] = 1.0
            r[u] = -cap
            rows.append(r)
            rhs.append(0.0)
    r = np.zeros(u + 1)
    for c in range(n):
        r[col["X"] + c] = r[col["Y"] + c] = count[c]
    r[u] = -total
    rows.append(r)
    rhs.append(0.0)
    eq = np.zeros((1, u + 1))
    eq[0, :n] = count
    cost = np.zeros(u + 1)
    cost[u] = 1.0
    res = linprog(
        cost,
        A_ub=np.asarray(rows),
        b_ub=rhs,
        A_eq=eq,
        b_eq=[1.0],
        bounds=[(0, None)] * (u + 1),
        method="highs",
    )
    return float(res.fun) if res.status == 0 else 0.0


def _least(lp, charge, first: int, part: float, most: int) -> float:
    """A lower bound on min over K >= first of lp(K) + charge(K), where lp never rises with
    K and is at least ``part``: lp at a few K, then ranges [a, b] bounded by lp(b) +
    charge(a + 1), split while they could hold a lower value than the best found."""
    seen: dict[int, float] = {}

    def at(k: int) -> float:
        if k not in seen:
            seen[k] = lp(k)
        return seen[k]

    best = at(first) + charge(first)
    k = first
    while part + charge(k + 1) < best and k < most:
        k = min(2 * k, most)
        best = min(best, at(k) + charge(k))
    low = part + charge(k + 1)  # every K past the last one solved
    ranges = [(a, b) for a, b in zip(sorted(seen)[:-1], sorted(seen)[1:], strict=True)]
    while ranges:
        a, b = ranges.pop()
        if b - a <= 1:
            continue
        bound = at(b) + charge(a + 1)
        if bound >= best * (1 - TOLERANCE):
            low = min(low, bound)
            continue
        mid = (a + b) // 2
        best = min(best, at(mid) + charge(mid))
        ranges += [(a, mid), (mid, b)]
    return min(best, low)


def fill_bound(ctx: PlanContext, beat: float = 0.0) -> float:
    """Seconds no reduce-then-broadcast program beats on ``ctx``'s hosts, latency included
    (0.0 where the LP does not apply: one host, every host one rank, more than MAX_CLASSES
    classes of alike hosts, or where it cannot be more than GAIN above ``beat``: one step
    count's LP and latency already cost no more). Memoised on the context."""
    groups = ctx.host_groups
    if len(groups) < 2 or max(len(g) for g in groups) < 2:
        return 0.0
    memo = ctx.memo.get("bound_fill", {}).get(beat)
    if memo is not None:
        return memo
    parts = parts_by_host(ctx)
    part_s = partition_time(ctx, parts)
    if part_s <= 0 or not np.isfinite(part_s):
        return 0.0
    cross_s, step_s = cross_host_latency(ctx), rank_to_rank_latency(ctx)
    step_s = min(step_s, cross_s)  # so a crossing step is charged at least a quiet one
    graph = ctx.topo.graph
    scale = part_s / float(ctx.size_bytes)  # capacities in buffers per part_s
    part_caps = [caps(ctx, p) for p in parts]
    out = [c[0] * scale for c in part_caps]
    inn = [c[1] * scale for c in part_caps]
    total = min(sum(c[0] for c in part_caps), sum(c[1] for c in part_caps)) * scale
    intra = []
    for part, group in zip(parts, groups, strict=True):
        ranks = [ctx.ranks[i] for i in group]
        o = sum(d["bw"] for r in ranks for _, v, d in graph.out_edges(r, data=True) if v in part)
        i = sum(d["bw"] for r in ranks for v, _, d in graph.in_edges(r, data=True) if v in part)
        intra.append(min(o, i) * scale)

    def charge(k: int, quiet: int) -> float:
        """Latency of K steps, ``quiet`` of them (the first, the last) without crossings."""
        return (k - quiet) * cross_s + quiet * step_s

    kinds: dict[tuple, int] = {}
    for group, o, i, a in zip(groups, out, inn, intra, strict=True):
        key = (len(group), round(o, 12), round(i, 12), round(a, 12))
        kinds[key] = kinds.get(key, 0) + 1
    if len(kinds) > MAX_CLASSES:
        return _remember(ctx, beat, 0.0)
    sizes = [k[0] for k in kinds]
    count = list(kinds.values())
    out, inn, intra = ([k[j] for k in kinds] for j in (1, 2, 3))
    most = max(MAX_CELLS // len(sizes), 4)
    floor = _fluid(count, out, inn, total) * part_s
    # the bound is at most any one K's LP plus its latency: where one is (about) below
    # ``beat``, the search cannot raise the bound (by more than GAIN)
    if _lp(most, True, True, sizes, count, out, inn, intra, total) * part_s + charge(
        most, 2
    ) <= beat * (1 + GAIN):
        return _remember(ctx, beat, 0.0)

    # the pattern whose first and last steps do not cross, exactly; then one LP without that
    # restriction (below every pattern's LP) charged the latency of one quiet step (below
    # the other patterns' latency), which bounds the other three together and, where it
    # stays above the first (large buffers), saves solving them one by one
    def lp(k: int, first: bool, last: bool) -> float:
        return _lp(k, first, last, sizes, count, out, inn, intra, total) * part_s

    best = _least(lambda k: lp(k, True, True), lambda k: charge(k, 2), 4, floor, most)
    others = _least(lambda k: lp(k, False, False), lambda k: charge(k, 1), 2, floor, most)
    if others < best:
        for first, last in ((False, False), (True, False), (False, True)):
            quiet = int(first) + int(last)
            best = min(
                best,
                _least(
                    lambda k, a=first, b=last: lp(k, a, b),
                    lambda k, q=quiet: charge(k, q),
                    2 + quiet,
                    floor,
                    most,
                ),
            )
    return _remember(ctx, beat, best)


def _remember(ctx: PlanContext, beat: float, value: float) -> float:
    ctx.memo.setdefault("bound_fill", {})[beat] = value
    return value
