"""Per-rank plan slices (docs/formats.md, Plan slice).

A slice of a plan document for rank R is the document's header (every field but the
program) plus a program holding only the transfers R sends or receives, each in the step it
runs in (``steps`` keeps its length; other ranks' transfers are dropped), with a route table
of the paths those transfers use. Its ``slice`` object names the rank, the plan, the whole
program's transfer count and ``digest``, the hash of the WHOLE program (``ranks`` and
``program``, the same value as ``PlanDocument.digest`` of the full document), so the ranks
of a job can check that their slices come from one plan before any message is sent.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from syncplan.core.compact import COMPACT_KEY, CompactError, expand_document
from syncplan.core.document import PlanDocument, PlanError

SLICE_KEY = "slice"
_HEX64 = re.compile(r"[0-9a-f]{64}")


def program_digest(ranks: list[str], program: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of ``{"ranks", "program"}`` (equals
    ``PlanDocument.from_plan(doc).digest`` for a document in the contract form)."""
    both = {"ranks": ranks, "program": program}
    canonical = json.dumps(both, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def is_slice(doc: Any) -> bool:
    """Whether ``doc`` is a plan slice (it carries a ``slice`` object)."""
    return isinstance(doc, Mapping) and SLICE_KEY in doc


def resolve_rank(ranks: list[str] | tuple[str, ...], rank: int | str) -> int:
    """The plan rank index of ``rank``: an index, an endpoint id of ``ranks``, or an index
    written as decimal digits; PlanError naming it otherwise."""
    if isinstance(rank, str):
        if rank in ranks:
            return ranks.index(rank)
        if not rank.isdecimal():
            raise PlanError(f"rank {rank!r} is neither an index nor an endpoint of the plan")
        rank = int(rank)
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < len(ranks):
        raise PlanError(f"rank {rank!r} is outside the plan's ranks [0, {len(ranks)})")
    return rank


class Slicer:
    """One full plan document read once, sliced for any rank: the digest and the per-rank
    transfer index are computed here, so each ``slice`` costs only that rank's transfers."""

    def __init__(self, doc: Mapping[str, Any]) -> None:
        if is_slice(doc):
            raise PlanError("the document is already a slice; slice the full plan")
        try:
            full = expand_document(dict(doc))
        except CompactError as exc:
            raise PlanError(str(exc)) from None
        checked = PlanDocument.from_plan(full)  # the structural checks, once
        prog = full["program"]
        self.ranks: list[str] = list(full["ranks"])
        self.digest = checked.digest
        self.plan_id = checked.plan_id
        self.header = {k: v for k, v in full.items() if k != "program"}
        self.units = prog["units"]
        self.table: list[list[str]] | None = prog.get("routes")
        self.steps: list[list[dict[str, Any]]] = prog["steps"]
        self.total = sum(len(st) for st in self.steps)
        self.index: list[list[tuple[int, int]]] = [[] for _ in self.ranks]
        for s, st in enumerate(self.steps):
            for i, t in enumerate(st):
                self.index[t["src"]].append((s, i))
                self.index[t["dst"]].append((s, i))

    def slice(self, rank: int | str) -> dict[str, Any]:
        """Rank ``rank``'s slice (an index or an endpoint id); PlanError when the plan has
        no such rank."""
        r = resolve_rank(self.ranks, rank)
        steps: list[list[dict[str, Any]]] = [[] for _ in self.steps]
        used: dict[int, int] = {}
        for s, i in self.index[r]:
            t = self.steps[s][i]
            if "route" in t:
                t = {**t, "route": used.setdefault(t["route"], len(used))}
            steps[s].append(t)
        program: dict[str, Any] = {"units": self.units}
        if self.table is not None:
            program["routes"] = [self.table[k] for k in used]
        program["steps"] = steps
        return {
            **self.header,
            "program": program,
            SLICE_KEY: {
                "rank": r,
                "endpoint": self.ranks[r],
                "of_plan": self.plan_id,
                "transfers": len(self.index[r]),
                "transfers_total": self.total,
                "digest": self.digest,
            },
        }


def slice_document(doc: Mapping[str, Any], rank: int | str) -> dict[str, Any]:
    """Rank ``rank``'s slice of the plan document ``doc`` (full or compact form); PlanError
    for a malformed document or a rank the plan does not have."""
    return Slicer(doc).slice(rank)


def check_slice(doc: Any, rank: int | str | None = None) -> PlanDocument:
    """Read a slice (full or compact program) for ``rank`` (None: the one it names): the
    structural checks of ``PlanDocument.from_plan`` on the transfers it holds, and that
    each of them is the rank's own. Returns the PlanDocument of its transfers whose
    ``digest`` is the whole program's; raises PlanError naming the first problem."""
    if not is_slice(doc):
        raise PlanError("not a plan slice: the document has no slice object")
    info = doc[SLICE_KEY]
    if not isinstance(info, Mapping):
        raise PlanError("slice must be an object")
    r, total, digest = info.get("rank"), info.get("transfers_total"), info.get("digest")
    if isinstance(total, bool) or not isinstance(total, int) or total < 0:
        raise PlanError(f"slice.transfers_total must be a count, got {total!r}")
    if not isinstance(digest, str) or not _HEX64.fullmatch(digest):
        raise PlanError(f"slice.digest must be a sha256 hex digest, got {digest!r}")
    if COMPACT_KEY in doc and "program" not in doc:
        try:
            doc = expand_document(dict(doc))
        except CompactError as exc:
            raise PlanError(str(exc)) from None
    plan = PlanDocument.from_plan(doc)
    if isinstance(r, bool) or not isinstance(r, int) or not 0 <= r < plan.nranks:
        raise PlanError(f"slice.rank must be a rank index in [0, {plan.nranks}), got {r!r}")
    if rank is not None and resolve_rank(plan.ranks, rank) != r:
        raise PlanError(f"the slice is rank {r}'s, not rank {rank!r}'s")
    if info.get("endpoint", plan.ranks[r]) != plan.ranks[r]:
        raise PlanError(f"slice.endpoint {info.get('endpoint')!r} is not rank {r}'s endpoint")
    if info.get("of_plan") != plan.plan_id:
        raise PlanError(f"slice.of_plan {info.get('of_plan')!r} is not plan_id {plan.plan_id!r}")
    held = 0
    for s, step in enumerate(plan.steps):
        for i, t in enumerate(step):
            if r not in (t.src, t.dst):
                raise PlanError(
                    f"program.steps[{s}][{i}] ({t.src}->{t.dst}) is not rank {r}'s transfer"
                )
            held += 1
    if held > total:
        raise PlanError(f"the slice holds {held} transfers, more than transfers_total {total}")
    if "transfers" in info and info["transfers"] != held:
        raise PlanError(f"slice.transfers is {info['transfers']!r} but it holds {held}")
    return replace(plan, digest=digest)
