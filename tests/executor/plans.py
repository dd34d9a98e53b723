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
                step.append(
                    {
                        "src": r,
                        "dst": (r + 1) % n,
                        "chunk": [bounds[c], bounds[c + 1]],
                        "reduce": reduce,
                    }
                )
            steps.append(step)
    return {
        "plan_id": f"test-ring-{n}-{units}",
        "algorithm": "ring",
        "collective": "allreduce",
        "ranks": ranks or [f"h{i}/cpu0" for i in range(n)],
        "size_bytes": 0,
        "program": {"units": units, "steps": steps},
    }


def _t(src: int, dst: int, a: int, b: int, reduce: bool) -> dict[str, Any]:
    return {"src": src, "dst": dst, "chunk": [a, b], "reduce": reduce}


def butterfly_plan(n: int) -> dict[str, Any]:
    """Recursive doubling (n a power of two): partners swap whole buffers and both add, so
    every rank sends and reduces into the same units in the same step."""
    steps, k = [], 1
    while k < n:
        steps.append([_t(r, r ^ k, 0, 2, True) for r in range(n)])
        k *= 2
    return {
        "plan_id": f"test-butterfly-{n}",
        "algorithm": "butterfly",
        "collective": "allreduce",
        "ranks": [f"h{i}/cpu0" for i in range(n)],
        "size_bytes": 0,
        "program": {"units": 2, "steps": steps},
    }


def crossing_plan() -> dict[str, Any]:
    """4 ranks. Step 0: rank 1 replaces its value with rank 0's while sending its own to rank
    0, which adds it: correct only if sends read start-of-step values. Step 2 broadcasts in
    two adjacent chunks per destination (coalesced into one message)."""
    steps = [
        [_t(1, 0, 0, 2, True), _t(0, 1, 0, 2, False)],
        [_t(2, 0, 0, 2, True), _t(3, 0, 0, 2, True), _t(1, 2, 0, 2, True)],
        [_t(0, d, a, a + 1, False) for d in (1, 2, 3) for a in (0, 1)],
    ]
    return {
        "plan_id": "test-crossing",
        "algorithm": "crossing",
        "collective": "allreduce",
        "ranks": [f"h{i}/cpu0" for i in range(4)],
        "size_bytes": 0,
        "program": {"units": 2, "steps": steps},
    }
