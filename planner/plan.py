"""From a topology and a request to a plan document (docs/formats.md, Plan request/document)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from functools import cached_property, partial
from typing import Any

from syncplan.core.errors import InfeasibleError, RequestError
from syncplan.core.program import Program, program_to_doc
from syncplan.planner.algorithms import ALGORITHMS, OUTSIDE_REDUCE_BROADCAST, Candidate, PlanContext
from syncplan.planner.algorithms.base import EFFORTS
from syncplan.planner.bound import Bound, lower_bound
from syncplan.planner.bound_any import AnyBound, lower_bound_any
from syncplan.planner.collectives import make_collective_plan
from syncplan.planner.cost import CostModel
from syncplan.planner.gc_pause import gc_paused
from syncplan.planner.plan_doc import PLAN_FORMAT_VERSION, TIE_TOLERANCE, plan_id, with_routes
from syncplan.planner.routing import Router
from syncplan.planner.sparse import Density
from syncplan.planner.sparse import choose as choose_sparse
from syncplan.planner.topology import Topology

log = logging.getLogger(__name__)

COLLECTIVES = ("allreduce", "reducescatter", "allgather")
COUNT_TIES_UP_TO = 256  # ranks: above, tied candidates are not built to count transfers


@dataclass
class Comparison:
    """Every algorithm's cost-model time for one request, and the bound."""

    bound: Bound  # reduce-then-broadcast programs (planner/bound.py)
    candidates: dict[str, Candidate]
    infeasible: dict[str, str]
    router: Router
    bound_any: AnyBound | None = None  # every all-reduce program (planner/bound_any.py)
    ranks: tuple[str, ...] = ()
    # priced with the per-exchange overhead: ties then go to the fewest exchanged transfers
    exchange_priced: bool = False

    def bound_for(self, algorithm: str) -> tuple[float, str, str, float]:
        """(time, family, method, bandwidth term) of the highest bound whose family holds
        ``algorithm``'s programs: the any-program bound holds every program, the
        reduce-then-broadcast bound all but OUTSIDE_REDUCE_BROADCAST."""
        b = self.bound_any
        if b is not None and (
            algorithm in OUTSIDE_REDUCE_BROADCAST or b.time_s > self.bound.time_s
        ):
            return b.time_s, b.family, b.method, b.bandwidth_s
        return self.bound.time_s, self.bound.family, self.bound.method, self.bound.bandwidth_s

    @cached_property
    def best(self) -> Candidate:
        """The fastest candidate; among those within TIE_TOLERANCE of it, the one with the
        fewest transfers (messages, which the model does not charge: on the testbed a 2-step
        direct exchange of 4 KiB over 8 ranks ran 4x slower than a flat star predicted 20 %
        slower), then the simplest (the order of ALGORITHMS).

        Only candidates whose ranks all end with the same bits count (a candidate would say
        ``details["identical_bits"]: False`` if its ranks added the same values in
        different orders), unless none does. Every algorithm's programs do today: the
        executor adds a step's reduces in rank order (``syncplan.executor.schedule``), which makes
        the direct exchanges' ranks compute the same sums.

        Priced with ``exchange_overhead_s``, ties go to the fewest *exchanged* transfers
        first (``syncplan.planner.cost.exchange_ends``' transfers): the term is fitted at 4 and 64
        KiB, and on the testbed the exchanging programs ran above their prediction at 64
        KiB - 1 MiB in every run (halving-doubling 1.08-1.70x at 1 MiB, where it is priced
        within 1-3 % of the ring, which ran 0.92-0.99x; docs/testbed.md "Issue 18, session
        8")."""
        same = [c for c in self.candidates.values() if c.details.get("identical_bits", True)]
        pool = same or list(self.candidates.values())
        fastest = min(c.predicted_time_s for c in pool)
        order = {name: i for i, name in enumerate(ALGORITHMS)}
        tied = [c for c in pool if c.predicted_time_s <= fastest * (1 + TIE_TOLERANCE)]
        counts = {c.algorithm: (0, 0) for c in tied}
        if len(tied) > 1 and len(self.ranks) <= COUNT_TIES_UP_TO:
            for c in tied:
                program = c.build()
                c.build = partial(_same, program)  # built once
                counts[c.algorithm] = (
                    exchanged_count(program) if self.exchange_priced else 0,
                    program.transfer_count,
                )
        return min(
            tied,
            key=lambda c: (
                counts[c.algorithm],
                order.get(c.algorithm, len(order)),
                c.predicted_time_s,
            ),
        )


