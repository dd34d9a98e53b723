"""One small HTTP client for the executor and the agent: JSON bodies, a bearer token, a
timeout, and retries with backoff on connection errors, 5xx and 429 (honouring Retry-After).

httpx is imported when a client is made, so importing this module costs nothing.
"""

from __future__ import annotations

import email.utils
import math
import random
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any


class HttpError(RuntimeError):
    """A request failed: retries spent, an answer refused, or a body that is not JSON.
    ``response`` is the last answer (an ``httpx.Response``; None when none came)."""

    def __init__(self, message: str, response: Any = None) -> None:
        super().__init__(message)
        self.response = response

    @property
    def status(self) -> int | None:
        """The last answer's HTTP status; None when no answer came."""
        return None if self.response is None else self.response.status_code


@dataclass(frozen=True)
class Backoff:
    """Delay before retry ``attempt`` (0-based): ``cap = min(max_s, base_s * factor**attempt)``;
    with ``jitter`` a uniform draw from ``[cap/2, cap]``, else ``cap``."""

    base_s: float = 1.0
    factor: float = 2.0
    max_s: float = 60.0
    jitter: bool = True

    def __post_init__(self) -> None:
        if self.base_s <= 0 or self.factor < 1 or self.max_s < self.base_s:
            raise ValueError("backoff needs base_s > 0, factor >= 1, max_s >= base_s")

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        cap = min(self.max_s, self.base_s * self.factor ** min(attempt, 64))
        return cap / 2 + (rng or random).uniform(0, cap / 2) if self.jitter else cap


def retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds asked for by a ``Retry-After`` header (seconds or an HTTP date); None when
    absent or unreadable."""
    text = (headers.get("retry-after") or "").strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text).timestamp()
        except (TypeError, ValueError, IndexError):
            return None
        seconds = when - (time.time() if now is None else now)
    return max(0.0, seconds) if math.isfinite(seconds) else None


class HttpClient:
    """Requests to ``base_url`` with retries: a connection error, a 5xx, a 429 or a status in
    ``retry_statuses`` is tried again up to ``retries`` times, waiting ``backoff.delay`` (no
    wait when ``backoff`` is None) or the answer's Retry-After (at most
    ``retry_after_max_s``), whichever is longer. Use it as a context manager."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout_s: float = 10.0,
        retries: int = 3,
        backoff: Backoff | None = None,
        retry_statuses: Collection[int] = (),
        retry_after_max_s: float = 60.0,
        headers: Mapping[str, str] | None = None,
        sleep: Callable[[float], Any] = time.sleep,
    ) -> None:
        import httpx

        if retries < 0:
            raise ValueError(f"retries must be >= 0, got {retries}")
        self.base_url = base_url.rstrip("/")
        self.retries = retries
        self.backoff = backoff
        self.retry_statuses = frozenset(retry_statuses) | {429}
        self.retry_after_max_s = retry_after_max_s
        self.sleep = sleep
        all_headers = dict(headers or {})
        if token:
            all_headers["Authorization"] = f"Bearer {token}"
        self.client = httpx.Client(timeout=timeout_s, headers=all_headers)

    def __enter__(self) -> HttpClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.client.close()

    def url(self, path: str) -> str:
        """The full URL of ``path`` (relative to ``base_url``; "" is ``base_url`` itself)."""
        return f"{self.base_url}/{path.lstrip('/')}" if path else self.base_url

    def retryable(self, status: int) -> bool:
        """Whether an answer with ``status`` may heal by itself (and is retried)."""
        return status >= 500 or status in self.retry_statuses

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        """The first answer that is not retryable (an ``httpx.Response``, of any status);
        raises HttpError naming the last failure once the retries are spent."""
        import httpx

        url = self.url(path)
        extra: dict[str, Any] = {} if timeout_s is None else {"timeout": timeout_s}
        last, resp, wait = "", None, None
        for attempt in range(self.retries + 1):
            if attempt:
                pause = self.backoff.delay(attempt - 1) if self.backoff else 0.0
                if wait is not None:
                    pause = max(pause, min(wait, self.retry_after_max_s))
                self.sleep(pause)
            try:
                resp = self.client.request(
                    method, url, json=json, params=params, headers=headers, **extra
                )
            except httpx.HTTPError as exc:
                last, resp, wait = f"{type(exc).__name__}: {exc}", None, None
                continue
            if not self.retryable(resp.status_code):
                return resp
            last = f"HTTP {resp.status_code}"
            wait = retry_after(resp.headers)
        raise HttpError(f"{method} {url} failed after {self.retries + 1} attempts: {last}", resp)

    def request_json(
        self, method: str, path: str, *, ok: Collection[int] = (200,), **kwargs: Any
    ) -> tuple[Any, Any]:
        """``request`` and then (the decoded JSON body, the response); raises HttpError when
        the status is not in ``ok`` or the body is not JSON. A body-less status in ``ok``
        (204, 304) gives None."""
        resp = self.request(method, path, **kwargs)
        where = f"{method} {self.url(path)}"
        if resp.status_code not in ok:
            raise HttpError(f"{where}: HTTP {resp.status_code}: {resp.text[:200]}", resp)
        if resp.status_code in (204, 304):
            return None, resp
        try:
            return resp.json(), resp
        except ValueError:
            raise HttpError(f"{where}: the answer is not JSON", resp) from None
