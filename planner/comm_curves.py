"""Communication times of a job's buckets: the programs planned at a few anchor sizes, each
split into a reduce-scatter and an all-gather, priced by the cost model on a size grid
(planner.schedule reads them; see its docstring)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from syncplan.core.errors import InfeasibleError, RequestError
from syncplan.core.options import DEFAULT_OPTIONS, PlanOptions
from syncplan.core.program import Program, program_to_doc
from syncplan.planner.algorithms import ALGORITHMS, PlanContext
from syncplan.planner.bound import lower_bound
from syncplan.planner.bound_collectives import collective_bound
from syncplan.planner.collectives import split_allreduce
from syncplan.planner.cost import CostModel
from syncplan.planner.plan_doc import PLAN_FORMAT_VERSION, with_routes
from syncplan.planner.topology import Topology

MAX_ANCHORS = 8
GRID = 64  # sizes at which the DP reads communication times
# programs within this share of the cheapest are ties, settled by _Prog.rank_key: on gloo/TCP
# over the shaped testbed a direct exchange (each rank sending to all others at once) ran
# 1.5-20x its price and halving-doubling (halves, quarters, ...) 1.2-2.2x, where a ring of
# the same price ran within 2 % of it
TIE = 0.01
KINDS = ("allreduce", "reducescatter", "allgather")


@dataclass
class _Prog:
    """A program and, per step, each transfer's latency and seconds per buffer byte: under
    the cost model a step lasts max(min_step, max over transfers of lat + size * slope)."""

    algorithm: str
    program: Program
    shards: list[tuple[int, int]] | None
    lat: np.ndarray  # concatenated over steps
    slope: np.ndarray
    step_of: np.ndarray  # step index of each entry
    fan: int = 1  # most messages one rank sends or receives in one step
    nsteps: int = 0
    ends: np.ndarray | None = None  # per step index, the cost model's message ends (message_ends)
    largest: float = 0.0  # the largest message, as a share of the buffer

    @property
    def rank_key(self) -> tuple[int, float, int]:
        """Tie-break among programs the cost model prices alike (see ``TIE``): fewer
        concurrent messages per rank, then smaller messages, then fewer steps."""
        return (self.fan, round(self.largest, 9), self.nsteps)

    @classmethod
    def of(
        cls,
        algorithm: str,
        program: Program,
        shards: list[tuple[int, int]] | None,
        cost: CostModel,
        ranks: list[str],
    ) -> _Prog:
        lats, slopes, steps = [], [], []
        bw = cost.router.bw
        fan = 1
        ends = np.zeros(len(program.steps))
        for k, step in enumerate(program.steps):
            if not step:
                continue
            busiest = 1
            for end in ("src", "dst"):
                count: dict[int, int] = {}
                for t in step:
                    r = getattr(t, end)
                    count[r] = count.get(r, 0) + 1
                busiest = max(busiest, max(count.values()))
            fan, ends[k] = max(fan, busiest), cost.message_ends(step)
            arcs = [cost._path_arcs(cost.route(ranks, t)) for t in step]
            nbytes = np.array([(t.hi - t.lo) / program.units for t in step])
            loads = np.zeros(len(bw))
            for (a, _), b in zip(arcs, nbytes, strict=True):
                np.add.at(loads, a, b)
            for (a, lat), _ in zip(arcs, step, strict=True):
                lats.append(lat)
                slopes.append(float((loads[a] / bw[a]).max()))
                steps.append(k)
        return cls(
            algorithm,
            program,
            shards,
            np.array(lats),
            np.array(slopes),
            np.array(steps, dtype=np.int64),
            fan,
            sum(1 for s in program.steps if s),
            ends,
            max(
                ((t.hi - t.lo) / program.units for step in program.steps for t in step), default=0.0
            ),
        )

    def times(
        self, sizes: np.ndarray, min_step_s: float, message_overhead_s: float = 0.0
    ) -> np.ndarray:
        """Cost-model time of the program at each of ``sizes`` bytes, with
        ``message_overhead_s`` per message end the cost model charges (``ends``), two per
        step in series with the wire and the rest overlapping it (``cost.overlapped``)."""
        if not len(self.lat):
            return np.zeros(len(sizes))
        per = self.lat[:, None] + self.slope[:, None] * sizes[None, :]
        nsteps = int(self.step_of.max()) + 1
        step_max = np.full((nsteps, len(sizes)), -np.inf)
        np.maximum.at(step_max, self.step_of, per)
        used = np.isfinite(step_max[:, 0])
        base = np.maximum(step_max[used], min_step_s)
        if message_overhead_s and self.ends is not None:
            e = self.ends[:nsteps][used][:, None]
            base = np.maximum(
                base + message_overhead_s * np.minimum(e, 2.0), message_overhead_s * e
            )
        return base.sum(axis=0)


class CommCurves:
    """Per kind, the programs found at the anchor sizes, and their times on a size grid."""

    def __init__(
        self,
        topo: Topology,
        ranks: list[str],
        lo: int,
        hi: int,
        *,
        anchors: int = 4,
        algorithms: Sequence[str] | None = None,
        options: PlanOptions = DEFAULT_OPTIONS,
    ) -> None:
        if not 1 <= anchors <= MAX_ANCHORS:
            raise RequestError(f"anchors must be in [1, {MAX_ANCHORS}], got {anchors}")
        if options.message_overhead_s > 1:
            raise RequestError("message_overhead_s must be in [0, 1] s")
        self.topo, self.ranks, self.options = topo, ranks, options
        self.min_step_s = min_step_s = options.min_step_s
        self.message_overhead_s = message_overhead_s = options.message_overhead_s
        self.message_cores = options.message_cores
        base = PlanContext.create(topo, ranks, max(hi, 1), options=options)
        self.router, self.cost = base.router, base.cost
        sizes = sorted({int(x) for x in np.geomspace(max(lo, 1), max(hi, lo, 1), anchors)})
        self.solves = 0
        self.progs: dict[str, list[_Prog]] = {k: [] for k in KINDS}
        for size in sizes:
            ctx = PlanContext.create(topo, ranks, size, options=options, router=self.router)
            for name in algorithms or list(ALGORITHMS):
                try:
                    program = ALGORITHMS[name](ctx).build()
                except InfeasibleError:
                    continue
                self.solves += 1
                self.progs["allreduce"].append(self._prog(name, program, None))
                try:
                    split = split_allreduce(program, len(ranks), name)
                except InfeasibleError:
                    continue
                self.progs["reducescatter"].append(self._prog(name, split.rs, split.shards))
                self.progs["allgather"].append(self._prog(name, split.ag, split.shards))
        if not self.progs["allreduce"]:
            raise InfeasibleError("no algorithm can serve these ranks")
        self.grid = np.geomspace(max(lo, 1), max(hi, lo + 1, 2), GRID)
        self._log_grid = np.log(self.grid)
        self.table: dict[str, np.ndarray | None] = {k: None for k in KINDS}
        ov = message_overhead_s
        ar = np.array([p.times(self.grid, min_step_s, ov) for p in self.progs["allreduce"]])
        self.table["allreduce"] = ar[
            self._pick(ar, self.progs["allreduce"]), np.arange(len(self.grid))
        ]
        if self.progs["reducescatter"]:
            # a DeAR bucket runs a reduce-scatter and the all-gather of the same split (the
            # same shards): per size, the pair with the least sum
            rs = np.array([p.times(self.grid, min_step_s, ov) for p in self.progs["reducescatter"]])
            ag = np.array([p.times(self.grid, min_step_s, ov) for p in self.progs["allgather"]])
            pick = self._pick(rs + ag, self._pairs())
            cols = np.arange(len(self.grid))
            self.table["reducescatter"], self.table["allgather"] = rs[pick, cols], ag[pick, cols]

    def _pairs(self) -> list[_Prog]:
        """Per reduce-scatter / all-gather pair, the half that ranks it (the larger fan)."""
        return [
            max(a, b, key=lambda p: p.rank_key)
            for a, b in zip(self.progs["reducescatter"], self.progs["allgather"], strict=True)
        ]

    @staticmethod
    def _pick(times: np.ndarray, progs: list[_Prog]) -> np.ndarray:
        """Per column of ``times`` (programs x sizes), the program to use: the lowest
        rank_key among those within TIE of the cheapest."""
        ok = times <= times.min(axis=0) * (1 + TIE) + 1e-12
        order = sorted(range(len(progs)), key=lambda i: progs[i].rank_key)
        pick = np.full(times.shape[1], -1)
        for i in order[::-1]:  # the best-ranked candidate written last
            pick[ok[i]] = i
        return pick

    def _prog(self, name: str, program: Program, shards: list[tuple[int, int]] | None) -> _Prog:
        return _Prog.of(name, program, shards, self.cost, self.ranks)

    def best(self, kind: str, size: float) -> tuple[_Prog, float]:
        """The cheapest program of ``kind`` at ``size`` bytes and its cost-model time."""
        if not self.progs[kind]:
            raise InfeasibleError(f"no {kind} program: no algorithm splits at its roots")
        at = np.array([float(size)])
        if kind == "allreduce":
            times = np.array(
                [p.times(at, self.min_step_s, self.message_overhead_s) for p in self.progs[kind]]
            )
            prog = self.progs[kind][int(self._pick(times, self.progs[kind])[0])]
        else:  # the pair (same split, same shards) with the least reduce-scatter + all-gather
            ov = self.message_overhead_s
            times = np.array(
                [
                    a.times(at, self.min_step_s, ov) + b.times(at, self.min_step_s, ov)
                    for a, b in zip(
                        self.progs["reducescatter"], self.progs["allgather"], strict=True
                    )
                ]
            )
            prog = self.progs[kind][int(self._pick(times, self._pairs())[0])]
        return prog, self.cost.program_time(self.ranks, prog.program, size)

    def time(self, kind: str, sizes: np.ndarray) -> np.ndarray:
        """Times of ``kind`` at ``sizes`` (interpolated between grid sizes)."""
        table = self.table[kind]
        assert table is not None
        return np.interp(np.log(np.maximum(sizes, 1)), self._log_grid, table)

    def plan_doc(self, kind: str, size: int) -> dict[str, Any]:
        """A plan document (docs/formats.md, Plan document) for ``kind`` at ``size`` bytes."""
        prog, t = self.best(kind, size)
        plain = PlanOptions(min_step_s=self.min_step_s)  # the bound needs no overheads
        ctx = PlanContext.create(self.topo, self.ranks, size, options=plain, router=self.router)
        if kind == "allreduce":
            b = lower_bound(ctx)
            bound = (b.time_s, b.family, b.method, b.bandwidth_s)
        else:
            c = collective_bound(ctx, kind, None, prog.program.units)
            bound = (c.time_s, c.family, c.method, c.bandwidth_s)
        program = program_to_doc(with_routes(prog.program, self.ranks, self.router))
        doc: dict[str, Any] = {
            "plan_id": "",
            "format_version": PLAN_FORMAT_VERSION,
            "algorithm": prog.algorithm,
            "requested_algorithm": "schedule",
            "collective": kind,
            "ranks": list(self.ranks),
            "size_bytes": size,
            "predicted_time_s": t,
            "lower_bound_time_s": bound[0],
            "lower_bound_family": bound[1],
            "lower_bound_method": bound[2],
            "lower_bound_bandwidth_s": bound[3],
            "program": program,
        }
        if prog.shards is not None:
            doc["shards"] = [list(s) for s in prog.shards]
            doc["shards_request"] = "any"
        if self.min_step_s:
            doc["min_step_s"] = self.min_step_s
        if self.message_overhead_s:  # priced into predicted_time_s; the verifier reads it
            doc["message_overhead_s"] = self.message_overhead_s
            if self.message_cores:
                doc["message_cores"] = self.message_cores
        key = json.dumps([self.topo.to_dict(), doc["ranks"], kind, size, program], sort_keys=True)
        doc["plan_id"] = hashlib.sha256(key.encode()).hexdigest()[:20]
        return doc
