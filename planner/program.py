"""In-memory all-reduce programs and their plan-document form (CONTRACTS section 3)."""

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


def program_to_doc(program: Program) -> dict[str, Any]:
    """The ``program`` object of a plan document; paths only where they have hops between."""
    steps = []
    for step in program.steps:
        out = []
        for t in step:
            entry: dict[str, Any] = {"src": t.src, "dst": t.dst, "chunk": [t.lo, t.hi],
                                     "reduce": t.reduce}
            if t.path is not None and len(t.path) > 2:
                entry["path"] = list(t.path)
            out.append(entry)
        steps.append(out)
    return {"units": program.units, "steps": steps}


def program_from_doc(doc: dict[str, Any]) -> Program:
    """Inverse of program_to_doc; assumes a document the verifier has accepted."""
    steps = [[Transfer(int(t["src"]), int(t["dst"]), int(t["chunk"][0]), int(t["chunk"][1]),
                       bool(t["reduce"]), tuple(t["path"]) if t.get("path") else None)
              for t in step] for step in doc["steps"]]
    return Program(int(doc["units"]), steps)


def concat_steps(*phases: Sequence[Step]) -> list[Step]:
    """Steps of several phases run one after another, empty steps dropped."""
    return [list(step) for phase in phases for step in phase if step]


def merge_parallel(*phases: Sequence[Step]) -> list[Step]:
    """Steps of several independent phases run side by side: step i holds every phase's i-th."""
    length = max((len(p) for p in phases), default=0)
    return [[t for p in phases if i < len(p) for t in p[i]] for i in range(length)]
