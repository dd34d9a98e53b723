"""Plan requests and plan documents (docs/formats.md, Plan request, Plan document)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request, Response
from syncplan.api.deps import AUTH_ERRORS, JobToken, PlanFormat, PlansDep, SnapshotDep
from syncplan.api.encoding import respond
from syncplan.api.errors import APIError, responses
from syncplan.api.models import PlanCreate, PlanPublic
from syncplan.api.planning import PlanKey, parse_size
from syncplan.api.quota import token_owner
from syncplan.api.slices import RankQuery, slice_body
from syncplan.core.options import PlanOptions

router = APIRouter(prefix="/v1/plans", tags=["plans"], responses=AUTH_ERRORS)

PLAN_DOC: dict[int | str, dict[str, Any]] = {
    200: {"model": PlanPublic, "description": "a plan document"}
}


@router.post(
    "", response_class=Response, responses={**PLAN_DOC, **responses(409, 413, 422, 429, 503, 504)}
)
async def create_plan(
    http: Request,
    request: PlanCreate,
    _: JobToken,
    snapshot: SnapshotDep,
    plans: PlansDep,
    form: PlanFormat = "full",
) -> Response:
    """Plan on the current graph. Identical requests on the same graph version share one
    solve and one ``plan_id``; 422 names a bad field, 409 means no plan of that algorithm
    exists for the request."""
    d = request.density
    sparse = (
        None
        if d is None
        else (tuple(d) if isinstance(d, list) else d, request.density_overlap, request.block_elems)
    )
    key = PlanKey(
        snapshot.version,
        tuple(request.ranks),
        request.collective,
        parse_size(request.size_bytes, ["body", "size_bytes"]),
        request.algorithm,
        sparse=sparse,
        shards=request.shards,
        # one key per root: a rank's id and its index ask for the same plan
        root=request.ranks.index(request.root) if isinstance(request.root, str) else request.root,
        options=PlanOptions(effort=request.effort),
    )
    plan = await plans.get(snapshot, key, owner=token_owner(http.headers.get("authorization")))
    return respond(http, await plans.in_form(plan, form))


@router.get("/{plan_id}", response_class=Response, responses={**PLAN_DOC, **responses(404)})
async def get_plan(
    http: Request,
    plan_id: Annotated[str, Path(max_length=128)],
    _: JobToken,
    plans: PlansDep,
    form: PlanFormat = "full",
    rank: RankQuery = None,
) -> Response:
    """A plan made earlier (kept in the store across restarts); ``?rank=R``: only rank R's
    slice (docs/formats.md, Plan slice), 422 naming R when the plan has no such rank."""
    plan = await plans.by_id(plan_id)
    if plan is None:
        raise APIError(404, f"no plan {plan_id!r}", ["path", "plan_id"], "not_found")
    if rank is not None:
        return respond(http, await slice_body(plan.body, rank, form))
    return respond(http, await plans.in_form(plan, form))
