"""Broadcast and reduce plans from one root (docs/formats.md, Plan document: ``root``).

Every algorithm of ``ROOTED_ALGORITHMS`` is priced by the cost model; ``auto`` takes the
fastest, ties within TIE_TOLERANCE going to the simplest (the table's order). The document
records the root as a rank index and the bound of planner/bound_rooted.py.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

from syncplan.core.errors import InfeasibleError, RequestError
from syncplan.core.options import DEFAULT_OPTIONS, PlanOptions
from syncplan.core.program import program_to_doc
from syncplan.planner.algorithms.base import Candidate, PlanContext
from syncplan.planner.algorithms.rooted import ROOTED_ALGORITHMS, single_rank
from syncplan.planner.bound_rooted import rooted_bound
from syncplan.planner.plan_doc import PLAN_FORMAT_VERSION, TIE_TOLERANCE, plan_id, with_routes
from syncplan.planner.topology import Topology

ROOTED_COLLECTIVES = ("broadcast", "reduce")


def resolve_root(ranks: list[str], root: Any) -> int:
    """The rank index of ``root``: a rank's endpoint id, or its index (int or digits);
    None means rank 0. RequestError names what is wrong."""
    if root is None:
        return 0
    if isinstance(root, str) and root in ranks:
        return ranks.index(root)
    if isinstance(root, str) and root.strip().isdigit():
        root = int(root)
    if isinstance(root, int) and not isinstance(root, bool):
        if 0 <= root < len(ranks):
            return root
        raise RequestError(f"root {root} is not a rank index in [0, {len(ranks)})")
    raise RequestError(f"root {root!r} is not one of the ranks (an endpoint id or an index)")


def price_rooted(
    ctx: PlanContext, root: int, reduce: bool, names: list[str]
) -> tuple[dict[str, Candidate], dict[str, str]]:
    """Every named algorithm's candidate, and why the others cannot serve the request."""
    cands: dict[str, Candidate] = {}
    infeasible: dict[str, str] = {}
    for name in names:
        try:
            cands[name] = ROOTED_ALGORITHMS[name](ctx, root, reduce)
        except InfeasibleError as exc:
            infeasible[name] = str(exc)
    return cands, infeasible


def make_rooted_plan(
    topo: Topology,
    ranks: list[str],
    size_bytes: int,
    algorithm: str,
    collective: str,
    root: Any = None,
    *,
    seed: int = 0,
    options: PlanOptions = DEFAULT_OPTIONS,
) -> dict[str, Any]:
    """A broadcast or reduce plan document from rank ``root`` (see ``resolve_root``)."""
    if collective not in ROOTED_COLLECTIVES:
        raise RequestError(f"collective {collective!r} is not a broadcast or reduce")
    if algorithm != "auto" and algorithm not in ROOTED_ALGORITHMS:
        raise RequestError(
            f"algorithm {algorithm!r} does not serve a {collective}; choose auto or one of "
            f"{', '.join(ROOTED_ALGORITHMS)}"
        )
    if isinstance(size_bytes, bool) or not isinstance(size_bytes, int) or size_bytes <= 0:
        raise RequestError(f"size_bytes must be a positive integer, got {size_bytes!r}")
    topo.check_ranks(ranks)
    r = resolve_root(ranks, root)
    reduce = collective == "reduce"
    t0 = time.perf_counter()
    ctx = PlanContext.create(topo, ranks, size_bytes, seed=seed, options=options)
    names = list(ROOTED_ALGORITHMS) if algorithm == "auto" else [algorithm]
    cands: dict[str, Candidate]
    infeasible: dict[str, str] = {}
    if len(ranks) == 1:
        cands = {"chain": single_rank()}
    else:
        cands, infeasible = price_rooted(ctx, r, reduce, names)
    if not cands:
        raise InfeasibleError(
            f"no algorithm can serve this {collective}: "
            + "; ".join(f"{k}: {v}" for k, v in infeasible.items())
        )
    fastest = min(c.predicted_time_s for c in cands.values())
    order = {name: i for i, name in enumerate(ROOTED_ALGORITHMS)}
    chosen = min(
        (c for c in cands.values() if c.predicted_time_s <= fastest * (1 + TIE_TOLERANCE)),
        key=lambda c: (order[c.algorithm], c.predicted_time_s),
    )
    bound = rooted_bound(ctx, r, reduce)
    program = with_routes(chosen.build(), ranks, ctx.router)
    doc: dict[str, Any] = {
        "plan_id": "",
        "format_version": PLAN_FORMAT_VERSION,
        "algorithm": chosen.algorithm,
        "requested_algorithm": algorithm,
        "collective": collective,
        "root": r,
        "ranks": list(ranks),
        "size_bytes": size_bytes,
        "predicted_time_s": chosen.predicted_time_s,
        "lower_bound_time_s": bound.time_s,
        "lower_bound_family": bound.family,
        "lower_bound_method": bound.method,
        "lower_bound_bandwidth_s": bound.bandwidth_s,
        "details": chosen.details,
        "candidates": {k: c.predicted_time_s for k, c in cands.items()},
        "infeasible": infeasible,
        "solve_time_s": time.perf_counter() - t0,
        "program": program_to_doc(program),
    }
    if options.min_step_s:
        doc["min_step_s"] = options.min_step_s
    base = plan_id(topo, doc)
    doc["plan_id"] = hashlib.sha256(f"{base}:{collective}:{r}".encode()).hexdigest()[:20]
    doc["topology_fingerprint"] = topo.fingerprint()
    return doc
