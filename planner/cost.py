"""The cost model: alpha-beta along routed paths with per-step link sharing.

One step's transfers run concurrently. A transfer of ``b`` bytes over path ``P`` takes
``sum(lat_e for e in P) + max(load_e / bw_e for e in P)``, where ``load_e`` is the bytes that
every transfer of the step puts on arc ``e``: transfers sharing an arc share its bandwidth.
A step lasts as long as its slowest transfer, and at least ``min_step_s`` (the transport's
per-step cost, which it overlaps with moving data); ``message_overhead_s`` (LogP's ``o``) is
paid for the most message ends ``E`` one rank handles in the step (the transfers it sends
plus those it receives). The rank handles them one after another, but only two of them stay
in series with the wire (the receive it waits for and the send it then posts); the others
overlap the wire time of the rest: a step of wire time ``w`` takes ``max(w + o * min(E, 2),
o * E)`` (``overlapped``). With ``message_cores`` set, the ranks share that many CPU cores
(an emulated cluster on one machine), so ``E`` is at least every message end of the step
divided by ``message_cores``: ``max(busiest rank's ends, all ends / message_cores)``.
``exchange_overhead_s`` (0 by default) adds the same count taken over the step's exchanged
transfers only (those whose pair also sends the other way in the step): on gloo/TCP a rank
that posts a message on a connection while its peer's message arrives on it costs more than
one that does not (docs/testbed.md "Issue 18, session 8"). A program is the sum of its steps,
plus, with ``switch_overhead`` (a fraction; 0 by default), that fraction of the wire time of
every step's slowest *switched* transfer: one whose sender sent in the previous non-empty step
but not to this destination (a TCP connection that sat idle while the sender used another
one starts slower than one kept busy: docs/testbed.md "Issue 18, session 9").
See docs/cost-model.md.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from syncplan.core.options import DEFAULT_OPTIONS, PlanOptions
from syncplan.core.program import Program, Transfer
from syncplan.planner.routing import Router


class CostModel:
    """Step and program times under ``options`` (core/options.py) on ``router``'s routes."""

    def __init__(self, router: Router, options: PlanOptions = DEFAULT_OPTIONS) -> None:
        self.router = router
        self.options = options
        self.min_step_s = options.min_step_s
        self.message_overhead_s = options.message_overhead_s
        self.message_cores = options.message_cores  # None: every rank has its own CPU
        self.exchange_overhead_s = options.exchange_overhead_s
        self.switch_overhead = options.switch_overhead
        self._arc_cache: dict[tuple[str, ...], tuple[np.ndarray, float]] = {}

    def _path_arcs(self, path: tuple[str, ...]) -> tuple[np.ndarray, float]:
        hit = self._arc_cache.get(path)
        if hit is None:
            arcs = np.asarray(self.router.arcs(path), dtype=np.int64)
            hit = (arcs, float(self.router.lat[arcs].sum()))
            self._arc_cache[path] = hit
        return hit

    def route(self, ranks: Sequence[str], t: Transfer) -> tuple[str, ...]:
        return t.path if t.path is not None else self.router.path(ranks[t.src], ranks[t.dst])

    def step_time(
        self,
        ranks: Sequence[str],
        step: Sequence[Transfer],
        bytes_per_unit: float,
        weights: np.ndarray | None = None,
    ) -> float:
        """Time of one step; ``weights[i]`` (default 1) scales transfer i's bytes (the
        expected fraction of its units a sparse run sends)."""
        if not step:
            return 0.0
        wires, lats = self.transfer_wires(ranks, step, bytes_per_unit, weights)
        base = max(float((wires + lats).max()), self.min_step_s)
        o, x = self.message_overhead_s, self.exchange_overhead_s
        if o:
            base = overlapped(base, self.message_ends(step), o)
        return base + x * exchange_ends(step, self.message_cores) if x else base

    def transfer_wires(
        self,
        ranks: Sequence[str],
        step: Sequence[Transfer],
        bytes_per_unit: float,
        weights: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per transfer of a non-empty step: its wire time (its bytes' share of its busiest
        arc, the step's transfers sharing every arc) and its path's latency."""
        path_arcs = self._path_arcs
        route = self.route
        arc_lists, lats = [], np.empty(len(step))
        for i, t in enumerate(step):
            arcs, lats[i] = path_arcs(route(ranks, t))
            arc_lists.append(arcs)
        nbytes = (
            np.fromiter((t.hi - t.lo for t in step), dtype=np.float64, count=len(step))
            * bytes_per_unit
        )
        if weights is not None:
            nbytes = nbytes * weights
        counts = np.fromiter(map(len, arc_lists), dtype=np.int64, count=len(step))
        flat = np.concatenate(arc_lists)
        loads = np.bincount(flat, weights=np.repeat(nbytes, counts), minlength=len(self.router.bw))
        ratio = loads[flat] / self.router.bw[flat]
        offsets = np.concatenate(([0], np.cumsum(counts)[:-1]))
        return np.maximum.reduceat(ratio, offsets), lats

    def message_ends(self, step: Sequence[Transfer]) -> float:
        """``message_ends(step, message_cores)``: what the step's overhead is paid for."""
        return message_ends(step, self.message_cores)

    def program_time(self, ranks: Sequence[str], program: Program, size_bytes: float) -> float:
        bpu = size_bytes / program.units
        if self.message_overhead_s or self.exchange_overhead_s:
            total = sum(self.step_time(ranks, step, bpu) for step in program.steps)
        else:
            total = sum(self._wire_step_times(ranks, program.steps, bpu).tolist())
        return total + self.switch_time(ranks, program, bpu) if self.switch_overhead else total

    def _wire_step_times(
        self, ranks: Sequence[str], steps: Sequence[Sequence[Transfer]], bytes_per_unit: float
    ) -> np.ndarray:
        """``step_time`` of every step without message or exchange overhead, for all steps at
        once (the same sums in the same order: equal to the step-by-step figures)."""
        ids: dict = {}  # a pinned path, or (src, dst) for the router's route
        arc_lists: list[np.ndarray] = []
        lat_list: list[float] = []
        path_ids: list[int] = []
        record = path_ids.append
        sizes: list[int] = []
        counts = np.fromiter(map(len, steps), dtype=np.int64, count=len(steps))
        for step in steps:
            for t in step:
                key = t.path if t.path is not None else (t.src, t.dst)
                k = ids.get(key)
                if k is None:
                    k = ids[key] = len(ids)
                    arcs, lat = self._path_arcs(self.route(ranks, t))
                    arc_lists.append(arcs)
                    lat_list.append(lat)
                record(k)
                sizes.append(t.hi - t.lo)
        if not path_ids:
            return np.zeros(len(steps))
        path_lat = np.asarray(lat_list)
        pid = np.asarray(path_ids, dtype=np.int64)
        per_path = np.fromiter(map(len, arc_lists), dtype=np.int64, count=len(arc_lists))
        path_start = np.concatenate(([0], np.cumsum(per_path)[:-1]))
        path_arcs = np.concatenate(arc_lists)
        n_arcs = per_path[pid]  # per transfer
        starts = np.cumsum(n_arcs) - n_arcs  # each transfer's first crossing
        within = np.arange(int(n_arcs.sum())) - np.repeat(starts, n_arcs)
        arc = path_arcs[np.repeat(path_start[pid], n_arcs) + within]  # per crossing
        step_of = np.repeat(np.arange(len(steps)), counts)
        nbytes = np.asarray(sizes, dtype=np.float64) * bytes_per_unit
        narcs = len(self.router.bw)
        key = np.repeat(step_of, n_arcs) * narcs + arc
        loads = np.bincount(key, weights=np.repeat(nbytes, n_arcs))
        ratio = loads[key] / self.router.bw[arc]
        finish = np.maximum.reduceat(ratio, starts) + path_lat[pid]
        out = np.zeros(len(steps))
        live = counts > 0
        step_start = (np.cumsum(counts) - counts)[live]
        out[live] = np.maximum(np.maximum.reduceat(finish, step_start), self.min_step_s)
        return out

    def switch_time(self, ranks: Sequence[str], program: Program, bytes_per_unit: float) -> float:
        """``switch_overhead`` times, summed over the steps, the wire time of each step's
        slowest switched transfer (``switched``)."""
        total, prev = 0.0, None
        for step in program.steps:
            if not step:
                continue
            mask: list[bool] = switched(prev, step) if prev is not None else []
            if any(mask):
                wires, _ = self.transfer_wires(ranks, step, bytes_per_unit)
                total += float(wires[np.asarray(mask)].max())
            prev = step
        return self.switch_overhead * total


def overlapped(wire_s: float, ends: float, overhead_s: float) -> float:
    """A step of ``wire_s`` seconds on the wire (at least the step floor) whose busiest rank
    handles ``ends`` message ends at ``overhead_s`` each: two of them in series with the
    wire, the rest while it runs, ``max(wire_s + o * min(ends, 2), o * ends)``."""
    return max(wire_s + overhead_s * min(ends, 2.0), overhead_s * ends)


def message_ends(step: Sequence[Transfer], message_cores: int | None = None) -> float:
    """The most transfers one rank sends plus receives in ``step``, or, with
    ``message_cores``, all the step's message ends (2 per transfer) over ``message_cores``
    when that is more: the messages a step's per-message overhead is paid for."""
    if not step:
        return 0.0
    ends = np.fromiter(
        (r for t in step for r in (t.src, t.dst)), dtype=np.int64, count=2 * len(step)
    )
    busiest = float(np.bincount(ends).max())
    if message_cores:
        busiest = max(busiest, 2 * len(step) / message_cores)
    return busiest


def exchange_ends(step: Sequence[Transfer], message_cores: int | None = None) -> float:
    """``message_ends`` over the step's exchanged transfers: those whose destination also
    sends to their source in the step (0 when no pair exchanges both ways)."""
    pairs = {(t.src, t.dst) for t in step}
    return message_ends([t for t in step if (t.dst, t.src) in pairs], message_cores)


def switched(prev: Sequence[Transfer], step: Sequence[Transfer]) -> list[bool]:
    """Per transfer of ``step``: whether its sender sends in ``prev`` (the previous non-empty
    step) but not to its destination, i.e. starts on a connection it left idle."""
    sent: dict[int, set[int]] = {}
    for t in prev:
        sent.setdefault(t.src, set()).add(t.dst)
    return [t.src in sent and t.dst not in sent[t.src] for t in step]
