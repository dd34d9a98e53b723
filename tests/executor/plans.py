"""Test-only plan documents (a plain ring) for when the planner is not wanted."""

from __future__ import annotations

from typing import Any


def ring_plan(n: int, units: int | None = None, ranks: list[str] | None = None) -> dict[str, Any]:
    """A ring all-reduce: n-1 reduce-scatter steps, then n-1 all-gather steps."""
    units = units or n
    bounds = [c * units // n for c in range(n + 1)]
    steps: list[list[dict[str, Any]]] = []
    for phase, reduce in ((0, True), (1, False)):
        for s in range(n - 1):
            step = []
            for r in range(n):
                c = (r - s + phase) % n
                step.append({"src": r, "dst": (r + 1) % n,
                             "chunk": [bounds[c], bounds[c + 1]], "reduce": reduce})
            steps.append(step)
    return {"plan_id": f"test-ring-{n}-{units}", "algorithm": "ring", "collective": "allreduce",
            "ranks": ranks or [f"h{i}/cpu0" for i in range(n)], "size_bytes": 0,
            "program": {"units": units, "steps": steps}}
