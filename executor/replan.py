"""Plans that follow the cluster: when the service's plan for the job changes (an agent
measured a slower link, a host left), the job switches to it between two all-reduces.

Rank 0's ``PlanWatcher`` asks the service in a background thread, with the last ETag so an
unchanged plan costs a 304 and no body. Every ``every`` all-reduces the ranks meet in
``Replanner.exchange``: rank 0 broadcasts the new document, or None, every rank checks it,
and all switch together or none does. No rank ever waits for HTTP inside an all-reduce.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch.distributed as dist
from syncplan.core.document import PlanError

if TYPE_CHECKING:
    from syncplan.executor.comm import PlanComm
    from syncplan.executor.engine import PlanExecutor

log = logging.getLogger("executor")

# (etag or None) -> (new document or None when unchanged, etag); raises on failure
Fetch = Callable[[str | None], tuple[dict[str, Any] | None, str | None]]


class PlanWatcher:
    """Polls ``fetch`` every ``interval_s`` seconds and keeps the newest document whose
    ``plan_id`` is neither the running one nor one the job refused. ``take`` hands it over
    once; ``close`` stops the thread (also a daemon, so it never holds the process)."""

    def __init__(
        self,
        fetch: Fetch,
        interval_s: float,
        running: str | None,
        etag: str | None = None,
        *,
        start: bool = True,
    ) -> None:
        if not interval_s > 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s}")
        self._fetch = fetch
        self.interval_s = interval_s
        self.running = running
        self.etag = etag
        self.refused: set[str] = set()
        self.last_error: str | None = None
        self.polls = 0
        self._pending: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if start:
            self._thread = threading.Thread(
                target=self._loop, name="syncplan-plan-watcher", daemon=True
            )
            self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.poll()

    def poll(self) -> None:
        """Ask once; a failure is remembered in ``last_error`` (logged when it changes)."""
        self.polls += 1
        try:
            doc, etag = self._fetch(self.etag)
        except Exception as exc:  # any failure: keep the plan, try again later
            message = f"{type(exc).__name__}: {exc}"
            if message != self.last_error:
                log.info("syncplan executor: cannot check for a newer plan: %s", message)
            self.last_error = message
            return
        self.last_error = None
        self.etag = etag
        if doc is None:
            return
        plan_id = doc.get("plan_id")
        with self._lock:
            if plan_id != self.running and plan_id not in self.refused:
                self._pending = doc

    def take(self) -> dict[str, Any] | None:
        with self._lock:
            doc, self._pending = self._pending, None
            return doc

    def settled(self, plan_id: str, *, adopted: bool) -> None:
        """The job adopted ``plan_id`` (now running) or refused it (never offered again)."""
        with self._lock:
            if adopted:
                self.running = plan_id
            else:
                self.refused.add(plan_id)
            if self._pending is not None and self._pending.get("plan_id") == plan_id:
                self._pending = None  # polled again while the ranks were deciding

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()


class Replanner:
    """Collective over ``group``: every ``every`` calls of ``tick`` the ranks agree on
    switching to a plan rank 0's watcher found. ``admit`` turns a document into an executor
    or raises PlanError (identically on every rank for the same document)."""

    def __init__(
        self,
        group: Any,
        every: int,
        admit: Callable[[dict[str, Any]], PlanExecutor],
        watcher: PlanWatcher | None,
    ) -> None:
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        self.group = group
        self.every = every
        self.admit = admit
        self.watcher = watcher  # rank 0 only
        self.calls = 0
        self.switches = 0
        self._rank = dist.get_rank(group)
        self._src = 0 if group is None else dist.get_global_rank(group, 0)

    def tick(self, comm: PlanComm) -> None:
        self.calls += 1
        if self.calls % self.every == 0:
            self.exchange(comm)

    def exchange(self, comm: PlanComm) -> bool:
        """Switch ``comm`` to rank 0's pending plan if every rank admits it; True if it did."""
        box: list[Any] = [self.watcher.take() if self.watcher is not None else None]
        dist.broadcast_object_list(box, src=self._src, group=self.group)
        doc = box[0]
        if doc is None:
            return False
        executor, reason = None, None
        try:
            executor = self.admit(doc)
        except PlanError as exc:
            reason = str(exc)
        verdicts: list[Any] = [None] * dist.get_world_size(self.group)
        dist.all_gather_object(verdicts, reason, group=self.group)
        reason = next((v for v in verdicts if v is not None), None)
        plan_id = str(doc.get("plan_id"))
        if self.watcher is not None:
            self.watcher.settled(plan_id, adopted=reason is None)
        if reason is not None:
            if self._rank == 0:
                log.warning(
                    "syncplan executor: the service's new plan %s was not adopted: "
                    "%s; keeping the current one",
                    plan_id,
                    reason,
                )
            return False
        assert executor is not None
        comm.adopt(executor)
        self.switches += 1
        if self._rank == 0:
            log.info(
                "syncplan executor: switched to plan %s (%s, topology version %s) "
                "after %d all-reduces",
                plan_id,
                doc.get("algorithm", "?"),
                doc.get("topology_version", "?"),
                self.calls,
            )
        return True

    def close(self) -> None:
        """Stop rank 0's watcher; later exchanges still meet and switch to nothing."""
        if self.watcher is not None:
            self.watcher.close()
            self.watcher = None
