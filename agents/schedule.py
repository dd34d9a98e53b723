"""Which pairs of hosts probe each other when, without a coordinator.

All agents derive the same schedule from the same host list: hosts sorted by name are paired
by the circle method (one host fixed, the others rotate; a bye when the count is odd), which
gives ``n - 1`` rounds (``n`` rounded up to even) in which every host is in at most one pair
and every pair meets exactly once. Round ``r`` of a cycle runs in the time slot
``[t0 + r * slot_s, t0 + (r + 1) * slot_s)``, where ``t0`` is a multiple of ``slot_s`` on the
wall clock, so agents whose clocks agree run the same round at the same time. In each pair
the host whose name sorts first initiates. Clock disagreement cannot make probes overlap on
a NIC: a host in a session refuses others (``busy``) and the initiator retries inside its slot.
"""

from __future__ import annotations

import math


def circle_rounds(hosts: list[str]) -> list[list[tuple[str, str]]]:
    """Rounds of disjoint pairs ``(initiator, responder)`` covering every pair once."""
    names: list[str | None] = list(sorted(set(hosts)))
    if len(names) < 2:
        return []
    if len(names) % 2:
        names.append(None)
    n = len(names)
    fixed, rest = names[0], names[1:]
    rounds: list[list[tuple[str, str]]] = []
    for r in range(n - 1):
        order = [fixed, *rest[r:], *rest[:r]]
        pairs = []
        for k in range(n // 2):
            a, b = order[k], order[n - 1 - k]
            if a is not None and b is not None:
                pairs.append((min(a, b), max(a, b)))
        rounds.append(sorted(pairs))
    return rounds


def my_pairs(hosts: list[str], me: str) -> list[tuple[int, str, bool]]:
    """(round, peer, I initiate) for every round in which ``me`` has a partner."""
    out = []
    for r, pairs in enumerate(circle_rounds(hosts)):
        for a, b in pairs:
            if me in (a, b):
                out.append((r, b if a == me else a, a == me))
    return out


def next_cycle_start(now: float, slot_s: float, lead_s: float = 0.5) -> float:
    """The first slot boundary at least ``lead_s`` from now."""
    return math.ceil((now + lead_s) / slot_s) * slot_s
