"""Bounds on plan solving: no client can occupy the solvers for everyone.

* Each owner (a bearer token for ``POST /v1/plans``, a job for its plan fetch) may have at
  most ``per_owner`` distinct solves queued or running; one more is answered 429 with
  ``Retry-After``.
* The service queues at most ``queue_limit`` distinct solves in all; beyond that 503.
* A caller waits at most ``timeout_s`` for a solve; then 504 with ``Retry-After``. The solve
  goes on (a worker thread cannot be stopped) and its plan is cached, so the retry gets it;
  the limits above bound how much such work can pile up.
* A job's plans are solved one at a time (``syncplan.api.jobs``), and a job names at most
  ``syncplan.api.limits.MAX_DISTINCT_SIZES`` distinct sizes.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter
from typing import TypeVar

from syncplan.api.errors import APIError

T = TypeVar("T")


def token_owner(authorization: str | None) -> str:
    """A short, non-secret name for the bearer token of a request."""
    raw = (authorization or "").encode()
    return "token:" + hashlib.sha256(raw).hexdigest()[:16]


class SolveQuota:
    """Admission and waiting for solves; used from the event loop only."""

    def __init__(
        self, per_owner: int, queue_limit: int, timeout_s: float, retry_after_s: int = 5
    ) -> None:
        self.per_owner, self.queue_limit, self.timeout_s = per_owner, queue_limit, timeout_s
        self.retry_after = str(retry_after_s)
        self._owned: Counter[str] = Counter()
        self._total = 0
        self.refused = 0

    def admit(self, owner: str) -> None:
        """Count a new solve for ``owner``, or raise 429/503 when over a limit."""
        if self._owned[owner] >= self.per_owner:
            self.refused += 1
            raise APIError(
                429,
                f"{self._owned[owner]} plans of this client are already being "
                f"solved (limit {self.per_owner}); retry when they are done",
                [],
                "too_many_solves",
                {"Retry-After": self.retry_after},
            )
        if self._total >= self.queue_limit:
            self.refused += 1
            raise APIError(
                503,
                f"the planner is busy ({self._total} solves queued or running); retry later",
                [],
                "planner_busy",
                {"Retry-After": self.retry_after},
            )
        self._owned[owner] += 1
        self._total += 1

    def release(self, owner: str) -> None:
        self._owned[owner] -= 1
        if self._owned[owner] <= 0:
            del self._owned[owner]
        self._total -= 1

    async def wait(self, task: asyncio.Future[T]) -> T:
        """``task``'s result, or 504 after ``timeout_s`` (the task goes on)."""
        try:
            return await asyncio.wait_for(asyncio.shield(task), self.timeout_s)
        except TimeoutError:
            raise APIError(
                504,
                f"the plan was not ready within {self.timeout_s:g} s; it is "
                "still being solved and will be cached: retry",
                [],
                "solve_timeout",
                {"Retry-After": self.retry_after},
            ) from None
