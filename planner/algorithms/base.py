"""What every algorithm receives and returns."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from syncplan.core.options import DEFAULT_OPTIONS, PlanOptions
from syncplan.core.program import Program
from syncplan.planner.cost import CostModel
from syncplan.planner.routing import Router
from syncplan.planner.topology import Topology


@dataclass
class PlanContext:
    """A validated request: topology, rank endpoints, buffer size, shared router and cost model."""

    topo: Topology
    ranks: list[str]
    size_bytes: int
    router: Router
    cost: CostModel
    seed: int = 0
    memo: dict[str, Any] = field(default_factory=dict)  # work shared by algorithms and bound

    @property
    def options(self) -> PlanOptions:
        return self.cost.options

    @property
    def effort(self) -> str:
        """How hard forest searches (core/options.py EFFORTS)."""
        return self.cost.options.effort

    @classmethod
    def create(
        cls,
        topo: Topology,
        ranks: list[str],
        size_bytes: int,
        *,
        seed: int = 0,
        options: PlanOptions = DEFAULT_OPTIONS,
        router: Router | None = None,
    ) -> PlanContext:
        router = router or Router(topo)
        return cls(topo, ranks, size_bytes, router, CostModel(router, options), seed)

    @cached_property
    def host_groups(self) -> list[list[int]]:
        """Rank indices grouped by host, hosts in order of first appearance in ``ranks``."""
        groups: dict[str, list[int]] = {}
        for i, r in enumerate(self.ranks):
            groups.setdefault(self.topo.host_of(r), []).append(i)
        return list(groups.values())

    @cached_property
    def host_uplinks(self) -> list[frozenset[str]]:
        """Per host group: the forwarding nodes outside the host its NICs or endpoints reach."""
        out = []
        for group in self.host_groups:
            host = self.topo.host_of(self.ranks[group[0]])
            inside = {n for n, node in self.topo.nodes.items() if node.host == host}
            inside.update(self.ranks[i] for i in group)
            ups = {
                v
                for u in inside
                for v in self.topo.graph.successors(u)
                if v not in inside and not self.topo.nodes[v].can_hold_rank
            }
            out.append(frozenset(ups))
        return out

    @cached_property
    def nics_per_host(self) -> int:
        counts = []
        for group in self.host_groups:
            host = self.topo.host_of(self.ranks[group[0]])
            counts.append(
                sum(1 for n in self.topo.nodes.values() if n.host == host and n.kind == "nic")
            )
        return max(1, min(counts)) if counts else 1


@dataclass
class Candidate:
    """An algorithm's answer: its cost-model time and a builder for the full program.

    ``predicted_time_s`` must equal the cost model applied to ``build()`` (tests check it);
    algorithms compute it from representative steps so ``auto`` need not build every program.
    """

    algorithm: str
    predicted_time_s: float
    build: Callable[[], Program]
    details: dict[str, Any] = field(default_factory=dict)


Algorithm = Callable[[PlanContext], Candidate]
