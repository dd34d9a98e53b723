"""Jobs: rank resolution against the current graph and the cached job-plan responses."""

from __future__ import annotations

import asyncio
import json
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from anyio.to_thread import run_sync
from sqlalchemy.orm import Session, sessionmaker
from syncplan.api import store
from syncplan.api.encoding import GZIP_LEVEL, Body
from syncplan.api.errors import APIError, planner_error
from syncplan.api.models import JobCreate, RankRef
from syncplan.api.planning import COMPACT_GZIP_LEVEL, PlanKey, PlanService, compact_body, parse_size
from syncplan.api.state import ClusterState, Snapshot
from syncplan.core.errors import PlannerError
from syncplan.core.options import PlanOptions


def resolve_ranks(snapshot: Snapshot, ranks: list[str | RankRef], status: int = 422) -> list[str]:
    """Endpoint ids for the job's ranks; ``status`` (422 or 409) with the field otherwise."""
    topo = snapshot.topology
    if topo is None:
        raise APIError(
            status,
            "the cluster graph is empty: no agent has reported and no fabric is declared",
            ["body", "ranks"],
            "no_topology",
        )
    out: list[str] = []
    for i, r in enumerate(ranks):
        if isinstance(r, str):
            out.append(r)
            continue
        loc: list[str | int] = ["body", "ranks", i]
        if r.host in snapshot.stale:
            raise APIError(
                status,
                f"host {r.host!r} is stale (no report within the TTL)",
                [*loc, "host"],
                "stale_host",
            )
        local = snapshot.endpoints_by_host.get(r.host)
        if not local:
            raise APIError(status, f"unknown host {r.host!r}", [*loc, "host"], "unknown_host")
        if r.gpu is not None:
            nid = f"{r.host}/gpu{r.gpu}"
            if nid not in topo.nodes:
                raise APIError(
                    status,
                    f"host {r.host!r} has no GPU {r.gpu} ({nid})",
                    [*loc, "gpu"],
                    "unknown_rank",
                )
            out.append(nid)
        else:
            assert r.local_rank is not None
            if r.local_rank >= len(local):
                raise APIError(
                    status,
                    f"host {r.host!r} has {len(local)} endpoints, no local_rank {r.local_rank}",
                    [*loc, "local_rank"],
                    "unknown_rank",
                )
            out.append(local[r.local_rank])
    try:
        topo.check_ranks(out)
    except PlannerError as exc:
        err = planner_error(exc, ["body"])
        raise APIError(status, err.msg, err.loc, err.type) from None
    return out


def sizes_of(spec: JobCreate) -> list[int]:
    if spec.bucket_sizes is not None:
        return [parse_size(s, ["body", "bucket_sizes", i]) for i, s in enumerate(spec.bucket_sizes)]
    if spec.size_bytes is None:
        assert spec.gradients is not None
        return [gradient_bytes(spec)]
    return [parse_size(spec.size_bytes, ["body", "size_bytes"])]


def gradient_bytes(spec: JobCreate) -> int:
    from syncplan.planner.schedule import DTYPE_BYTES

    return sum(g.numel * DTYPE_BYTES[g.dtype] for g in spec.gradients or ())


def _compose(head: dict[str, Any], docs: list[bytes], buckets: bool, form: str) -> Body:
    """The response: one document with ``head``'s keys spliced in front, or ``head`` plus
    ``plans``; then compressed (a worker thread: documents can be tens of MB)."""
    level = GZIP_LEVEL
    if form == "compact":
        done: dict[int, bytes] = {}  # equal bucket sizes share one document object
        for d in docs:
            if id(d) not in done:
                done[id(d)] = compact_body(d)
        docs = [done[id(d)] for d in docs]
        level = COMPACT_GZIP_LEVEL
    if buckets:
        prefix = json.dumps(head, separators=(",", ":"))[:-1].encode()
        return Body.of(prefix + b',"plans":[' + b",".join(docs) + b"]}", level)
    if b'"topology_version":' in docs[0][-64:]:  # the service's documents end with it
        head = {k: v for k, v in head.items() if k != "topology_version"}
    prefix = json.dumps(head, separators=(",", ":"))[:-1].encode()
    return Body.of(prefix + b"," + docs[0][1:], level)


@dataclass(frozen=True)
class JobEntry:
    spec: JobCreate
    sizes: list[int]
    updated_at: float
    generation: int