def exchanged_count(program: Program) -> int:
    """Transfers whose destination also sends to their source in the same step."""
    total = 0
    for step in program.steps:
        pairs = {(t.src, t.dst) for t in step}
        total += sum((t.dst, t.src) in pairs for t in step)
    return total


def _check_effort(effort: Any) -> None:
    if effort not in EFFORTS:
        raise RequestError(f"effort must be one of {', '.join(EFFORTS)}, got {effort!r}")


def _check_overhead(value: float, name: str = "message_overhead_s") -> None:
    if not (isinstance(value, int | float) and 0 <= value < float("inf")):
        raise RequestError(f"{name} must be a time >= 0, got {value!r}")


def _check_cores(message_cores: int | None) -> None:
    if message_cores is not None and (
        isinstance(message_cores, bool) or not isinstance(message_cores, int) or message_cores < 0
    ):
        raise RequestError(
            "message_cores must be a whole number >= 0 (0 or None: unlimited), "
            f"got {message_cores!r}"
        )


def _same(program: Program) -> Program:
    return program


def _check_request(
    topo: Topology, ranks: list[str], size_bytes: int, algorithm: str, collective: str
) -> None:
    if collective not in COLLECTIVES:
        raise RequestError(
            f"collective {collective!r} is not supported; choose one of {', '.join(COLLECTIVES)}"
        )
    if algorithm != "auto" and algorithm not in ALGORITHMS:
        raise RequestError(
            f"algorithm {algorithm!r} is unknown; choose auto or one of {', '.join(ALGORITHMS)}"
        )
    if isinstance(size_bytes, bool) or not isinstance(size_bytes, int) or size_bytes <= 0:
        raise RequestError(f"size_bytes must be a positive integer, got {size_bytes!r}")
    topo.check_ranks(ranks)


def compare(
    topo: Topology,
    ranks: list[str],
    size_bytes: int,
    *,
    algorithms: list[str] | None = None,
    seed: int = 0,
    min_step_s: float = 0.0,
    message_overhead_s: float = 0.0,
    message_cores: int | None = None,
    exchange_overhead_s: float = 0.0,
    switch_overhead: float = 0.0,
    effort: str = "fast",
) -> Comparison:
    """Price every named algorithm (default: all) on one request."""
    _check_request(topo, ranks, size_bytes, "auto", "allreduce")
    return _compare(
        topo,
        ranks,
        size_bytes,
        algorithms=algorithms,
        seed=seed,
        min_step_s=min_step_s,
        message_overhead_s=message_overhead_s,
        message_cores=message_cores,
        exchange_overhead_s=exchange_overhead_s,
        switch_overhead=switch_overhead,
        effort=effort,
    )


def _compare(
    topo: Topology,
    ranks: list[str],
    size_bytes: int,
    *,
    algorithms: list[str] | None,
    seed: int,
    min_step_s: float,
    message_overhead_s: float,
    message_cores: int | None,
    exchange_overhead_s: float,
    switch_overhead: float,
    effort: str,
) -> Comparison:
    """``compare`` on a request whose topology, ranks and size are checked already."""
    _check_effort(effort)
    _check_overhead(message_overhead_s)
    _check_overhead(exchange_overhead_s, "exchange_overhead_s")
    _check_overhead(switch_overhead, "switch_overhead")
    _check_cores(message_cores)
    ctx = PlanContext.create(
        topo,
        ranks,
        size_bytes,
        seed=seed,
        min_step_s=min_step_s,
        message_overhead_s=message_overhead_s,
        message_cores=message_cores or None,
        exchange_overhead_s=exchange_overhead_s,
        switch_overhead=switch_overhead,
        effort=effort,
    )
    cands: dict[str, Candidate] = {}
    infeasible: dict[str, str] = {}
    for name in algorithms or list(ALGORITHMS):
        t0 = time.perf_counter()
        try:
            cands[name] = ALGORITHMS[name](ctx)
        except InfeasibleError as exc:
            infeasible[name] = str(exc)
            continue
        log.debug("%s priced in %.3f s", name, time.perf_counter() - t0)
    if not cands:
        raise InfeasibleError(
            "no algorithm can serve this request: "
            + "; ".join(f"{k}: {v}" for k, v in infeasible.items())
        )
    bound = lower_bound(ctx)
    return Comparison(
        bound,
        cands,
        infeasible,
        ctx.router,
        lower_bound_any(ctx, bound.cut_bandwidth_Bps),
        tuple(ranks),
        exchange_priced=exchange_overhead_s > 0,
    )


