"""The executor's side of job schedules: fetch GET /v1/jobs/{id}/schedule, report the
measured profile with PUT /v1/jobs/{id}/profile (the service re-plans once per change)."""

from __future__ import annotations

import time
from typing import Any

from syncplan.executor.launch import FetchError, LaunchConfig


def _call(config: LaunchConfig, method: str, path: str, body: Any = None) -> dict[str, Any]:
    import httpx

    if not config.job_id or not config.server:
        raise FetchError("no job id or service URL (set SYNCPLAN_JOB_ID and SYNCPLAN_SERVER)")
    url = f"{config.server}/v1/jobs/{config.job_id}/{path}"
    headers = {"Authorization": f"Bearer {config.token}"} if config.token else {}
    delay, last = config.backoff_s, ""
    with httpx.Client(timeout=config.fetch_timeout_s, headers=headers) as client:
        for attempt in range(config.retries + 1):
            if attempt:
                time.sleep(delay)
                delay *= 2
            try:
                resp = client.request(method, url, json=body)
            except httpx.HTTPError as exc:
                last = f"{type(exc).__name__}: {exc}"
                continue
            if resp.status_code >= 500:
                last = f"HTTP {resp.status_code}"
                continue
            if resp.status_code != 200:
                raise FetchError(f"{method} {url}: HTTP {resp.status_code}: {resp.text[:200]}")
            try:
                out = resp.json()
            except ValueError as exc:
                raise FetchError(f"{method} {url}: the answer is not JSON") from exc
            if not isinstance(out, dict):
                raise FetchError(f"{method} {url}: the answer is not an object")
            return out
    raise FetchError(f"{method} {url} failed after {config.retries + 1} attempts: {last}")


def fetch_schedule(config: LaunchConfig) -> dict[str, Any]:
    """The job's schedule document (docs/schedule.md)."""
    return _call(config, "GET", "schedule")


def report_profile(config: LaunchConfig, profile: dict[str, Any]) -> bool:
    """Send ``ScheduledOptimizer.profile.report()``; True when the service re-plans."""
    return bool(_call(config, "PUT", "profile", profile).get("changed"))
