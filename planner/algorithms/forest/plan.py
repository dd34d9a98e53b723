"""One tree set of the host-structured forest: routed loads, LP shares, phase profile."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

import numpy as np
from syncplan.planner.algorithms.base import PlanContext
from syncplan.planner.algorithms.forest.lanes import Arcs, Lane
from syncplan.planner.algorithms.forest.routes import EdgeKey, RouteDag, spread
from syncplan.planner.algorithms.forest.shares import balance_phases, solve_shares
from syncplan.planner.algorithms.forest.trees import HostTree

Path = tuple[str, ...]

# ---- shares (LP) and pieces ---------------------------------------------------------------


class HostPlan:
    """One choice of trees: their routed loads, shares, and the per-arc phase profile.

    Trees of a lane may start later than the lane's first tree (``shift``): staggering the
    trees spreads each NIC's reduce and broadcast bytes over more steps, so the busiest arc
    changes less from step to step and the pipeline's fill and drain cost less.
    """

    w: np.ndarray  # share per tree: set by solve_shares
    busy_arcs: np.ndarray  # the busiest arcs of the fluid optimum: set by solve_shares

    def __init__(
        self,
        ctx: PlanContext,
        lanes: list[Lane],
        trees: list[HostTree],
        arcs: Arcs,
        split_intra: bool = False,
        late: bool = True,
    ) -> None:
        self.ctx, self.lanes, self.trees, self.arcs = ctx, lanes, trees, arcs
        # spread routes of tree edges between switches: (id(tree), a, b) -> route
        self.routes: dict[EdgeKey, Path] = {}
        self.split_intra = split_intra and late
        self.late = late
        self.hmax = max((max(tr.height) for tr in trees), default=0)
        self.base_offsets = 2 * self.hmax + 2
        self.shift = np.zeros(len(trees), dtype=np.int64)
        self.offsets = self.base_offsets
        self._core: dict[tuple[str, str], Path] = {}
        self.flat_entries: tuple[np.ndarray, ...] | None = None

    def set_stagger(self, width: int) -> None:
        """Tree k of each lane starts ``k mod width`` steps after the lane's first tree."""
        seen: dict[int, int] = defaultdict(int)
        for j, tr in enumerate(self.trees):
            self.shift[j] = seen[tr.lane] % width
            seen[tr.lane] += 1
        self.offsets = self.base_offsets + int(self.shift.max(initial=0))

    @staticmethod
    def _ends(lane: Lane, a: int, b: int) -> tuple[Path, Path]:
        """The way out of host a and the way into host b of a tree edge a -> b in ``lane``."""
        up, down = lane.up[a], lane.down[b]
        if up[-1] != down[0] and (a in lane.detour) != (b in lane.detour):
            if b in lane.detour:
                up = lane.exits[a].get(down[0], (up,))[0]
            else:
                down = lane.exits[b].get(up[-1], (None, down))[1]
        return up, down

    def edge_path(self, lane: Lane, a: int, b: int, tree: HostTree | None = None) -> Path:
        """Route from the port of host a to the port of host b (of ``tree``: its spread
        route between the switches, where ``spread_routes`` set one)."""
        up, down = self._ends(lane, a, b)
        if up[-1] == down[0]:
            return up + down[1:]
        core = self.routes.get((id(tree), a, b)) if tree is not None else None
        if core is None:
            key = (up[-1], down[0])
            core = self._core.get(key)
            if core is None:
                core = self._core[key] = self.ctx.router.path(*key)
        return up + core[1:] + down[1:]

    def spread_routes(self, w: np.ndarray | None = None) -> bool:
        """Route tree edges between switches over the least loaded of the routes no longer in
        latency than the router's (forest.routes), tree j weighted by ``w[j]`` (default:
        equal shares); return whether any edge has a choice."""
        dag = self.ctx.memo.get("forest_route_dag")
        if dag is None:
            dag = self.ctx.memo["forest_route_dag"] = RouteDag(self.ctx.router)
        nt = len(self.trees)
        w = np.full(nt, 1.0 / max(nt, 1)) if w is None else w
        self.routes = {}
        self.flat_entries = None
        arc, col, *_ = self.arc_entries()
        lane_w = np.zeros(len(self.lanes))
        np.add.at(lane_w, [tr.lane for tr in self.trees], w)
        bw = self.ctx.router.bw
        pairs = []
        skip: dict[int, list[np.ndarray]] = defaultdict(list)  # per tree index
        for j, tr in enumerate(self.trees):
            lane = self.lanes[tr.lane]
            for c, q in enumerate(tr.parent):
                if q < 0:
                    continue
                for a, b in ((c, q), (q, c)):
                    up, down = self._ends(lane, a, b)
                    if up[-1] != down[0] and dag.alternatives(up[-1], down[0]):
                        pairs.append(((id(tr), a, b), up[-1], down[0], float(w[j])))
                        core = self.ctx.router.path(up[-1], down[0])
                        skip[j].append(np.asarray(self.ctx.router.arcs(core), dtype=np.int64))
        if not pairs:
            return False
        weight = np.concatenate([w, lane_w])[col]
        base = np.bincount(arc, weights=weight, minlength=len(bw))
        for j, ids in skip.items():  # the router's routes of the edges being spread
            for core_arcs in ids:
                np.subtract.at(base, core_arcs, w[j])
        self.routes = spread(pairs, dag, np.maximum(base, 0.0) / bw)
        self.flat_entries = None
        return True

    def offsets_of(self, j: int) -> tuple[list[int], list[int]]:
        """Per host of tree j: the offset at which its port sends its partial sum up (the root:
        H + 1, when it starts the broadcast) and at which it hears the result.

        ``late``: a port at depth k sends at H + 1 - k, as late as its parent can use it, and
        hears at H + k; reduce and broadcast are mirror images (send + hear = 2 H + 1).
        Otherwise a port sends at 1 + its height and hears at H + k."""
        tr, hmax = self.trees[j], self.hmax
        if not self.late:
            return [1 + h for h in tr.height], [hmax + d for d in tr.depth]
        send = [0] * len(tr.parent)
        send[tr.root] = hmax + 1
        children: list[list[int]] = [[] for _ in tr.parent]
        for c, q in enumerate(tr.parent):
            if q >= 0:
                children[q].append(c)
        order = [tr.root]
        for q in order:
            for c in children[q]:
                send[c] = send[q] - 1
                order.append(c)
        return send, [2 * hmax + 1 - x for x in send]

    def phases(self, j: int) -> list[tuple[int, int, int, bool, Path]]:
        """Network transfers of tree j: (offset, src rank, dst rank, reduce, path), at the
        offsets of ``offsets_of``."""
        tr, lane = self.trees[j], self.lanes[self.trees[j].lane]
        s = int(self.shift[j])
        send, hear = self.offsets_of(j)
        out = []
        for c, q in enumerate(tr.parent):
            if q < 0:
                continue
            out.append(
                (s + send[c], lane.ports[c], lane.ports[q], True, self.edge_path(lane, c, q, tr))
            )
            out.append(
                (s + hear[c], lane.ports[q], lane.ports[c], False, self.edge_path(lane, q, c, tr))
            )
        return out

    def tree_intra(self, j: int) -> list[tuple[int, int, int, bool, Path]]:
        """Split intra-host transfers of tree j: a host gathers its ranks' values one offset
        before it sends (when its children's sums arrive) and hands the result back one
        offset after it hears (when it forwards it to its children)."""
        if not self.split_intra:
            return []
        lane = self.lanes[self.trees[j].lane]
        s = int(self.shift[j])
        send, hear = self.offsets_of(j)
        out = []
        for h, port in enumerate(lane.ports):
            for r, path in lane.leaves_in[h]:
                out.append((s + send[h] - 1, r, port, True, path))
            for r, path in lane.leaves_out[h]:
                out.append((s + hear[h] + 1, port, r, False, path))
        return out

    def intra(self, li: int) -> list[tuple[int, int, int, bool, Path]]:
        """Merged intra-host transfers of lane li (all its trees): gather at offset 0, hand
        back at the last offset; none when intra-host transfers are split per tree."""
        if self.split_intra:
            return []
        lane = self.lanes[li]
        out = []
        for h, port in enumerate(lane.ports):
            for r, path in lane.leaves_in[h]:
                out.append((0, r, port, True, path))
            for r, path in lane.leaves_out[h]:
                out.append((self.offsets - 1, port, r, False, path))
        return out

    def arc_entries(self) -> tuple[np.ndarray, ...]:
        """Every arc crossing of every tree at shift 0, flattened: (arc, column, offset,
        path latency, is-final-intra); column j < trees is tree j, trees + l is lane l's
        intra-host transfers."""
        if self.flat_entries is not None:
            return self.flat_entries
        nt = len(self.trees)
        arc_l: list[np.ndarray] = []
        meta: list[tuple[int, int, float, bool]] = []

        def add(col: int, items: list, final: bool) -> None:
            for off, _, _, _, path in items:
                ids, plat = self.arcs(path)
                arc_l.append(ids)
                meta.append((col, off, plat, final and off > 0))

        saved = self.shift.copy()
        self.shift[:] = 0
        for j in range(nt):
            add(j, self.phases(j), False)
            add(j, self.tree_intra(j), False)
        self.shift[:] = saved
        for li in range(len(self.lanes)):
            add(nt + li, self.intra(li), True)
        counts = np.fromiter((len(a) for a in arc_l), dtype=np.int64, count=len(arc_l))
        cols, offs, lats, finals = (
            np.repeat(np.asarray(x), counts) for x in zip(*meta, strict=True)
        )
        self.flat_entries = (np.concatenate(arc_l), cols, offs, lats, finals)
        return self.flat_entries

    def solve_shares(self) -> float:
        """Set ``self.w`` (share per tree) minimising the busiest arc; return its time per
        byte of buffer (the fluid time / size): forest.shares."""
        return solve_shares(self)

    def leaf_bound(self) -> bool:
        """Whether a busiest arc of the fluid optimum carries intra-host leaf transfers."""
        arc, col, *_ = self.arc_entries()
        leaf_arcs = arc[col >= len(self.trees)]
        return bool(np.isin(self.busy_arcs, leaf_arcs).any())

    def balance_phases(self, fluid: float, slack: float = 1e-4) -> None:
        """Among shares within ``slack`` of the fluid optimum, pick ones whose pipeline fill
        and drain are cheapest (forest.shares)."""
        balance_phases(self, fluid, slack)

    def profile(self) -> tuple[np.ndarray, np.ndarray]:
        """Per distinct arc profile: seconds per byte of buffer in each phase offset, then in
        the lanes' merged intra-host gather and hand-back (two more columns, placed per group
        of pieces by ``model_time``), and the largest path latency through the arc in each
        (-inf where unused)."""
        nt, no = len(self.trees), self.offsets
        bw = self.ctx.router.bw
        narcs = len(bw)
        arc, col, off, plat, last = self.arc_entries()
        lane_w = np.zeros(len(self.lanes))
        np.add.at(lane_w, [tr.lane for tr in self.trees], self.w)
        weight = np.concatenate([self.w, lane_w])[col]
        off = np.where(
            col < nt, off + self.shift[np.minimum(col, nt - 1)], np.where(last, no + 1, no)
        )
        live = weight > 0
        idx = arc[live] * (no + 2) + off[live]
        load: np.ndarray = np.bincount(idx, weights=weight[live], minlength=narcs * (no + 2))
        lat: np.ndarray = np.full(narcs * (no + 2), -np.inf)
        np.maximum.at(lat, idx, plat[live])
        load = load.reshape(narcs, no + 2) / bw[:, None]
        lat = lat.reshape(narcs, no + 2)
        keep = np.isfinite(lat).any(axis=1)
        table = np.hstack([load[keep], lat[keep]])
        table = np.unique(np.round(table, 15), axis=0)
        return table[:, : no + 2], table[:, no + 2 :]

    def transfer_counter(self) -> Callable[[int, int], int]:
        """(pieces, group) -> transfers of a program of that many pieces whose merged
        intra-host transfers each cover ``group`` consecutive pieces."""
        per_piece = self.transfers_per_piece()
        intra = (
            0
            if self.split_intra
            else sum(
                2 * sum(len(x) for x in self.lanes[li].leaves_in)
                for li in {self.trees[j].lane for j in range(len(self.trees)) if self.w[j] > 0}
            )
        )
        return lambda pieces, group: pieces * (per_piece - intra) + -(-pieces // group) * intra

    def transfers_per_piece(self, all_trees: bool = False) -> int:
        """Transfers one piece adds (``all_trees``: before shares are known)."""
        live = [j for j in range(len(self.trees)) if all_trees or self.w[j] > 0]
        lanes_used = {self.trees[j].lane for j in live}
        net = sum(2 * (len(self.trees[j].parent) - 1) for j in live)
        if not self.split_intra:
            return net + sum(2 * sum(len(x) for x in self.lanes[li].leaves_in) for li in lanes_used)
        by_lane: dict[int, list[int]] = defaultdict(list)
        for j in live:
            by_lane[self.trees[j].lane].append(j)
        for li, js in by_lane.items():  # build_program merges runs of equal offsets
            shift = self.shift[js][:, None]
            send = np.array([self.offsets_of(j)[0] for j in js])
            runs = (
                (np.diff(shift - send, axis=0) != 0).sum(axis=0)
                + (np.diff(shift + send, axis=0) != 0).sum(axis=0)
                + 2
            )
            net += int(runs @ np.array([len(x) for x in self.lanes[li].leaves_in]))
        return net
