"""Jobs: what a launcher registers and fetches at start-up."""

from __future__ import annotations

from typing import Annotated

from anyio.to_thread import run_sync
from fastapi import APIRouter, Path, Request, Response
from syncplan.api.deps import AUTH_ERRORS, JobsDep, JobToken, PlanFormat, SnapshotDep
from syncplan.api.encoding import respond
from syncplan.api.errors import APIError, responses
from syncplan.api.jobs import resolve_ranks, sizes_of
from syncplan.api.models import (
    JobCreate,
    JobId,
    JobPlanPublic,
    JobProfile,
    JobPublic,
    JobSchedulePublic,
    ProfileAccepted,
)
from syncplan.api.schedules import schedules_of
from syncplan.api.slices import RankQuery, slice_body
from syncplan.api.state import utc

router = APIRouter(prefix="/v1/jobs", tags=["jobs"], responses=AUTH_ERRORS)

JobPath = Annotated[JobId, Path()]


@router.put("/{job_id}", response_model=JobPublic, responses=responses(413, 422))
async def put_job(
    job_id: JobPath, job: JobCreate, _: JobToken, snapshot: SnapshotDep, jobs: JobsDep
) -> JobPublic:
    """Register or replace a job: ranks by endpoint id or ``{"host", "gpu"|"local_rank"}``,
    and ``size_bytes`` or ``bucket_sizes``. Ranks must resolve in the current graph."""
    ranks = resolve_ranks(snapshot, job.ranks, status=422)
    sizes = sizes_of(job)
    updated = await run_sync(jobs.put, job_id, job)
    return JobPublic(
        job_id=job_id,
        spec=job.model_dump(mode="json", exclude_none=True),
        sizes=sizes,
        ranks=ranks,
        topology_version=snapshot.version,
        updated_at=utc(updated),
    )


@router.get("/{job_id}", response_model=JobPublic, responses=responses(404))
async def get_job(job_id: JobPath, _: JobToken, snapshot: SnapshotDep, jobs: JobsDep) -> JobPublic:
    """The stored job and its ranks in the current graph."""
    entry = await jobs.entry(job_id, snapshot)
    ranks: list[str] | None
    problem = None
    try:
        ranks = resolve_ranks(snapshot, entry.spec.ranks, status=409)
    except APIError as exc:
        ranks, problem = None, exc.msg
    return JobPublic(
        job_id=job_id,
        spec=entry.spec.model_dump(mode="json", exclude_none=True),
        sizes=entry.sizes,
        ranks=ranks,
        problem=problem,
        topology_version=snapshot.version,
        updated_at=utc(entry.updated_at),
    )


@router.get(
    "/{job_id}/plan",
    response_class=Response,
    responses={
        200: {"model": JobPlanPublic, "description": "the job's plan"},
        **responses(404, 409, 422, 503, 504),
    },
)
async def get_job_plan(
    http: Request,
    job_id: JobPath,
    _: JobToken,
    snapshot: SnapshotDep,
    jobs: JobsDep,
    form: PlanFormat = "full",
    rank: RankQuery = None,
) -> Response:
    """The job's plan for the current graph, cached per (graph version, request). For a
    ``size_bytes`` job: the plan document plus ``job_id`` and ``topology_version``; for a
    ``bucket_sizes`` job: ``plans``, one document per bucket. 409 when the job's ranks are
    no longer in the graph (a host went stale) or no plan exists. Sent gzip-encoded when
    accepted; ``ETag`` / ``If-None-Match`` give 304 for a response the client holds.
    ``?rank=R``: only rank R's slice of each document (422 naming R when the plan has no
    such rank)."""
    if rank is not None:
        full = jobs.cached_plan(job_id, snapshot) or await jobs.plan(job_id, snapshot)
        return respond(http, await slice_body(full, rank, form))
    body = jobs.cached_plan(job_id, snapshot, form) or await jobs.plan(job_id, snapshot, form)
    return respond(http, body)


@router.get(
    "/{job_id}/schedule",
    response_class=Response,
    responses={
        200: {"model": JobSchedulePublic, "description": "the job's schedule"},
        **responses(404, 409),
    },
)
async def get_job_schedule(
    http: Request, job_id: JobPath, _: JobToken, snapshot: SnapshotDep, jobs: JobsDep
) -> Response:
    """The job's synchronization schedule (docs/schedule.md): fusion buckets chosen by the
    cost model, per bucket its plans (all-reduce, or reduce-scatter + all-gather for DeAR),
    the predicted iteration time with and without overlap, and ``topology_version``. Built
    once per (job, graph version, profile); 409 when the job declares no gradients."""
    return respond(http, await schedules_of(jobs).get(job_id, snapshot))


@router.put("/{job_id}/profile", response_model=ProfileAccepted, responses=responses(404, 409))
async def put_job_profile(
    job_id: JobPath, profile: JobProfile, _: JobToken, snapshot: SnapshotDep, jobs: JobsDep
) -> ProfileAccepted:
    """Measured forward/backward times per gradient (the executor reports them); the
    schedule is re-planned once when they differ from the stored profile."""
    changed = await schedules_of(jobs).put_profile(job_id, profile, snapshot)
    return ProfileAccepted(job_id=job_id, changed=changed)


@router.delete("/{job_id}", status_code=204, response_class=Response, responses=responses(404))
async def delete_job(job_id: JobPath, _: JobToken, jobs: JobsDep) -> Response:
    """Forget a job."""
    if not await run_sync(jobs.delete, job_id):
        raise APIError(404, f"no job {job_id!r}", ["path", "job_id"], "not_found")
    return Response(status_code=204)
