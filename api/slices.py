"""One rank's slice of a plan response (``?rank=R``; docs/formats.md, Plan slice).

Sliced from the full-form body the route already holds: a job's plan (the document plus
``job_id`` and ``topology_version``, or ``plans``, each document sliced) or a stored plan.
The slice's ETag is the full body's with the rank (and form) added, so it changes exactly
when the whole plan does, and two ranks' slices never share one.
"""

from __future__ import annotations

import json
import threading
from typing import Annotated, Any

from anyio.to_thread import run_sync
from fastapi import Query
from syncplan.api.encoding import Body
from syncplan.api.errors import APIError
from syncplan.core.compact import compact_document
from syncplan.core.document import PlanError
from syncplan.core.lru import LRU
from syncplan.core.slice import Slicer, resolve_rank

RankQuery = Annotated[
    str | None,
    Query(
        max_length=256,
        description="answer only this rank's slice (an index or an endpoint id; "
        'docs/formats.md, "Plan slice"); its ETag changes exactly when the whole plan does',
    ),
]
_KEEP = 2  # parsed plans kept (by the full body's ETag): a parsed plan is ~7x its JSON
_SLICE_BYTES = 64 << 20  # made slices kept (by ETag, rank and form), serialized and gzipped
_lock = threading.Lock()
_slicers: LRU[str, tuple[dict[str, Any], list[Slicer]]] = LRU(_KEEP)
_made: LRU[tuple[str, str, str], Body] = LRU(
    1 << 16, _SLICE_BYTES, lambda b: len(b.raw) + len(b.gz or b"")
)


def _slicers_of(full: Body) -> tuple[dict[str, Any], list[Slicer]]:
    """(the body's other fields, one Slicer per plan document), parsed once per ETag."""
    with _lock:
        got = _slicers.get(full.etag)
        if got is not None:
            return got
        body = json.loads(full.raw)
        if isinstance(body.get("plans"), list):
            docs, rest = body["plans"], {k: v for k, v in body.items() if k != "plans"}
            got = (rest, [Slicer(d) for d in docs])
        else:
            got = ({}, [Slicer(body)])
        _slicers.put(full.etag, got)
        return got


def _slice(full: Body, rank: str, form: str) -> Body:
    """The slice, made once per (plan, rank, form): ranks that fetch again (retries,
    If-None-Match) cost a lookup."""
    key = (full.etag, rank, form)
    with _lock:
        held = _made.get(key)
    if held is not None:
        return held
    made = _make(full, rank, form)
    with _lock:
        _made.put(key, made)
    return made


def _make(full: Body, rank: str, form: str) -> Body:
    rest, slicers = _slicers_of(full)
    try:
        r = resolve_rank(slicers[0].ranks, rank)
        docs = [s.slice(r) for s in slicers]
    except PlanError as exc:
        raise APIError(422, str(exc), ["query", "rank"]) from None
    if form == "compact":
        docs = [compact_document(d) for d in docs]
    out = {**rest, "plans": docs} if rest else docs[0]
    made = Body.of(json.dumps(out, separators=(",", ":")).encode())
    tag = full.etag.rstrip('"') + f".r{r}{'c' if form == 'compact' else ''}" + '"'
    return Body(made.raw, made.gz, tag)


async def slice_body(full: Body, rank: str, form: str) -> Body:
    """Rank ``rank``'s slice (index or endpoint id) of the full-form ``full`` in ``form``;
    APIError 422 naming the rank when the plan has no such rank."""
    return await run_sync(_slice, full, rank, form)