def make_plan(
    topo: Topology,
    ranks: list[str],
    size_bytes: int,
    algorithm: str = "auto",
    collective: str = "allreduce",
    *,
    seed: int = 0,
    min_step_s: float = 0.0,
    shards: str = "equal",
    density: Any = None,
    block_elems: Any = 256,
    density_overlap: Any = False,
    message_overhead_s: float = 0.0,
    message_cores: int | None = None,
    exchange_overhead_s: float = 0.0,
    switch_overhead: float = 0.0,
    effort: str = "fast",
) -> dict[str, Any]:
    """Plan a collective; return the plan document. Raise RequestError / InfeasibleError.
    ``shards`` (``equal`` or ``any``) applies to reduce-scatter and all-gather only; with
    ``density`` the all-reduce is block-sparse (planner.sparse); ``message_overhead_s``
    (the cost model's per-message term, all-reduce only) is priced into every candidate,
    shared by ``message_cores`` CPU cores when that is set (None or 0: one CPU per rank);
    ``exchange_overhead_s`` likewise per message end of the steps' exchanged transfers, and
    ``switch_overhead`` as a fraction of switched transfers' wire time (planner.cost).
    ``effort`` (EFFORTS): ``thorough`` lets forest's pieced LPs run minutes instead of
    seconds (all-reduce only; docs/planner.md, "Effort")."""
    _check_effort(effort)
    with gc_paused():
        if collective != "allreduce":
            if message_overhead_s or message_cores or exchange_overhead_s or switch_overhead:
                raise RequestError(
                    "message_overhead_s, message_cores, exchange_overhead_s "
                    "and switch_overhead are priced for all-reduce plans only"
                )
            if effort != "fast":
                raise RequestError(f"effort {effort!r} applies to all-reduce plans only")
            _check_request(topo, ranks, size_bytes, algorithm, collective)
            return make_collective_plan(
                topo,
                ranks,
                size_bytes,
                algorithm,
                collective,
                shards=shards,
                seed=seed,
                min_step_s=min_step_s,
            )
        return _make_plan(
            topo,
            ranks,
            size_bytes,
            algorithm,
            collective,
            seed=seed,
            min_step_s=min_step_s,
            sparse=None
            if density is None
            else Density.from_request(
                density, len(ranks), overlap=density_overlap, block_elems=block_elems
            ),
            message_overhead_s=message_overhead_s,
            message_cores=message_cores,
            exchange_overhead_s=exchange_overhead_s,
            switch_overhead=switch_overhead,
            effort=effort,
        )[0]


def plan_and_compare(
    topo: Topology,
    ranks: list[str],
    size_bytes: int,
    algorithm: str = "auto",
    *,
    min_step_s: float = 0.0,
    message_overhead_s: float = 0.0,
    message_cores: int | None = None,
    exchange_overhead_s: float = 0.0,
    switch_overhead: float = 0.0,
    effort: str = "fast",
) -> tuple[dict[str, Any], Comparison]:
    """An all-reduce plan document and the comparison it was chosen from (every algorithm
    priced once when ``algorithm`` is auto; only the named one otherwise)."""
    with gc_paused():
        return _make_plan(
            topo,
            ranks,
            size_bytes,
            algorithm,
            "allreduce",
            seed=0,
            min_step_s=min_step_s,
            message_overhead_s=message_overhead_s,
            message_cores=message_cores,
            exchange_overhead_s=exchange_overhead_s,
            switch_overhead=switch_overhead,
            effort=effort,
        )


