"""Planner: cluster graph in, verified all-reduce program out.

Public API (formats in docs/formats.md)::

    from syncplan.planner import load_topology, make_plan, verify_plan

    topo = load_topology("examples/one-slow-nic.json")   # or Topology.from_dict(data)
    plan = make_plan(topo, topo.endpoints(), 256 << 20)  # plan document (dict); algorithm="auto"
    report = verify_plan(plan, topo)                     # .ok, .error, .simulated_time_s

``compare`` prices every algorithm on one request; ``ALGORITHMS`` names them. The planning
names load on first use, so ``import planner`` stays cheap.
"""

from __future__ import annotations

from syncplan.core.errors import (
    InfeasibleError,
    PlannerError,
    RequestError,
    TopologyError,
    VerificationError,
)
from syncplan.core.lazy import lazy_getattr
from syncplan.planner.topology import Link, Node, Topology, load_topology

_LAZY = {
    "ALGORITHMS": "syncplan.planner.algorithms",
    "compare": "syncplan.planner.plan",
    "make_plan": "syncplan.planner.plan",
    "parse_size": "syncplan.planner.sizes",
    "verify_plan": "syncplan.planner.verify",
    "VerifyReport": "syncplan.planner.verify",
}

__getattr__ = lazy_getattr(__name__, _LAZY)


__all__ = [
    "ALGORITHMS",
    "InfeasibleError",
    "Link",
    "Node",
    "PlannerError",
    "RequestError",
    "Topology",
    "TopologyError",
    "VerificationError",
    "VerifyReport",
    "compare",
    "load_topology",
    "make_plan",
    "parse_size",
    "verify_plan",
]
