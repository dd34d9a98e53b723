"""Job schedules (GET /v1/jobs/{id}/schedule) and measured profiles (PUT .../profile).

The schedule itself is planner.schedule's; this module resolves the job, builds it in a
worker thread, coalesces concurrent requests and caches the encoded answer per (job, store
generation, graph version). A new profile is stored into the job's spec only when it
differs from the stored one, which bumps the store generation: one re-plan per change.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from typing import Any

from anyio.to_thread import run_sync
from syncplan.api.encoding import GZIP_LEVEL, Body
from syncplan.api.errors import APIError, planner_error
from syncplan.api.jobs import JobEntry, JobService, resolve_ranks
from syncplan.api.models import JobProfile
from syncplan.api.state import Snapshot
from syncplan.core.errors import PlannerError
from syncplan.core.options import PlanOptions

# the profile's times are rounded to this before comparing, so jitter between two
# measurements of the same job does not trigger a re-plan
PROFILE_RESOLUTION_S = 1e-4
CACHE_ENTRIES = 256


def build(
    snapshot: Snapshot,
    ranks: list[str],
    entry: JobEntry,
    options: PlanOptions,
) -> dict[str, Any]:
    """The schedule document (blocking): the job's gradients with the measured profile's
    times where there is one, else the declared ones; priced with the service's cost-model
    settings."""
    from syncplan.planner.schedule import TensorSpec, make_schedule

    spec = entry.spec
    assert spec.gradients is not None and snapshot.topology is not None
    prof = spec.profile
    tensors = [
        TensorSpec(
            g.numel,
            g.dtype,
            float(prof.forward_s[i] if prof else g.forward_s or 0.0),
            float(prof.backward_s[i] if prof else g.backward_s or 0.0),
        )
        for i, g in enumerate(spec.gradients)
    ]
    doc = make_schedule(
        snapshot.topology,
        ranks,
        tensors,
        options=options,
    )
    if prof is not None:
        doc["profile"] = "measured"
        doc["profile_iterations"] = prof.iterations
    return doc


def _encode(doc: dict[str, Any]) -> Body:
    return Body.of(json.dumps(doc, separators=(",", ":"), allow_nan=False).encode(), GZIP_LEVEL)


class ScheduleService:
    """Per JobService: cached schedule bodies and in-flight builds."""

    def __init__(self, jobs: JobService) -> None:
        self.jobs = jobs
        self.builds = 0  # schedules built (the tests count re-plans with it)
        self._cache: dict[tuple[str, int, str], Body] = {}
        self._inflight: dict[tuple[str, int, str], asyncio.Task[Body]] = {}

    async def get(self, job_id: str, snapshot: Snapshot) -> Body:
        entry = await self.jobs.entry(job_id, snapshot)
        key = (job_id, snapshot.generation, snapshot.version)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        task = self._inflight.get(key)
        if task is None:
            task = asyncio.create_task(self._build(job_id, entry, snapshot))
            self._inflight[key] = task
            task.add_done_callback(lambda t: self._done(key, t))
        return await asyncio.shield(task)

    def _done(self, key: tuple[str, int, str], task: asyncio.Task[Body]) -> None:
        self._inflight.pop(key, None)
        if not task.cancelled() and task.exception() is None:
            if len(self._cache) >= CACHE_ENTRIES:
                self._cache.pop(next(iter(self._cache)))
            self._cache[key] = task.result()

    async def _build(self, job_id: str, entry: JobEntry, snapshot: Snapshot) -> Body:
        if entry.spec.gradients is None:
            raise APIError(
                409,
                f"job {job_id!r} declares no gradients: PUT it with 'gradients' to get a schedule",
                ["path", "job_id"],
                "no_gradients",
            )
        ranks = resolve_ranks(snapshot, entry.spec.ranks, status=409)
        try:
            o = self.jobs.plans.options  # a schedule prices the step floor and message ends
            options = PlanOptions(o.min_step_s, o.message_overhead_s, o.cores)
            doc = await run_sync(build, snapshot, ranks, entry, options)
        except PlannerError as exc:
            err = planner_error(exc, ["body"])
            raise APIError(409, err.msg, err.loc, err.type) from None
        self.builds += 1
        head = {"job_id": job_id, "topology_version": snapshot.version}
        return await run_sync(_encode, {**head, **doc})

    async def put_profile(self, job_id: str, profile: JobProfile, snapshot: Snapshot) -> bool:
        """Store ``profile`` into the job if it differs (rounded); True when it changed."""
        entry = await self.jobs.entry(job_id, snapshot)
        grads = entry.spec.gradients
        if grads is None:
            raise APIError(
                409,
                f"job {job_id!r} declares no gradients to profile",
                ["path", "job_id"],
                "no_gradients",
            )
        if len(profile.forward_s) != len(grads):
            raise APIError(
                422,
                f"the job has {len(grads)} gradients; the profile has "
                f"{len(profile.forward_s)} entries",
                ["body", "forward_s"],
            )
        r = PROFILE_RESOLUTION_S
        rounded = profile.model_copy(
            update={
                "forward_s": [round(x / r) * r for x in profile.forward_s],
                "backward_s": [round(x / r) * r for x in profile.backward_s],
            }
        )
        old = entry.spec.profile
        if old is not None and (old.forward_s, old.backward_s) == (
            rounded.forward_s,
            rounded.backward_s,
        ):
            return False
        await run_sync(self.jobs.put, job_id, entry.spec.model_copy(update={"profile": rounded}))
        return True


_SERVICES: weakref.WeakKeyDictionary[JobService, ScheduleService] = weakref.WeakKeyDictionary()


def schedules_of(jobs: JobService) -> ScheduleService:
    """The app's ScheduleService, one per JobService."""
    svc = _SERVICES.get(jobs)
    if svc is None:
        svc = _SERVICES[jobs] = ScheduleService(jobs)
    return svc