def _make_plan(
    topo: Topology,
    ranks: list[str],
    size_bytes: int,
    algorithm: str,
    collective: str,
    *,
    seed: int,
    min_step_s: float,
    sparse: Density | None = None,
    message_overhead_s: float = 0.0,
    message_cores: int | None = None,
    exchange_overhead_s: float = 0.0,
    switch_overhead: float = 0.0,
    effort: str = "fast",
) -> tuple[dict[str, Any], Comparison]:
    _check_request(topo, ranks, size_bytes, algorithm, collective)
    names = list(ALGORITHMS) if algorithm == "auto" else [algorithm]
    t0 = time.perf_counter()
    comp = _compare(
        topo,
        ranks,
        size_bytes,
        algorithms=names,
        seed=seed,
        min_step_s=min_step_s,
        message_overhead_s=message_overhead_s,
        message_cores=message_cores,
        exchange_overhead_s=exchange_overhead_s,
        switch_overhead=switch_overhead,
        effort=effort,
    )
    # without an overhead the cores change nothing
    cores = message_cores if message_overhead_s or exchange_overhead_s else None
    chosen = comp.best
    sparse_info = None
    if sparse is not None:
        chosen, sparse_info = _choose_sparse(
            comp,
            ranks,
            size_bytes,
            sparse,
            min_step_s,
            message_overhead_s,
            cores,
            exchange_overhead_s,
            switch_overhead,
        )
    program = with_routes(chosen.build(), ranks, comp.router)
    solve_s = time.perf_counter() - t0
    bound_s, family, method, bandwidth_s = comp.bound_for(chosen.algorithm)
    assert comp.bound_any is not None
    doc: dict[str, Any] = {
        "plan_id": "",
        "format_version": PLAN_FORMAT_VERSION,
        "algorithm": chosen.algorithm,
        "requested_algorithm": algorithm,
        "collective": collective,
        "ranks": list(ranks),
        "size_bytes": size_bytes,
        "predicted_time_s": chosen.predicted_time_s,
        # the bound of the tightest family that holds the chosen program
        "lower_bound_time_s": bound_s,
        "lower_bound_family": family,
        "lower_bound_method": method,
        "lower_bound_bandwidth_s": bandwidth_s,  # the bound without its latency
        # the bound on every all-reduce program, whatever its family
        "lower_bound_any_time_s": comp.bound_any.time_s,
        "lower_bound_any_family": comp.bound_any.family,
        "lower_bound_any_method": comp.bound_any.method,
        "details": chosen.details,
        "candidates": {k: c.predicted_time_s for k, c in comp.candidates.items()},
        "solve_time_s": solve_s,
        "program": program_to_doc(program),
    }
    if min_step_s:
        doc["min_step_s"] = min_step_s  # priced into predicted_time_s
    if message_overhead_s:
        doc["message_overhead_s"] = message_overhead_s  # likewise
    if exchange_overhead_s:
        doc["exchange_overhead_s"] = exchange_overhead_s  # likewise
    if switch_overhead:
        doc["switch_overhead"] = switch_overhead  # likewise
    if cores:
        doc["message_cores"] = cores  # likewise: the ranks share this many CPU cores
    if effort != "fast":
        doc["effort"] = effort  # how hard forest searched (changes the program)
    if sparse_info is not None:
        doc["sparse"] = sparse_info
    doc["plan_id"] = plan_id(topo, doc)
    doc["topology_fingerprint"] = topo.fingerprint()  # `syncplan verify` compares it
    return doc, comp


def _choose_sparse(
    comp: Comparison,
    ranks: list[str],
    size_bytes: int,
    density: Density,
    min_step_s: float,
    message_overhead_s: float = 0.0,
    message_cores: int | None = None,
    exchange_overhead_s: float = 0.0,
    switch_overhead: float = 0.0,
) -> tuple[Candidate, dict[str, Any]]:
    cands = {k: (c.predicted_time_s, c.build()) for k, c in comp.candidates.items()}
    name, info = choose_sparse(
        CostModel(
            comp.router,
            min_step_s,
            message_overhead_s,
            message_cores,
            exchange_overhead_s,
            switch_overhead,
        ),
        ranks,
        size_bytes,
        density,
        cands,
        comp.best.algorithm,
    )
    return comp.candidates[name], info


def algorithm_bandwidth(size_bytes: int, seconds: float, nranks: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s as nccl-tests defines them for all-reduce."""
    if seconds <= 0:
        return float("inf"), float("inf")
    algbw = size_bytes / seconds / 1e9
    return algbw, algbw * 2 * (nranks - 1) / nranks
