"""A real HTTP server on a loopback port answering job plans and their ``?rank=`` slices."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qs

from syncplan.core.compact import compact_document
from syncplan.core.slice import slice_document

from tests.executor.httpserver import PlanServer


class SliceServer:
    """``plans[job]`` is the job's plan document; ``odd[job][endpoint]`` another plan whose
    slice that endpoint gets instead. ``fetches`` lists (job, rank or None, format) per
    authorised request."""

    def __init__(
        self, plans: dict[str, dict[str, Any]], odd: dict[str, dict[str, Any]] | None = None
    ) -> None:
        self.fetches: list[tuple[str, str | None, str]] = []
        odd = odd or {}

        def answer(path: str, query: str) -> tuple[int, Any]:
            q = {k: v[-1] for k, v in parse_qs(query).items()}
            job = path.removeprefix("/v1/jobs/").removesuffix("/plan")
            rank, form = q.get("rank"), q.get("format", "full")
            self.fetches.append((job, rank, form))
            if job not in plans:
                return 404, {"detail": "no such job"}
            doc = odd.get(job, {}).get(rank or "", plans[job])
            body = doc if rank is None else slice_document(doc, rank)
            return 200, compact_document(body) if form == "compact" else body

        self.server = PlanServer({}, answer=answer)
        self.url = self.server.url

    @contextmanager
    def running(self) -> Iterator[SliceServer]:
        with self.server.running():
            yield self
