"""Independent checker of all-reduce, reduce-scatter, all-gather, broadcast and reduce
programs (plan documents, docs/formats.md, Plan document).

It shares no code with the algorithms: it replays the program symbolically, tracking for
every rank and every elementary segment of the buffer the set of inputs (a bitmask over
ranks) its value holds, and re-derives the time under the documented cost model with its
own routing. It reports the first error: malformed field, path over a missing link,
conflicting writes in a step, an input counted twice, or a rank missing an input.
A reduce-scatter is checked only on the units each rank owns (``shards``); an all-gather
tracks, per rank and segment, whether the value is the owner's. A broadcast is checked as
the all-gather, and a reduce as the reduce-scatter, in which the root owns every unit.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx
from syncplan.core.document import COLLECTIVES, PlanDocument, PlanError
from syncplan.core.options import DEFAULT_OPTIONS, PlanOptions
from syncplan.core.program import Transfer
from syncplan.planner.gc_pause import gc_paused
from syncplan.planner.topology import Topology

Steps = Sequence[Sequence[Transfer]]
__all__ = [
    "COLLECTIVES",
    "VerifyReport",
    "step_exchange_ends",
    "step_features",
    "step_switch_wires",
    "verify_plan",
]
_ROUTE_REF_BYTES = 1 << 20  # routing rule of docs/cost-model.md: minimise lat + 1 MiB / bw


@dataclass(frozen=True)
class VerifyReport:
    ok: bool
    error: str | None
    simulated_time_s: float | None
    steps: int
    transfers: int

    def __bool__(self) -> bool:
        return self.ok


class _Invalid(Exception):
    pass


def verify_plan(
    plan: dict[str, Any],
    topo: Topology,
    *,
    size_bytes: float | None = None,
    options: PlanOptions = DEFAULT_OPTIONS,
) -> VerifyReport:
    """Check that ``plan`` is a correct collective on ``topo``; never raises on bad plans.
    The simulated time uses the cost-model terms of ``options`` (core/options.py; the
    document's own: ``PlanOptions.recorded_in(plan)``)."""
    steps_n = transfers_n = 0
    try:
        with gc_paused():
            doc = _shape(plan, topo)
            ranks, units, steps = doc.ranks, doc.units, doc.steps
            steps_n, transfers_n = len(steps), sum(len(s) for s in steps)
            size = float(size_bytes if size_bytes is not None else plan.get("size_bytes", units))
            owned = doc.owned  # broadcast / reduce: the root owns every unit
            if owned is None or doc.collective in ("reducescatter", "reduce"):
                _replay(ranks, units, steps, owned)
            else:
                _replay_gather(ranks, units, steps, owned)
            sim = _simulate_time(
                topo,
                ranks,
                units,
                steps,
                size,
                options.min_step_s,
                options.message_overhead_s,
                options.message_cores,
                options.exchange_overhead_s,
                options.switch_overhead,
            )
    except _Invalid as exc:
        return VerifyReport(False, str(exc), None, steps_n, transfers_n)
    return VerifyReport(True, None, sim, steps_n, transfers_n)


def _shape(plan: Any, topo: Topology) -> PlanDocument:
    """The document read by the one structural validator (core/document.py), then checked
    against the topology: every rank an endpoint that can hold one, every path over links."""
    try:
        doc = PlanDocument.from_plan(plan)
    except PlanError as exc:
        raise _Invalid(str(exc)) from None
    for i, r in enumerate(doc.ranks):
        if r not in topo.nodes:
            raise _Invalid(f"ranks[{i}] {r!r} is not a node of the topology")
        if not topo.nodes[r].can_hold_rank:
            raise _Invalid(f"ranks[{i}] {r!r} is a {topo.nodes[r].kind}, which cannot hold a rank")
    for k, path in enumerate(doc.routes):
        _check_path(f"program.routes[{k}]", path, topo)
    checked = set(doc.routes)  # paths repeat across pieces: check each once
    for si, step in enumerate(doc.steps):
        for ti, tr in enumerate(step):
            if tr.path is not None and tr.path not in checked:
                _check_path(f"step {si} transfer {ti}", tr.path, topo)
                checked.add(tr.path)
    return doc


def _check_path(where: str, path: tuple[str, ...], topo: Topology) -> None:
    for a, b in itertools.pairwise(path):
        if not topo.graph.has_edge(a, b):
            raise _Invalid(f"{where}: path uses a missing link {a!r} -> {b!r}")


def _segments(units: int, steps: Steps, shards: Sequence[tuple[int, int]] | None) -> list[int]:
    cuts = {0, units}
    for step in steps:
        for t in step:
            cuts.update((t.lo, t.hi))
    for a, b in shards or ():
        cuts.update((a, b))
    return sorted(cuts)


def _owner_of(bounds: list[int], shards: Sequence[tuple[int, int]]) -> list[int]:
    owner = []
    for s in range(len(bounds) - 1):
        owner.append(next(r for r, (a, b) in enumerate(shards) if a <= bounds[s] < b))
    return owner


def _replay_gather(
    ranks: Sequence[str], units: int, steps: Steps, shards: Sequence[tuple[int, int]]
) -> None:
    n = len(ranks)
    bounds = _segments(units, steps, shards)
    seg_of = {b: i for i, b in enumerate(bounds)}
    owner = _owner_of(bounds, shards)
    valid = [[owner[s] == r for s in range(len(owner))] for r in range(n)]
    for si, step in enumerate(steps):
        start = [list(row) for row in valid]
        written: dict[tuple[int, int], int] = {}
        for ti, t in enumerate(step):
            if t.reduce:
                raise _Invalid(f"step {si} transfer {ti}: a gather or broadcast has no reductions")
            for s in range(seg_of[t.lo], seg_of[t.hi]):
                key = (t.dst, s)
                if key in written:
                    raise _Invalid(
                        f"step {si}: conflicting writes to rank {t.dst} units "
                        f"[{bounds[s]}, {bounds[s + 1]}) by transfers "
                        f"{written[key]}, {ti} (a replace must be the only write)"
                    )
                written[key] = ti
                valid[t.dst][s] = start[t.src][s]
    for r in range(n):
        for s, ok in enumerate(valid[r]):
            if not ok:
                raise _Invalid(
                    f"after the last step rank {r} units [{bounds[s]}, "
                    f"{bounds[s + 1]}) do not hold the value of their owner, "
                    f"rank {owner[s]}"
                )


def _replay(
    ranks: Sequence[str],
    units: int,
    steps: Steps,
    shards: Sequence[tuple[int, int]] | None = None,
) -> None:
    """All-reduce (``shards`` None) or reduce-scatter: replay the input bitmasks."""
    n = len(ranks)
    bounds = _segments(units, steps, shards)
    seg_of = {b: i for i, b in enumerate(bounds)}
    nseg = len(bounds) - 1
    # value[r][s]: bitmask of the inputs summed into rank r's value of segment s
    value = [[1 << r] * nseg for r in range(n)]
    for si, step in enumerate(steps):
        incoming: dict[tuple[int, int], list[tuple[int, bool, int]]] = defaultdict(list)
        for ti, t in enumerate(step):
            src, dst = t.src, t.dst
            a, b = seg_of[t.lo], seg_of[t.hi]
            row = value[src]
            for s in range(a, b):
                incoming[(dst, s)].append((row[s], t.reduce, ti))
        for (dst, s), writes in incoming.items():
            lo, hi = bounds[s], bounds[s + 1]
            if len(writes) > 1 and not all(red for _, red, _ in writes):
                tis = ", ".join(str(w[2]) for w in writes)
                raise _Invalid(
                    f"step {si}: conflicting writes to rank {dst} units [{lo}, {hi}) "
                    f"by transfers {tis} (a replace must be the only write)"
                )
            mask = value[dst][s]
            for m, red, ti in writes:
                if not red:
                    mask = m
                    continue
                twice = mask & m
                if twice:
                    who = twice.bit_length() - 1
                    raise _Invalid(
                        f"step {si} transfer {ti}: rank {dst} units [{lo}, {hi}) "
                        f"would count the input of rank {who} twice"
                    )
                mask |= m
            value[dst][s] = mask
    full = (1 << n) - 1
    owner = _owner_of(bounds, shards) if shards is not None else None
    for r in range(n):
        for s in range(nseg):
            if owner is not None and owner[s] != r:
                continue
            missing = full & ~value[r][s]
            if missing or value[r][s] != full:
                who = (missing & -missing).bit_length() - 1
                raise _Invalid(
                    f"after the last step rank {r} units [{bounds[s]}, {bounds[s + 1]})"
                    f" lack the input of rank {who}"
                )


def step_features(
    plan: dict[str, Any],
    topo: Topology,
    *,
    size_bytes: float | None = None,
    message_cores: int | None = None,
) -> list[tuple[float, float]]:
    """Per non-empty step of ``plan`` on ``topo``: (wire time, message ends charged). The
    cost model prices the step ``max(w + o * min(ends, 2), o * ends)`` with ``w = max(wire,
    min_step_s)`` and ``o = message_overhead_s``; the
    ends are the busiest rank's sends plus receives, or with ``message_cores`` at least all
    the step's message ends over that many cores. For fitting those two settings to measured
    times (syncplan/testbed/calibrate.py); ValueError if the plan is not well formed."""
    return [(w, e) for w, e, _, _ in _costs(plan, topo, size_bytes, True, message_cores)]


def step_exchange_ends(
    plan: dict[str, Any], topo: Topology, *, message_cores: int | None = None
) -> list[float]:
    """Per non-empty step of ``plan``: the message ends ``exchange_overhead_s`` is charged
    for (``syncplan.planner.cost.exchange_ends``), aligned with ``step_features``."""
    return [x for _, _, x, _ in _costs(plan, topo, 1.0, True, message_cores)]


def step_switch_wires(
    plan: dict[str, Any], topo: Topology, *, size_bytes: float | None = None
) -> list[float]:
    """Per non-empty step of ``plan``: the wire time of its slowest switched transfer
    (``syncplan.planner.cost.switched``; 0 when none), what ``switch_overhead`` is a fraction of;
    aligned with ``step_features``."""
    return [w for _, _, _, w in _costs(plan, topo, size_bytes, False, None)]


def _costs(
    plan: dict[str, Any],
    topo: Topology,
    size_bytes: float | None,
    count_messages: bool,
    message_cores: int | None,
) -> list[tuple[float, float, float, float]]:
    """``_step_costs`` of a well-formed ``plan`` (ValueError otherwise); the size defaults
    to the plan's."""
    try:
        doc = _shape(plan, topo)
    except _Invalid as exc:
        raise ValueError(str(exc)) from exc
    size = float(size_bytes if size_bytes is not None else plan.get("size_bytes", doc.units))
    return list(
        _step_costs(topo, doc.ranks, doc.units, doc.steps, size, count_messages, message_cores)
    )


def _simulate_time(
    topo: Topology,
    ranks: Sequence[str],
    units: int,
    steps: Steps,
    size: float,
    min_step_s: float,
    message_overhead_s: float = 0.0,
    message_cores: int | None = None,
    exchange_overhead_s: float = 0.0,
    switch_overhead: float = 0.0,
) -> float:
    total = 0.0
    for worst, busiest, exchanged, switch in _step_costs(
        topo,
        ranks,
        units,
        steps,
        size,
        bool(message_overhead_s or exchange_overhead_s),
        message_cores,
    ):
        wire = max(worst, min_step_s)
        if message_overhead_s:  # two ends in series with the wire, the rest overlapping it
            wire = max(wire + message_overhead_s * min(busiest, 2.0), message_overhead_s * busiest)
        total += wire + exchange_overhead_s * exchanged + switch_overhead * switch
    return total


def _step_costs(
    topo: Topology,
    ranks: Sequence[str],
    units: int,
    steps: Steps,
    size: float,
    count_messages: bool,
    message_cores: int | None,
) -> Iterator[tuple[float, float, float, float]]:
    """(wire time, message ends, exchanged message ends, wire time of the slowest switched
    transfer) of every non-empty step; the ends 0 unless ``count_messages``."""
    g = topo.graph
    routes: dict[tuple[str, str], list[str]] = {}

    def route(a: str, b: str) -> list[str]:
        if (a, b) not in routes:
            routes[(a, b)] = nx.shortest_path(
                g, a, b, weight=lambda u, v, d: d["lat"] + _ROUTE_REF_BYTES / d["bw"]
            )
        return routes[(a, b)]

    per_unit = size / units
    arcs_of: dict[tuple[str, ...], tuple[list[tuple[str, str]], float]] = {}

    def arcs_lat(p: Sequence[str]) -> tuple[list[tuple[str, str]], float]:
        key = tuple(p)
        hit = arcs_of.get(key)
        if hit is None:
            arcs = list(itertools.pairwise(key))
            hit = arcs_of[key] = (arcs, sum(g.edges[a]["lat"] for a in arcs))
        return hit

    bw = {(u, v): d["bw"] for u, v, d in g.edges(data=True)}
    prev: Sequence[Transfer] = ()
    for step in steps:
        if not step:
            continue
        loads: dict[tuple[str, str], float] = defaultdict(float)
        paths = []
        for t in step:
            arcs, lat = arcs_lat(t.path or route(ranks[t.src], ranks[t.dst]))
            nbytes = (t.hi - t.lo) * per_unit
            for arc in arcs:
                loads[arc] += nbytes
            paths.append((arcs, lat))
        worst = switch = 0.0
        sent = _sent_to(prev)
        for t, (arcs, lat) in zip(step, paths, strict=True):
            wire = max(loads[a] / bw[a] for a in arcs)
            worst = max(worst, lat + wire)
            if t.src in sent and t.dst not in sent[t.src]:
                switch = max(switch, wire)
        prev = step
        busiest: float = 0
        exchanged: float = 0
        if count_messages:  # messages each rank sends plus receives in the step
            busiest = _ends(step, message_cores)
            pairs = {(t.src, t.dst) for t in step}
            both = [t for t in step if (t.dst, t.src) in pairs]
            exchanged = _ends(both, message_cores) if both else 0
        yield worst, busiest, exchanged, switch


def _sent_to(step: Sequence[Transfer]) -> dict[int, set[int]]:
    """Each sender of ``step`` and the ranks it sends to (``syncplan.planner.cost.switched``)."""
    out: dict[int, set[int]] = defaultdict(set)
    for t in step:
        out[t.src].add(t.dst)
    return out


def _ends(step: Sequence[Transfer], message_cores: int | None) -> float:
    """The most transfers one rank sends plus receives in ``step``, at least all the step's
    ends over ``message_cores`` when that is set (the ranks share those CPU cores)."""
    handled: dict[int, int] = defaultdict(int)
    for t in step:
        handled[t.src] += 1
        handled[t.dst] += 1
    busiest: float = max(handled.values())
    if message_cores:
        busiest = max(busiest, 2 * len(step) / message_cores)
    return busiest
