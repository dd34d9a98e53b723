"""Group commit of host reports: many agents' reports, one transaction.

Each ``PUT /v1/agents/{host}/report`` hands its parsed report to the ReportWriter and waits.
One writer task takes every report waiting (up to ``max_batch``), checks each
(``api.merge.check_report``) and stores the valid ones in one transaction in a worker thread
(``syncplan.api.store.put_reports``: each report's seq rule as before, one commit, one generation
bump), then answers each request with its own outcome. While a batch is written the next
one gathers, so the store's per-transaction cost (the commit, SQLite's write lock, a
PostgreSQL round trip) is paid once per batch instead of once per report. A report is
answered only after its batch is committed.
"""

from __future__ import annotations

import asyncio
import time

from anyio.to_thread import run_sync
from syncplan.api import store
from syncplan.api.errors import APIError, planner_error
from syncplan.api.merge import check_report
from syncplan.api.state import ClusterState
from syncplan.core.errors import PlannerError
from syncplan.core.report import HostReport

Outcome = tuple[store.ReportStatus, float] | APIError


class ReportWriter:
    """See the module doc; used from the event loop only."""

    def __init__(self, cluster: ClusterState, max_batch: int = 256) -> None:
        self._cluster = cluster
        self._max = max_batch
        self._queue: list[tuple[HostReport, asyncio.Future[tuple[store.ReportStatus, float]]]] = []
        self._task: asyncio.Task[None] | None = None
        self.batches = 0

    async def submit(self, report: HostReport) -> tuple[store.ReportStatus, float]:
        """Store ``report``: ("stored" | "unchanged", received_at), or raise APIError (422
        for an inconsistent report, 409 for an old seq) or the store's error (503)."""
        fut: asyncio.Future[tuple[store.ReportStatus, float]] = (
            asyncio.get_running_loop().create_future()
        )
        self._queue.append((report, fut))
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._drain())
        return await fut

    async def _drain(self) -> None:
        while self._queue:
            batch, self._queue = self._queue[: self._max], self._queue[self._max :]
            try:
                results = await run_sync(self._write, [r for r, _ in batch])
            except Exception as exc:  # the store failed: every report of the batch did
                for _, fut in batch:
                    if not fut.done():
                        fut.set_exception(exc)
                continue
            self.batches += 1
            for (_, fut), res in zip(batch, results, strict=True):
                if fut.done():
                    continue
                if isinstance(res, APIError):
                    fut.set_exception(res)
                else:
                    fut.set_result(res)

    def _write(self, reports: list[HostReport]) -> list[Outcome]:
        """Check and store in the worker thread."""
        out: list[Outcome | None] = []
        valid: list[HostReport] = []
        for report in reports:
            try:
                check_report(report)
            except PlannerError as exc:
                out.append(planner_error(exc, ["body"]))
                continue
            out.append(None)
            valid.append(report)
        stored: list[Outcome] = []
        if valid:
            with self._cluster.sessions() as session:
                stored = store.put_reports(session, valid, time.time())
            if any(not isinstance(r, APIError) and r[0] == "stored" for r in stored):
                self._cluster.invalidate()
        it = iter(stored)
        return [r if r is not None else next(it) for r in out]
