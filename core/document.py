"""The plan document read and checked once, for every reader (docs/formats.md, Plan document).

``PlanDocument.from_plan`` is the one structural validator: the executor runs what it
returns and the verifier (planner/verify.py) checks it against a topology. Both the full
``program`` and the compact ``program_compact`` form are read (core/compact.py).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from syncplan.core.compact import COMPACT_KEY, CompactError, expand_program
from syncplan.core.errors import PlannerError
from syncplan.core.program import Transfer


class PlanError(PlannerError, ValueError):
    """The plan document is malformed or not its collective; the message names the field."""


COLLECTIVES = ("allreduce", "reducescatter", "allgather", "broadcast", "reduce")
ROOTED = ("broadcast", "reduce")  # from one root rank: the document's ``root``


@dataclass(frozen=True, slots=True)
class PlanDocument:
    """A checked plan document: ``steps[s]`` holds the transfers that run concurrently in
    step s, each with its path when the document pins one."""

    ranks: tuple[str, ...]
    units: int
    steps: tuple[tuple[Transfer, ...], ...]
    plan_id: str
    digest: str
    collective: str = "allreduce"
    shards: tuple[tuple[int, int], ...] | None = None  # reduce-scatter / all-gather
    routes: tuple[tuple[str, ...], ...] = ()  # program.routes, when the program has a table
    root: int | None = None  # broadcast / reduce: the root's rank index

    @property
    def owned(self) -> tuple[tuple[int, int], ...] | None:
        """Each rank's unit range that must end right (None: every unit on every rank):
        the shards, or for a broadcast or reduce the whole buffer at the root (a broadcast is
        an all-gather whose root owns every unit; a reduce the reduce-scatter of it)."""
        if self.root is None:
            return self.shards
        return tuple((0, self.units if r == self.root else 0) for r in range(self.nranks))

    @property
    def nranks(self) -> int:
        return len(self.ranks)

    @classmethod
    def from_plan(cls, doc: Any) -> PlanDocument:
        """Read a plan document; raises PlanError naming the first malformed field."""
        if not isinstance(doc, Mapping):
            raise PlanError(f"plan document must be a JSON object, got {type(doc).__name__}")
        collective = doc.get("collective", "allreduce")
        if collective not in COLLECTIVES:
            raise PlanError(
                f"collective {collective!r} is not supported (one of {', '.join(COLLECTIVES)})"
            )
        ranks = doc.get("ranks")
        if (
            not isinstance(ranks, list)
            or not ranks
            or not all(isinstance(r, str) and r for r in ranks)
        ):
            raise PlanError("ranks must be a non-empty list of endpoint ids")
        if len(set(ranks)) != len(ranks):
            raise PlanError("ranks must be distinct: one endpoint id a rank")
        prog = doc.get("program")
        if prog is None and COMPACT_KEY in doc:
            try:
                prog = expand_program(doc[COMPACT_KEY])
            except CompactError as exc:
                raise PlanError(str(exc)) from None
        if not isinstance(prog, Mapping):
            raise PlanError("program is missing or not an object")
        units = prog.get("units")
        if isinstance(units, bool) or not isinstance(units, int) or units < 1:
            raise PlanError(f"program.units must be a positive integer, got {units!r}")
        raw_steps = prog.get("steps")
        if not isinstance(raw_steps, list):
            raise PlanError("program.steps must be a list of steps")
        routes = _routes(prog.get("routes", []))
        n = len(ranks)
        steps = tuple(
            tuple(_transfer(t, s, i, ranks, units, routes) for i, t in enumerate(_step(st, s)))
            for s, st in enumerate(raw_steps)
        )
        canonical = json.dumps(
            {"ranks": ranks, "program": prog}, sort_keys=True, separators=(",", ":")
        )
        digest = hashlib.sha256(canonical.encode()).hexdigest()
        plan_id = doc.get("plan_id")
        shards = _shards(doc, n, units) if collective in ("reducescatter", "allgather") else None
        root = doc.get("root")
        if collective in ROOTED:
            root = _rank_index("plan", "root", root, n)
        elif root is not None:
            raise PlanError(f"root applies to {' and '.join(ROOTED)} plans only, not {collective}")
        return cls(
            ranks=tuple(ranks),
            units=units,
            steps=steps,
            plan_id=str(plan_id) if plan_id is not None else digest[:16],
            digest=digest,
            collective=collective,
            shards=shards,
            routes=routes,
            root=root,
        )

    def check(self) -> None:
        """Check the program is a correct instance of its collective; raise PlanError."""
        if self.collective == "allreduce":
            self.check_allreduce()
            return
        owned = self.owned
        assert owned is not None
        owner = np.full(self.units, -1)
        for r, (a, b) in enumerate(owned):
            owner[a:b] = r
        if self.collective in ("allgather", "broadcast"):
            what = "an all-gather" if self.root is None else "a broadcast"
            valid = np.array([owner == r for r in range(self.nranks)])
            for s, step in enumerate(self.steps):
                start = valid.copy()
                for t in step:
                    if t.reduce:
                        raise PlanError(f"step {s}: {what} has no reductions")
                    valid[t.dst, t.lo : t.hi] = start[t.src, t.lo : t.hi]
            if not valid.all():
                r, u = (int(x) for x in np.argwhere(~valid)[0])
                raise PlanError(f"not {what}: rank {r} lacks the owner's unit {u}")
            return
        self.check_allreduce(owners=owner)

    def check_allreduce(self, owners: np.ndarray | None = None) -> None:
        """Simulate which inputs each rank holds per unit; raise PlanError unless every rank
        ends with every input counted exactly once (with ``owners``, a reduce-scatter: only
        each unit's owner)."""
        bounds = sorted(
            {0, self.units}
            | {b for st in self.steps for t in st for b in (t.lo, t.hi)}
            | {b for sh in (self.owned or ()) for b in sh}
        )
        index = {b: i for i, b in enumerate(bounds)}
        nseg, n = len(bounds) - 1, self.nranks
        dtype: Any = np.uint64 if n <= 63 else object
        masks = np.zeros((n, nseg), dtype=dtype)
        for r in range(n):
            masks[r, :] = dtype(1 << r) if dtype is np.uint64 else (1 << r)
        for s, step in enumerate(self.steps):
            start = masks.copy()
            replaced = np.zeros((n, nseg), dtype=bool)
            reduced = np.zeros((n, nseg), dtype=bool)
            for i, t in enumerate(step):
                a, b = index[t.lo], index[t.hi]
                where = f"step {s} transfer {i} ({t.src}->{t.dst}, units [{t.lo}, {t.hi}))"
                if replaced[t.dst, a:b].any() or (not t.reduce and reduced[t.dst, a:b].any()):
                    raise PlanError(
                        f"{where}: rank {t.dst} receives a replacing value and "
                        "another value for the same units in one step"
                    )
                vals = start[t.src, a:b]
                if t.reduce:
                    if np.any(masks[t.dst, a:b] & vals != 0):
                        raise PlanError(f"{where}: counts some rank's input twice")
                    masks[t.dst, a:b] |= vals
                    reduced[t.dst, a:b] = True
                else:
                    masks[t.dst, a:b] = vals
                    replaced[t.dst, a:b] = True
        full = (1 << n) - 1
        wrong = masks != (np.uint64(full) if dtype is np.uint64 else full)
        if owners is not None:
            wrong &= np.array([[owners[bounds[k]] == r for k in range(nseg)] for r in range(n)])
        bad = np.argwhere(wrong)
        if len(bad):
            r, k = (int(x) for x in bad[0])
            missing = full & ~int(masks[r, k])
            who = [i for i in range(n) if missing >> i & 1]
            raise PlanError(
                f"not an all-reduce: after the last step rank {r} units "
                f"[{bounds[k]}, {bounds[k + 1]}) lack the inputs of ranks "
                f"{who[:8]}{'...' if len(who) > 8 else ''}"
            )


def _shards(doc: Mapping[str, Any], n: int, units: int) -> tuple[tuple[int, int], ...]:
    raw = doc.get("shards")
    if not isinstance(raw, list) or len(raw) != n:
        raise PlanError(f"shards must be a list of {n} [a, b] unit ranges, one per rank")
    out = []
    for i, sh in enumerate(raw):
        if (
            not isinstance(sh, list)
            or len(sh) != 2
            or not all(isinstance(c, int) and not isinstance(c, bool) for c in sh)
            or not 0 <= sh[0] <= sh[1] <= units
        ):
            raise PlanError(f"shards[{i}] must be [a, b] with 0 <= a <= b <= {units}")
        out.append((sh[0], sh[1]))
    at = 0
    for a, b in sorted(s for s in out if s[0] < s[1]):
        if a != at:
            raise PlanError(f"shards must be disjoint and cover [0, {units})")
        at = b
    if at != units:
        raise PlanError(f"shards must cover [0, {units})")
    return tuple(out)


def _step(step: Any, s: int) -> list[Any]:
    if not isinstance(step, list):
        raise PlanError(f"program.steps[{s}] must be a list of transfers")
    return step


def _routes(table: Any) -> tuple[tuple[str, ...], ...]:
    if not isinstance(table, list):
        raise PlanError("program.routes must be a list of paths")
    for k, path in enumerate(table):
        if not isinstance(path, list) or len(path) < 2 or not all(isinstance(p, str) for p in path):
            raise PlanError(f"program.routes[{k}] must be a list of at least two node ids")
    return tuple(tuple(path) for path in table)


def _rank_index(where: str, name: str, v: Any, n: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < n:
        raise PlanError(f"{where}.{name} must be a rank index in [0, {n}), got {v!r}")
    return v


def _transfer(
    t: Any, s: int, i: int, ranks: list[str], units: int, routes: tuple[tuple[str, ...], ...]
) -> Transfer:
    where = f"program.steps[{s}][{i}]"
    if not isinstance(t, Mapping):
        raise PlanError(f"{where} must be an object")
    chunk, reduce = t.get("chunk"), t.get("reduce")
    src = _rank_index(where, "src", t.get("src"), len(ranks))
    dst = _rank_index(where, "dst", t.get("dst"), len(ranks))
    if src == dst:
        raise PlanError(f"{where}: src and dst are both rank {src}")
    if (
        not isinstance(chunk, list)
        or len(chunk) != 2
        or not all(isinstance(c, int) and not isinstance(c, bool) for c in chunk)
        or not 0 <= chunk[0] < chunk[1] <= units
    ):
        raise PlanError(f"{where}.chunk must be [a, b] with 0 <= a < b <= {units}, got {chunk!r}")
    if not isinstance(reduce, bool):
        raise PlanError(f"{where}.reduce must be true or false, got {reduce!r}")
    path: tuple[str, ...] | None = None
    if "route" in t:
        k = t["route"]
        if "path" in t:
            raise PlanError(f"{where}: has both path and route")
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < len(routes):
            raise PlanError(f"{where}.route must index program.routes [0, {len(routes)})")
        path = routes[k]
        if path[0] != ranks[src] or path[-1] != ranks[dst]:
            raise PlanError(
                f"{where}: route {k} runs from {path[0]!r} to {path[-1]!r}, "
                f"not from {ranks[src]!r} to {ranks[dst]!r}"
            )
    elif t.get("path") is not None:
        raw = t["path"]
        if not isinstance(raw, list) or len(raw) < 2 or not all(isinstance(p, str) for p in raw):
            raise PlanError(f"{where}.path must be a list of at least two node ids")
        if raw[0] != ranks[src] or raw[-1] != ranks[dst]:
            raise PlanError(f"{where}: path must run from {ranks[src]!r} to {ranks[dst]!r}")
        path = tuple(raw)
    return Transfer(src, dst, chunk[0], chunk[1], reduce, path)