class JobService:
    """Job specs cached per store generation; job-plan responses cached as bytes."""

    def __init__(
        self,
        factory: sessionmaker[Session],
        cluster: ClusterState,
        plans: PlanService,
        cache_size: int,
        cache_bytes: int = 512 << 20,
    ) -> None:
        self._factory, self._cluster, self.plans = factory, cluster, plans
        self._jobs: dict[str, JobEntry] = {}
        self._responses: OrderedDict[tuple[str, int, str, str], Body] = OrderedDict()
        self._size = cache_size
        self._max_bytes = cache_bytes
        self._bytes = 0
        self._inflight: dict[tuple[str, int, str, str], asyncio.Task[Body]] = {}

    def put(self, job_id: str, spec: JobCreate) -> float:
        """Store the job (blocking)."""
        now = time.time()
        with self._factory() as s:
            store.put_job(s, job_id, spec.model_dump(mode="json", exclude_none=True), now)
        self._cluster.invalidate()
        return now

    def delete(self, job_id: str) -> bool:
        with self._factory() as s:
            gone = store.delete_job(s, job_id)
        self._cluster.invalidate()
        return gone

    def _load(self, job_id: str, generation: int) -> JobEntry | None:
        with self._factory() as s:
            row = store.get_job(s, job_id)
            if row is None:
                return None
            spec = JobCreate.model_validate(json.loads(row.spec))
            return JobEntry(spec, sizes_of(spec), row.updated_at, generation)

    async def entry(self, job_id: str, snapshot: Snapshot) -> JobEntry:
        entry = self._jobs.get(job_id)
        if entry is None or entry.generation != snapshot.generation:
            entry = await run_sync(self._load, job_id, snapshot.generation)
            if entry is None:
                self._jobs.pop(job_id, None)
                raise APIError(404, f"no job {job_id!r}", ["path", "job_id"], "not_found")
            if len(self._jobs) > 100_000:
                self._jobs.clear()
            self._jobs[job_id] = entry
        return entry

    def cached_plan(self, job_id: str, snapshot: Snapshot, form: str = "full") -> Body | None:
        entry = self._jobs.get(job_id)
        if entry is None or entry.generation != snapshot.generation:
            return None
        return self._responses.get((job_id, snapshot.generation, snapshot.version, form))

    async def peek(self, job_id: str, snapshot: Snapshot) -> dict[str, Any] | str:
        """The job's first plan document when it was made for the current graph (kept in
        memory or in the store), else why there is none; never starts a solve (the web
        page shows plans, it does not make them). 404 APIError for an unknown job."""
        cached = self.cached_plan(job_id, snapshot, "full")
        if cached is None:
            entry = await self.entry(job_id, snapshot)
            try:
                ranks = resolve_ranks(snapshot, entry.spec.ranks, status=409)
            except APIError as exc:
                return exc.msg
            key = PlanKey(
                snapshot.version,
                tuple(ranks),
                entry.spec.collective,
                entry.sizes[0],
                entry.spec.algorithm,
                options=PlanOptions(effort=entry.spec.effort),
            )
            plan = await self.plans.known(key)
            if plan is None:
                return (
                    f"not planned yet for graph version {snapshot.version} "
                    f"(GET /v1/jobs/{job_id}/plan makes it)"
                )
            return await run_sync(json.loads, plan.body.raw)
        doc = await run_sync(json.loads, cached.raw)
        return doc["plans"][0] if "plans" in doc else doc

    async def plan(self, job_id: str, snapshot: Snapshot, form: str = "full") -> Body:
        """The job's plan response for the current graph (see JobPlanPublic) in ``form``
        (``full``: docs/formats.md documents; ``compact``: programs as planner.compact); all the
        ranks of a job fetching at once share one build."""
        cached = self.cached_plan(job_id, snapshot, form)
        if cached is not None:
            return cached
        key = (job_id, snapshot.generation, snapshot.version, form)
        task = self._inflight.get(key)
        if task is None:
            task = asyncio.create_task(self._build(job_id, snapshot, form))
            self._inflight[key] = task
            task.add_done_callback(lambda t: self._built(key, t))
        return await self.plans.quota.wait(task)

    def _built(self, key: tuple[str, int, str, str], task: asyncio.Task[Body]) -> None:
        self._inflight.pop(key, None)
        if not task.cancelled():
            task.exception()  # retrieved here so an unawaited failure is not logged

    async def _build(self, job_id: str, snapshot: Snapshot, form: str) -> Body:
        entry = await self.entry(job_id, snapshot)
        ranks = resolve_ranks(snapshot, entry.spec.ranks, status=409)
        keys = [
            PlanKey(
                snapshot.version,
                tuple(ranks),
                entry.spec.collective,
                size,
                entry.spec.algorithm,
                options=PlanOptions(effort=entry.spec.effort),
            )
            for size in entry.sizes
        ]
        plans: dict[PlanKey, Any] = {}
        for k in dict.fromkeys(keys):  # one at a time: a job never holds every solver
            plans[k] = await self.plans.get(snapshot, k, owner=f"job:{job_id}")
        head: dict[str, Any] = {"job_id": job_id, "topology_version": snapshot.version}
        if entry.spec.bucket_sizes is not None:
            head["bucket_sizes"] = entry.sizes
        docs = [plans[k].body.raw for k in keys]
        encoded = await run_sync(_compose, head, docs, entry.spec.bucket_sizes is not None, form)
        self._keep((job_id, snapshot.generation, snapshot.version, form), encoded)
        return encoded

    def _keep(self, key: tuple[str, int, str, str], body: Body) -> None:
        if body.size > self._max_bytes:
            return
        old = self._responses.pop(key, None)
        self._bytes += body.size - (old.size if old is not None else 0)
        self._responses[key] = body
        while len(self._responses) > self._size or self._bytes > self._max_bytes:
            _, dropped = self._responses.popitem(last=False)
            self._bytes -= dropped.size

    def public(self, job_id: str, entry: JobEntry, snapshot: Snapshot) -> dict[str, Any]:
        return {
            "job_id": job_id,
            "spec": entry.spec.model_dump(mode="json", exclude_none=True),
            "sizes": entry.sizes,
            "topology_version": snapshot.version,
            "updated_at": entry.updated_at,
        }
