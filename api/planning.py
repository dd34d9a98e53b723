"""Plans: solve in worker threads, coalesce identical requests, cache in memory and in the
store. A plan is keyed by (topology version, canonical request)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from dataclasses import dataclass, replace
from typing import Any

import anyio
from anyio.to_thread import run_sync
from sqlalchemy.orm import Session, sessionmaker
from syncplan.api import store
from syncplan.api.encoding import Body
from syncplan.api.errors import APIError, planner_error
from syncplan.api.limits import MAX_SIZE_BYTES
from syncplan.api.metrics import Metrics
from syncplan.api.quota import SolveQuota
from syncplan.api.state import Snapshot
from syncplan.core.compact import CompactError, compact_document
from syncplan.core.errors import PlannerError
from syncplan.core.lru import LRU
from syncplan.core.options import DEFAULT_OPTIONS, PlanOptions
from syncplan.planner.sizes import parse_size as planner_parse_size


@dataclass(frozen=True)
class PlanKey:
    version: str
    ranks: tuple[str, ...]
    collective: str
    size_bytes: int
    algorithm: str
    # block-sparse request: (density, or one per rank), density_overlap, block_elems
    sparse: tuple[float | tuple[float, ...], bool, int] | None = None
    shards: str = "equal"  # reduce-scatter / all-gather: "equal" or "any"
    root: str | int | None = None  # broadcast / reduce: a rank or its index (None: rank 0)
    # the request's effort, with the service's cost-model terms (set by PlanService)
    options: PlanOptions = DEFAULT_OPTIONS

    @property
    def request(self) -> dict[str, Any]:
        req: dict[str, Any] = {
            "ranks": list(self.ranks),
            "collective": self.collective,
            "size_bytes": self.size_bytes,
            "algorithm": self.algorithm,
        }
        req.update(self.options.doc_fields())
        if self.shards != "equal":
            req["shards"] = self.shards
        if self.root is not None:
            req["root"] = self.root
        if self.sparse is not None:
            d, overlap, block = self.sparse
            req.update(
                density=list(d) if isinstance(d, tuple) else d,
                density_overlap=overlap,
                block_elems=block,
            )
        return req

    @property
    def digest(self) -> str:
        text = json.dumps([self.version, self.request], sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    @property
    def plan_id(self) -> str:
        """The id used when the planner gives none."""
        return f"{self.version[:12]}-{self.digest[:20]}"


@dataclass(frozen=True)
class CachedPlan:
    plan_id: str
    body: Body


COMPACT_GZIP_LEVEL = 9  # compact bodies are small: the best compression costs little


def compact_body(doc: bytes) -> bytes:
    """The serialized document with its program in the compact form (planner.compact), or
    as it is when the program cannot be encoded losslessly."""
    parsed = json.loads(doc)
    try:
        parsed = compact_document(parsed)
    except CompactError:
        return doc
    return json.dumps(parsed, separators=(",", ":"), allow_nan=False).encode()


def parse_size(value: int | str, loc: list[str | int]) -> int:
    """Bytes from an int or a string such as ``"256MiB"``; 422 naming ``loc`` otherwise."""
    if isinstance(value, int):
        return value
    try:
        size = planner_parse_size(value)
    except (ValueError, TypeError) as exc:
        raise APIError(422, str(exc), loc) from None
    if size <= 0 or size > MAX_SIZE_BYTES:
        raise APIError(422, f"size must be positive and at most 2**53 bytes, got {value!r}", loc)
    return size


def solve(snapshot: Snapshot, key: PlanKey) -> dict[str, Any]:
    """Run the planner (blocking); planner errors propagate."""
    from syncplan.planner.plan import make_plan

    if snapshot.topology is None:
        raise APIError(
            409,
            "the cluster graph is empty or invalid; no plan can be made",
            ["body", "ranks"],
            "no_topology",
        )
    sparse: dict[str, Any] = {}
    if key.sparse is not None:
        d, overlap, block = key.sparse
        sparse = {
            "density": list(d) if isinstance(d, tuple) else d,
            "density_overlap": overlap,
            "block_elems": block,
        }
    return make_plan(
        snapshot.topology,
        list(key.ranks),
        key.size_bytes,
        algorithm=key.algorithm,
        collective=key.collective,
        options=key.options,
        shards=key.shards,
        root=key.root,
        **sparse,
    )


class PlanService:
    """See the module doc; one instance per app, used from the event loop only."""

    def __init__(
        self,
        factory: sessionmaker[Session],
        metrics: Metrics,
        cache_size: int,
        solver_threads: int,
        cache_bytes: int = 512 << 20,
        options: PlanOptions = DEFAULT_OPTIONS,
        quota: SolveQuota | None = None,
    ) -> None:
        self._factory = factory
        self.quota = quota or SolveQuota(per_owner=1 << 30, queue_limit=1 << 30, timeout_s=1e9)
        self.options = options  # the cost-model terms every plan is priced with
        self._metrics = metrics
        self._lru: LRU[str, CachedPlan] = LRU(
            cache_size, cache_bytes, lambda plan: plan.body.size, self._forget
        )
        self.by_plan_id: dict[str, str] = {}  # plan id -> digest, for the plans in memory
        self._inflight: dict[str, asyncio.Task[CachedPlan]] = {}
        self._limiter = anyio.CapacityLimiter(solver_threads)
        self._compact: LRU[str, Body] = LRU(cache_size)
        self.solves = 0

    @property
    def cached_bytes(self) -> int:
        """The bytes of the plan bodies held in memory."""
        return self._lru.nbytes

    def remember(self, digest: str, plan: CachedPlan) -> None:
        """Keep ``plan``, evicting the least recently used beyond the count or byte budget
        (a plan larger than the whole budget is not kept in memory: the store has it)."""
        if self._lru.put(digest, plan):
            self.by_plan_id[plan.plan_id] = digest

    def _forget(self, digest: str, plan: CachedPlan) -> None:
        held = self.by_plan_id.get(plan.plan_id)
        if held is not None and held not in self._lru:
            del self.by_plan_id[plan.plan_id]

    async def in_form(self, plan: CachedPlan, form: str) -> Body:
        """``plan``'s body in ``form``: ``full`` (docs/formats.md) or ``compact`` (each compact
        body is kept for the most recent ``cache_size`` plans)."""
        if form != "compact":
            return plan.body
        body = self._compact.get(plan.plan_id)
        if body is None:
            body = await run_sync(lambda: Body.of(compact_body(plan.body.raw), COMPACT_GZIP_LEVEL))
            self._compact.put(plan.plan_id, body)
        return body

    def _own(self, key: PlanKey) -> PlanKey:
        """``key`` with this service's cost-model settings (they are part of the plan; only
        the step floor for reduce-scatter and all-gather) and the key's own effort."""
        terms = (
            self.options
            if key.collective == "allreduce"
            else PlanOptions(min_step_s=self.options.min_step_s)
        )
        own = terms.with_(effort=key.options.effort)
        return key if key.options == own else replace(key, options=own)

    def cached(self, key: PlanKey) -> CachedPlan | None:
        key = self._own(key)
        return self._lru.get(key.digest)

    async def known(self, key: PlanKey) -> CachedPlan | None:
        """The plan for ``key`` when it was made before (memory, then store); never solves."""
        key = self._own(key)
        plan = self.cached(key)
        return plan if plan is not None else await run_sync(self._load_row, key.digest)

    async def get(self, snapshot: Snapshot, key: PlanKey, owner: str = "service") -> CachedPlan:
        """The plan for ``key``: memory, then store, then one solve shared by all callers.
        A new solve counts against ``owner``'s quota (api/quota.py); 429/503/504 beyond."""
        key = self._own(key)
        digest = key.digest
        plan = self.cached(key)
        if plan is not None:
            self._metrics.cache.labels("memory", "hit").inc()
            return plan
        task = self._inflight.get(digest)
        if task is None:
            self.quota.admit(owner)
            task = asyncio.create_task(self._produce(snapshot, key))
            self._inflight[digest] = task
            task.add_done_callback(lambda t: self._done(digest, t, owner))
        else:
            self._metrics.shared.inc()
        return await self.quota.wait(task)

    def _done(self, digest: str, task: asyncio.Task[CachedPlan], owner: str) -> None:
        self._inflight.pop(digest, None)
        self.quota.release(owner)
        if not task.cancelled():
            task.exception()  # retrieved here so an unawaited failure is not logged

    async def _produce(self, snapshot: Snapshot, key: PlanKey) -> CachedPlan:
        plan = await self._load_or_solve(snapshot, key)
        self.remember(key.digest, plan)
        return plan

    async def _load_or_solve(self, snapshot: Snapshot, key: PlanKey) -> CachedPlan:
        self._metrics.cache.labels("memory", "miss").inc()
        row = await run_sync(self._load_row, key.digest)
        if row is not None:
            self._metrics.cache.labels("store", "hit").inc()
            return row
        self._metrics.cache.labels("store", "miss").inc()
        try:
            plan, algorithm, elapsed = await run_sync(
                self._solve_and_store, snapshot, key, limiter=self._limiter
            )
        except PlannerError as exc:
            raise planner_error(exc, ["body"]) from None
        self.solves += 1
        self._metrics.solve.labels(algorithm).observe(elapsed)
        return plan

    def _solve_and_store(self, snapshot: Snapshot, key: PlanKey) -> tuple[CachedPlan, str, float]:
        """Solve, serialize and store in the worker thread: large plans are tens of MB."""
        start = time.perf_counter()
        doc = solve(snapshot, key)
        elapsed = time.perf_counter() - start
        doc["plan_id"] = str(doc.get("plan_id") or key.plan_id)
        doc["topology_version"] = key.version
        body = json.dumps(doc, separators=(",", ":"), allow_nan=False).encode()
        self._store_row(key, doc["plan_id"], body)
        plan = CachedPlan(doc["plan_id"], Body.of(body))
        return plan, str(doc.get("algorithm", key.algorithm)), elapsed

    def _load_row(self, digest: str) -> CachedPlan | None:
        with self._factory() as s:
            row = store.get_plan_by_key(s, digest)
            return None if row is None else CachedPlan(row.plan_id, Body.of(row.document.encode()))

    def _store_row(self, key: PlanKey, plan_id: str, body: bytes) -> None:
        with self._factory() as s:
            store.put_plan(s, plan_id, key.digest, key.version, body, time.time())

    async def by_id(self, plan_id: str) -> CachedPlan | None:
        digest = self.by_plan_id.get(plan_id)
        if digest is not None and digest in self._lru:
            self._metrics.cache.labels("memory", "hit").inc()
            return self._lru.peek(digest)

        def load() -> CachedPlan | None:
            with self._factory() as s:
                row = store.get_plan(s, plan_id)
                return (
                    None if row is None else CachedPlan(row.plan_id, Body.of(row.document.encode()))
                )

        return await run_sync(load)
