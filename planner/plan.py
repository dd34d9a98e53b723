"""From a topology and a request to a plan document (docs/formats.md, Plan request/document)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from functools import cached_property, partial
from typing import Any

from syncplan.core.errors import InfeasibleError, RequestError
from syncplan.core.options import DEFAULT_OPTIONS, PlanOptions
from syncplan.core.program import Program, program_to_doc
from syncplan.planner.algorithms import ALGORITHMS, OUTSIDE_REDUCE_BROADCAST, Candidate, PlanContext
from syncplan.planner.bound import Bound, lower_bound
from syncplan.planner.bound_any import AnyBound, lower_bound_any
from syncplan.planner.collectives import make_collective_plan
from syncplan.planner.cost import CostModel
from syncplan.planner.gc_pause import gc_paused
from syncplan.planner.plan_doc import PLAN_FORMAT_VERSION, TIE_TOLERANCE, plan_id, with_routes
from syncplan.planner.rooted import ROOTED_COLLECTIVES, make_rooted_plan
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
    options: PlanOptions = DEFAULT_OPTIONS,
) -> Comparison:
    """Price every named algorithm (default: all) on one request."""
    _check_request(topo, ranks, size_bytes, "auto", "allreduce")
    return _compare(topo, ranks, size_bytes, algorithms, seed, options)


def _compare(
    topo: Topology,
    ranks: list[str],
    size_bytes: int,
    algorithms: list[str] | None,
    seed: int,
    options: PlanOptions,
) -> Comparison:
    """``compare`` on a request whose topology, ranks and size are checked already."""
    ctx = PlanContext.create(topo, ranks, size_bytes, seed=seed, options=options)
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
        exchange_priced=options.exchange_overhead_s > 0,
    )


def make_plan(
    topo: Topology,
    ranks: list[str],
    size_bytes: int,
    algorithm: str = "auto",
    collective: str = "allreduce",
    *,
    seed: int = 0,
    options: PlanOptions = DEFAULT_OPTIONS,
    shards: str = "equal",
    density: Any = None,
    block_elems: Any = 256,
    density_overlap: Any = False,
    root: Any = None,
) -> dict[str, Any]:
    """Plan a collective; return the plan document. Raise RequestError / InfeasibleError.
    ``options`` (core/options.py) holds the cost-model terms and the search effort; all but
    ``min_step_s`` are for all-reduce plans only. ``shards`` (``equal`` or ``any``) applies
    to reduce-scatter and all-gather only; with ``density`` the all-reduce is block-sparse
    (planner.sparse). ``root`` (a rank's endpoint id or index; default rank 0) applies to
    broadcast and reduce only."""
    if root is not None and collective not in ROOTED_COLLECTIVES:
        raise RequestError(f"root applies to broadcast and reduce only, not {collective}")
    with gc_paused():
        if collective != "allreduce":
            if options.priced:
                raise RequestError(
                    "message_overhead_s, message_cores, exchange_overhead_s "
                    "and switch_overhead are priced for all-reduce plans only"
                )
            if options.effort != "fast":
                raise RequestError(f"effort {options.effort!r} applies to all-reduce plans only")
            if collective in ROOTED_COLLECTIVES:
                return make_rooted_plan(
                    topo, ranks, size_bytes, algorithm, collective, root, seed=seed, options=options
                )
            _check_request(topo, ranks, size_bytes, algorithm, collective)
            return make_collective_plan(
                topo,
                ranks,
                size_bytes,
                algorithm,
                collective,
                shards=shards,
                seed=seed,
                options=options,
            )
        sparse = (
            None
            if density is None
            else Density.from_request(
                density, len(ranks), overlap=density_overlap, block_elems=block_elems
            )
        )
        return _make_plan(topo, ranks, size_bytes, algorithm, seed, options, sparse)[0]


def plan_and_compare(
    topo: Topology,
    ranks: list[str],
    size_bytes: int,
    algorithm: str = "auto",
    *,
    options: PlanOptions = DEFAULT_OPTIONS,
) -> tuple[dict[str, Any], Comparison]:
    """An all-reduce plan document and the comparison it was chosen from (every algorithm
    priced once when ``algorithm`` is auto; only the named one otherwise)."""
    with gc_paused():
        return _make_plan(topo, ranks, size_bytes, algorithm, 0, options, None)


def _make_plan(
    topo: Topology,
    ranks: list[str],
    size_bytes: int,
    algorithm: str,
    seed: int,
    options: PlanOptions,
    sparse: Density | None,
) -> tuple[dict[str, Any], Comparison]:
    _check_request(topo, ranks, size_bytes, algorithm, "allreduce")
    names = list(ALGORITHMS) if algorithm == "auto" else [algorithm]
    t0 = time.perf_counter()
    comp = _compare(topo, ranks, size_bytes, names, seed, options)
    chosen = comp.best
    sparse_info = None
    if sparse is not None:
        cands = {k: (c.predicted_time_s, c.build()) for k, c in comp.candidates.items()}
        cost = CostModel(comp.router, options.with_(message_cores=options.cores))
        name, sparse_info = choose_sparse(
            cost, ranks, size_bytes, sparse, cands, comp.best.algorithm
        )
        chosen = comp.candidates[name]
    program = with_routes(chosen.build(), ranks, comp.router)
    solve_s = time.perf_counter() - t0
    bound_s, family, method, bandwidth_s = comp.bound_for(chosen.algorithm)
    assert comp.bound_any is not None
    doc: dict[str, Any] = {
        "plan_id": "",
        "format_version": PLAN_FORMAT_VERSION,
        "algorithm": chosen.algorithm,
        "requested_algorithm": algorithm,
        "collective": "allreduce",
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
    doc.update(options.doc_fields())  # the terms priced into predicted_time_s, the effort
    if sparse_info is not None:
        doc["sparse"] = sparse_info
    doc["plan_id"] = plan_id(topo, doc)
    doc["topology_fingerprint"] = topo.fingerprint()  # `syncplan verify` compares it
    return doc, comp


def algorithm_bandwidth(size_bytes: int, seconds: float, nranks: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s as nccl-tests defines them for all-reduce."""
    if seconds <= 0:
        return float("inf"), float("inf")
    algbw = size_bytes / seconds / 1e9
    return algbw, algbw * 2 * (nranks - 1) / nranks
