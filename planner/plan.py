"""From a topology and a request to a plan document (CONTRACTS sections 2 and 3)."""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass
from typing import Any

from planner.algorithms import ALGORITHMS, Candidate, PlanContext
from planner.bound import Bound, lower_bound
from planner.cost import CostModel
from planner.errors import InfeasibleError, RequestError
from planner.gc_pause import gc_paused
from planner.program import Program, Transfer, program_to_doc
from planner.routing import Router
from planner.sparse import Density
from planner.sparse import choose as choose_sparse
from planner.topology import Topology

log = logging.getLogger(__name__)

COLLECTIVES = ("allreduce",)
PLAN_FORMAT_VERSION = 1
# auto: candidates predicted within this fraction of the fastest count as tied, and the tie
# goes to the simplest (first in ALGORITHMS: ring, hierarchical, forest). On the testbed a
# 0.02 % edge of a one-step direct exchange over the ring cost 3-15 % (docs/testbed.md).
TIE_TOLERANCE = 0.01


@dataclass
class Comparison:
    """Every algorithm's cost-model time for one request, and the bound."""

    bound: Bound
    candidates: dict[str, Candidate]
    infeasible: dict[str, str]
    router: Router

    @property
    def best(self) -> Candidate:
        """The fastest candidate; among those within TIE_TOLERANCE of it, the simplest."""
        fastest = min(c.predicted_time_s for c in self.candidates.values())
        order = {name: i for i, name in enumerate(ALGORITHMS)}
        tied = [c for c in self.candidates.values()
                if c.predicted_time_s <= fastest * (1 + TIE_TOLERANCE)]
        return min(tied, key=lambda c: (order.get(c.algorithm, len(order)),
                                        c.predicted_time_s))


def _check_request(topo: Topology, ranks: list[str], size_bytes: int, algorithm: str,
                   collective: str) -> None:
    if collective not in COLLECTIVES:
        raise RequestError(f"collective {collective!r} is not supported; choose one of "
                           f"{', '.join(COLLECTIVES)}")
    if algorithm != "auto" and algorithm not in ALGORITHMS:
        raise RequestError(f"algorithm {algorithm!r} is unknown; choose auto or one of "
                           f"{', '.join(ALGORITHMS)}")
    if isinstance(size_bytes, bool) or not isinstance(size_bytes, int) or size_bytes <= 0:
        raise RequestError(f"size_bytes must be a positive integer, got {size_bytes!r}")
    topo.check_ranks(ranks)


def compare(topo: Topology, ranks: list[str], size_bytes: int, *,
            algorithms: list[str] | None = None, seed: int = 0,
            min_step_s: float = 0.0) -> Comparison:
    """Price every named algorithm (default: all) on one request."""
    _check_request(topo, ranks, size_bytes, "auto", "allreduce")
    ctx = PlanContext.create(topo, ranks, size_bytes, seed=seed, min_step_s=min_step_s)
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
        raise InfeasibleError("no algorithm can serve this request: " +
                              "; ".join(f"{k}: {v}" for k, v in infeasible.items()))
    return Comparison(lower_bound(ctx), cands, infeasible, ctx.router)


def make_plan(topo: Topology, ranks: list[str], size_bytes: int, algorithm: str = "auto",
              collective: str = "allreduce", *, seed: int = 0,
              min_step_s: float = 0.0, density: Any = None, block_elems: Any = 256,
              density_overlap: Any = False) -> dict[str, Any]:
    """Plan an all-reduce; return the plan document. Raise RequestError / InfeasibleError.
    With ``density`` the all-reduce is block-sparse: see planner.sparse."""
    with gc_paused():
        return _make_plan(topo, ranks, size_bytes, algorithm, collective, seed=seed,
                          min_step_s=min_step_s, sparse=None if density is None else
                          Density.from_request(density, len(ranks), overlap=density_overlap,
                                               block_elems=block_elems))


def _make_plan(topo: Topology, ranks: list[str], size_bytes: int, algorithm: str,
               collective: str, *, seed: int, min_step_s: float,
               sparse: Density | None = None) -> dict[str, Any]:
    _check_request(topo, ranks, size_bytes, algorithm, collective)
    names = list(ALGORITHMS) if algorithm == "auto" else [algorithm]
    t0 = time.perf_counter()
    comp = compare(topo, ranks, size_bytes, algorithms=names, seed=seed,
                   min_step_s=min_step_s)
    chosen = comp.best
    sparse_info = None
    if sparse is not None:
        chosen, sparse_info = _choose_sparse(comp, ranks, size_bytes, sparse, min_step_s)
    program = with_routes(chosen.build(), ranks, comp.router)
    solve_s = time.perf_counter() - t0
    doc: dict[str, Any] = {
        "plan_id": "",
        "format_version": PLAN_FORMAT_VERSION,
        "algorithm": chosen.algorithm,
        "requested_algorithm": algorithm,
        "collective": collective,
        "ranks": list(ranks),
        "size_bytes": size_bytes,
        "predicted_time_s": chosen.predicted_time_s,
        "lower_bound_time_s": comp.bound.time_s,
        "lower_bound_family": comp.bound.family,
        "lower_bound_method": comp.bound.method,
        "lower_bound_bandwidth_s": comp.bound.bandwidth_s,  # the bound without its latency
        "details": chosen.details,
        "candidates": {k: c.predicted_time_s for k, c in comp.candidates.items()},
        "solve_time_s": solve_s,
        "program": program_to_doc(program),
    }
    if min_step_s:
        doc["min_step_s"] = min_step_s  # priced into predicted_time_s
    if sparse_info is not None:
        doc["sparse"] = sparse_info
    doc["plan_id"] = plan_id(topo, doc)
    return doc


def _choose_sparse(comp: Comparison, ranks: list[str], size_bytes: int, density: Density,
                   min_step_s: float) -> tuple[Candidate, dict[str, Any]]:
    cands = {k: (c.predicted_time_s, c.build()) for k, c in comp.candidates.items()}
    name, info = choose_sparse(CostModel(comp.router, min_step_s), ranks, size_bytes, density,
                               cands, comp.best.algorithm)
    return comp.candidates[name], info


def with_routes(program: Program, ranks: list[str], router: Router) -> Program:
    """Pin every transfer without a path to the route the cost model priced it on."""
    steps = [[t if t.path is not None else
              Transfer(t.src, t.dst, t.lo, t.hi, t.reduce, router.path(ranks[t.src], ranks[t.dst]))
              for t in step] for step in program.steps]
    return Program(program.units, steps)


def plan_id(topo: Topology, doc: dict[str, Any]) -> str:
    """A stable id from the topology, the request and the chosen algorithm."""
    key = json.dumps({"topology": topo.to_dict(), "ranks": doc["ranks"],
                      "size_bytes": doc["size_bytes"], "algorithm": doc["algorithm"],
                      "requested": doc["requested_algorithm"],
                      "version": PLAN_FORMAT_VERSION,
                      **({"overhead": doc["min_step_s"]} if doc.get("min_step_s")
                         else {}),
                      **({"sparse": {k: doc["sparse"][k] for k in
                                     ("density", "density_overlap", "block_elems")}}
                         if doc.get("sparse") else {})}, sort_keys=True)
    return hashlib.sha256(key.encode()).hexdigest()[:20]


def algorithm_bandwidth(size_bytes: int, seconds: float, nranks: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s as nccl-tests defines them for all-reduce."""
    if seconds <= 0:
        return float("inf"), float("inf")
    algbw = size_bytes / seconds / 1e9
    return algbw, algbw * 2 * (nranks - 1) / nranks
