"""In-memory all-reduce programs and their plan-document form (docs/formats.md, Plan document)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple


class Transfer(NamedTuple):
    """Send units [lo, hi) from rank ``src`` to rank ``dst``; add there or replace."""

    src: int
    dst: int
    lo: int
    hi: int
    reduce: bool
    path: tuple[str, ...] | None = None


Step = list[Transfer]


class Program(NamedTuple):
    units: int
    steps: list[Step]

    @property
    def transfer_count(self) -> int:
        return sum(len(s) for s in self.steps)


def split_range(lo: int, hi: int, parts: int) -> list[tuple[int, int]]:
    """Cut [lo, hi) into ``parts`` contiguous pieces whose sizes differ by at most one."""
    n = hi - lo
    return [(lo + n * i // parts, lo + n * (i + 1) // parts) for i in range(parts)]


ROUTE_TABLE_ABOVE = 100_000  # transfers; see program_to_doc


def program_to_doc(program: Program, route_table: bool | None = None) -> dict[str, Any]:
    """The ``program`` object of a plan document, with every path the program pinned (a
    two-node path too: the direct arc is not always the route a reader would pick, and
    docs/formats.md, Plan document, makes ``predicted_time_s`` hold only for the routes written).

    With ``route_table`` (default: above ROUTE_TABLE_ABOVE transfers) each distinct path is
    listed once in ``routes`` and a transfer names it by index (``"route": k``) instead of
    carrying it (``"path"``): large forest programs repeat a few thousand paths hundreds of
    times, and the table makes their documents about 2.5x smaller. Both are additions the
    contract allows (``path`` is optional); a reader that ignores them routes itself."""
    if route_table is None:
        route_table = program.transfer_count > ROUTE_TABLE_ABOVE
    index: dict[tuple[str, ...], int] = {}
    steps: list[list[dict[str, Any]]] = []
    for step in program.steps:
        out: list[dict[str, Any]] = []
        append = out.append
        for src, dst, lo, hi, reduce, path in step:
            entry: dict[str, Any] = {"src": src, "dst": dst, "chunk": [lo, hi], "reduce": reduce}
            if path is not None:
                if route_table:
                    entry["route"] = index.setdefault(path, len(index))
                else:
                    entry["path"] = list(path)
            append(entry)
        steps.append(out)
    if not route_table:
        return {"units": program.units, "steps": steps}
    return {"units": program.units, "routes": [list(p) for p in index], "steps": steps}


def program_from_doc(doc: dict[str, Any]) -> Program:
    """Inverse of program_to_doc; assumes a document the verifier has accepted."""
    routes = [tuple(p) for p in doc.get("routes", ())]

    def path_of(t: dict[str, Any]) -> tuple[str, ...] | None:
        if "route" in t:
            return routes[t["route"]]
        return tuple(t["path"]) if t.get("path") else None

    steps = [
        [
            Transfer(
                int(t["src"]),
                int(t["dst"]),
                int(t["chunk"][0]),
                int(t["chunk"][1]),
                bool(t["reduce"]),
                path_of(t),
            )
            for t in step
        ]
        for step in doc["steps"]
    ]
    return Program(int(doc["units"]), steps)


def concat_steps(*phases: Sequence[Step]) -> list[Step]:
    """Steps of several phases run one after another, empty steps dropped."""
    return [list(step) for phase in phases for step in phase if step]


def merge_parallel(*phases: Sequence[Step]) -> list[Step]:
    """Steps of several independent phases run side by side: step i holds every phase's i-th."""
    length = max((len(p) for p in phases), default=0)
    return [[t for p in phases if i < len(p) for t in p[i]] for i in range(length)]
