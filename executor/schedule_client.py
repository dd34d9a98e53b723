"""The executor's side of job schedules: fetch GET /v1/jobs/{id}/schedule, report the
measured profile with PUT /v1/jobs/{id}/profile (the service re-plans once per change)."""

from __future__ import annotations

from typing import Any

from syncplan.core.http import HttpError
from syncplan.executor.launch import FetchError, LaunchConfig, job_client


def _call(config: LaunchConfig, method: str, path: str, body: Any = None) -> dict[str, Any]:
    with job_client(config) as http:
        try:
            out, _ = http.request_json(method, path, json=body)
        except HttpError as exc:
            raise FetchError(str(exc)) from None
        if not isinstance(out, dict):
            raise FetchError(f"{method} {http.url(path)}: the answer is not an object")
    return out


def fetch_schedule(config: LaunchConfig) -> dict[str, Any]:
    """The job's schedule document (docs/schedule.md)."""
    return _call(config, "GET", "schedule")


def report_profile(config: LaunchConfig, profile: dict[str, Any]) -> bool:
    """Send ``ScheduledOptimizer.profile.report()``; True when the service re-plans."""
    return bool(_call(config, "PUT", "profile", profile).get("changed"))
