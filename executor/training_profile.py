"""What a scheduled training loop measured: forward and per-gradient backward times (the
job's profile) and a timeline of communication and compute (executor.training records it)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


class Profile:
    """Forward time (the model's forward minus waits for all-gathers and updates) and
    per-gradient backward times (the gap since the previous gradient, or since the end of
    forward, loss included), averaged over iterations."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.iterations = 0
        self.backward = [0.0] * n
        self.forward = 0.0
        self._last: float | None = None
        self._start: float | None = None
        self._wait = 0.0
        # (kind, bucket, submitted, started, ended) of the communication and
        # ("forward"/"backward", -1, start, start, end) of compute, absolute perf_counter
        # times; the iteration boundaries are the forward starts
        self.events: list[tuple[str, int, float, float, float]] = []
        self._forward_starts: list[float] = []
        self._backward_start = 0.0

    def reset(self) -> None:
        """Forget what was measured (call after warm-up iterations)."""
        self.__init__(self.n)  # type: ignore[misc]

    def forward_start(self) -> None:
        self._start, self._wait = time.perf_counter(), 0.0
        self._forward_starts.append(self._start)
        del self._forward_starts[:-3]

    def traced(self, kind: str, bucket: int, fn: Callable[[], Any]) -> Callable[[], Any]:
        """``fn`` timed into ``events`` (for the measured timeline)."""
        submitted = time.perf_counter()

        def run() -> Any:
            t0 = time.perf_counter()
            try:
                return fn()
            finally:
                self._event(kind, bucket, submitted, t0, time.perf_counter())

        return run

    def _event(self, kind: str, bucket: int, submitted: float, start: float, end: float) -> None:
        self.events.append((kind, bucket, submitted, start, end))
        if len(self.events) > 4096:
            del self.events[:2048]

    def waited(self, seconds: float) -> None:
        self._wait += seconds

    def forward_end(self) -> None:
        now = time.perf_counter()
        if self._start is not None:
            self.forward += now - self._start - self._wait
            self._event("forward", -1, self._start, self._start, now)
        self._last = self._backward_start = now

    def grad_ready(self, i: int) -> None:
        now = time.perf_counter()
        if self._last is not None:
            self.backward[i] += now - self._last
        self._last = now

    def backward_done(self) -> None:
        now = time.perf_counter()
        self._event("backward", -1, self._backward_start, self._backward_start, now)
        self.iterations += 1
        self._last = self._start = None

    def report(self) -> dict[str, Any]:
        """The PUT /v1/jobs/{id}/profile body; the forward time is spread evenly over the
        gradients (module times are not split per gradient)."""
        it = max(1, self.iterations)
        return {
            "forward_s": [self.forward / it / self.n] * self.n,
            "backward_s": [t / it for t in self.backward],
            "iterations": it,
        }

    def timeline(self) -> list[dict[str, Any]]:
        """The last complete iteration measured, from one forward start to the next, its
        events relative to that forward start (dear's all-gathers belong to the forward they
        precede: those queued by the step before it); empty before three iterations."""
        if len(self._forward_starts) < 3:
            return []
        prev, t0, t1 = self._forward_starts[-3:]
        out = []
        for kind, bucket, sub, start, end in self.events:
            lo, hi = (prev, t0) if kind == "allgather" else (t0, t1)
            if lo <= sub < hi:
                out.append(
                    {
                        "op": kind,
                        "bucket": bucket,
                        "submitted_s": sub - t0,
                        "start_s": start - t0,
                        "end_s": end - t0,
                    }
                )
        return sorted(out, key=lambda e: e["start_s"])
