"""Planner: cluster graph in, verified all-reduce program out.

Public API::

    topo = load_topology("examples/dgx-2host.json")      # or Topology.from_dict(data)
    plan = make_plan(topo, ranks, size_bytes, algorithm="auto")   # plan document (dict)
    report = verify_plan(plan, topo)                      # .ok, .error, .simulated_time_s
"""

from planner.errors import (
    InfeasibleError,
    PlannerError,
    RequestError,
    TopologyError,
    VerificationError,
)
from planner.topology import Link, Node, Topology, load_topology

__all__ = [
    "InfeasibleError",
    "Link",
    "Node",
    "PlannerError",
    "RequestError",
    "Topology",
    "TopologyError",
    "VerificationError",
    "load_topology",
]
