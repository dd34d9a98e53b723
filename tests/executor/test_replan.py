"""Plans that follow the cluster (executor/replan.py): the watcher, conditional fetches,
and jobs of 4 gloo processes switching plans against a live server and the real service."""

from __future__ import annotations

import logging
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from syncplan.executor.launch import LaunchConfig, fetch_plan_if_changed
from syncplan.executor.localrun import LocalRunConfig, run_local
from syncplan.executor.replan import PlanWatcher
from syncplan.planner.builders import dgx_cluster

from tests.api.helpers import TOKENS, ServerProcess, auth
from tests.executor.httpserver import PlanServer
from tests.executor.plans import ring_plan
from tests.executor.workers import replan_run

HOST = socket.gethostname()
RANKS = [f"{HOST}/cpu{i}" for i in range(4)]


def _plan(plan_id: str, n: int = 4) -> dict[str, Any]:
    return {**ring_plan(n, 64, ranks=RANKS[:n] if n <= 4 else None), "plan_id": plan_id}


class _Script:
    """A fetch function answering from a list: a document, None (304) or an exception."""

    def __init__(self, answers: list[Any]) -> None:
        self.answers = answers
        self.etags: list[str | None] = []

    def __call__(self, etag: str | None) -> tuple[dict[str, Any] | None, str | None]:
        self.etags.append(etag)
        answer = self.answers[min(len(self.etags) - 1, len(self.answers) - 1)]
        if isinstance(answer, Exception):
            raise answer
        return (None, etag) if answer is None else (answer, f'W/"{answer["plan_id"]}"')


def test_the_watcher_offers_each_new_plan_once() -> None:
    a, b, c = _plan("a"), _plan("b"), _plan("c")
    fetch = _Script([a, None, b, b, c])
    w = PlanWatcher(fetch, 1.0, running="a", etag=None, start=False)
    w.poll()  # the running plan again: nothing to offer
    assert w.take() is None
    w.poll()  # 304
    assert w.take() is None and fetch.etags[1] == 'W/"a"'
    w.poll()
    assert w.take() == b and w.take() is None
    w.settled("b", adopted=False)  # the job refused it: never offered again
    w.poll()
    assert w.take() is None
    w.poll()
    assert w.take() == c
    w.settled("c", adopted=True)
    w.poll()  # c again, now running
    assert w.take() is None and w.running == "c"
    assert fetch.etags == [None, 'W/"a"', 'W/"a"', 'W/"b"', 'W/"b"', 'W/"c"']


def test_a_plan_polled_again_while_the_ranks_decide_is_not_offered_twice() -> None:
    b = _plan("b")
    w = PlanWatcher(_Script([b]), 1.0, running="a", start=False)
    w.poll()
    assert w.take() == b  # the ranks are deciding on b ...
    w.poll()  # ... while the thread sees b again
    w.settled("b", adopted=False)
    assert w.take() is None
    w.poll()
    assert w.take() is None


def test_the_watcher_keeps_polling_through_failures(caplog: pytest.LogCaptureFixture) -> None:
    fetch = _Script(
        [
            RuntimeError("service down"),
            RuntimeError("service down"),
            RuntimeError("HTTP 409"),
            _plan("b"),
        ]
    )
    w = PlanWatcher(fetch, 1.0, running="a", etag='W/"a"', start=False)
    with caplog.at_level(logging.INFO, logger="executor"):
        for _ in range(3):
            w.poll()
    assert w.last_error == "RuntimeError: HTTP 409"
    assert w.take() is None and w.etag == 'W/"a"'  # a failure keeps the last ETag
    logged = [r.getMessage() for r in caplog.records]
    assert len(logged) == 2 and "service down" in logged[0] and "409" in logged[1]
    w.poll()
    assert w.last_error is None and w.take()["plan_id"] == "b"


def test_the_watcher_thread_polls_and_stops_on_close() -> None:
    fetch = _Script([None])
    w = PlanWatcher(fetch, 0.01, running="a", etag='W/"a"')
    deadline = time.monotonic() + 10
    while w.polls < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert w.polls >= 3
    w.close()
    assert w._thread is not None and not w._thread.is_alive()
    polls = w.polls
    time.sleep(0.05)
    assert w.polls == polls
    with pytest.raises(ValueError, match="interval_s"):
        PlanWatcher(fetch, 0, running=None)


def test_conditional_fetch_sends_the_etag_and_reads_304() -> None:
    doc = {**ring_plan(2), "topology_version": 3}
    srv = PlanServer(
        {
            "/v1/jobs/j/plan": [
                (200, doc, {"ETag": 'W/"v3"'}),
                (304, b"", {"ETag": 'W/"v3"'}),
                (200, {**doc, "plan_id": "new"}, {"ETag": 'W/"v4"'}),
            ]
        }
    )
    cfg = LaunchConfig(job_id="j", server=srv.url, token="tok", retries=0)
    with srv.running():
        assert fetch_plan_if_changed(cfg, None) == (doc, 'W/"v3"')
        assert fetch_plan_if_changed(cfg, 'W/"v3"') == (None, 'W/"v3"')
        got, tag = fetch_plan_if_changed(cfg, 'W/"v3"')
    assert got["plan_id"] == "new" and tag == 'W/"v4"'
    assert srv.if_none_match == [None, 'W/"v3"', 'W/"v3"']


def test_refresh_settings_from_env_and_validation() -> None:
    cfg = LaunchConfig.from_env(
        {"SYNCPLAN_REFRESH_EVERY": "50", "SYNCPLAN_REFRESH_INTERVAL_S": "2.5"}
    )
    assert (cfg.refresh_every, cfg.refresh_interval_s) == (50, 2.5)
    assert LaunchConfig.from_env({}).refresh_every == 0  # off unless asked for
    with pytest.raises(ValueError, match="SYNCPLAN_REFRESH_EVERY must be a number"):
        LaunchConfig.from_env({"SYNCPLAN_REFRESH_EVERY": "often"})
    with pytest.raises(ValueError, match="refresh_every"):
        LaunchConfig(refresh_every=-1)
    with pytest.raises(ValueError, match="refresh_interval_s"):
        LaunchConfig(refresh_interval_s=0)


@pytest.fixture(scope="module")
def switched() -> dict[str, list[dict[str, Any]]]:
    """4 processes: a job whose service first offers a plan for another world size, then a
    good one; a job that starts in fallback (service failing) and later gets its plan."""
    a, c = _plan("plan-a"), _plan("plan-c")
    wrong = _plan("plan-b-8-ranks", n=8)
    srv = PlanServer(
        {
            "/v1/jobs/refuse/plan": [(200, a), (200, wrong), (200, wrong), (200, wrong), (200, c)],
            "/v1/jobs/recover/plan": [
                (503, {"detail": "starting"}),
                (503, {"detail": "starting"}),
                (200, a),
            ],
        }
    )
    scenarios = [
        {
            "server": srv.url,
            "job": "refuse",
            "token": "tok",
            "ranks": RANKS,
            "calls": 1500,
            "until": "plan-c",
        },
        {
            "server": srv.url,
            "job": "recover",
            "token": "tok",
            "ranks": RANKS,
            "calls": 1500,
            "until": "plan-a",
        },
    ]
    with srv.running():
        results = run_local(replan_run, (scenarios,), LocalRunConfig(4, timeout_s=150))
    return {s["job"]: [r[s["job"]] for r in results] for s in scenarios}


def _switch_points(ids: list[str | None]) -> list[int]:
    return [i for i in range(1, len(ids)) if ids[i] != ids[i - 1]]


@pytest.mark.slow
def test_a_plan_that_does_not_fit_is_refused_and_the_next_one_adopted(
    switched: dict[str, list[dict[str, Any]]],
) -> None:
    runs = switched["refuse"]
    assert all(r["correct"] for r in runs), runs
    assert all(r["ids"][0] == "plan-a" and r["ids"][-1] == "plan-c" for r in runs)
    assert {len(r["ids"]) for r in runs} == {len(runs[0]["ids"])}  # same call on every rank
    assert all(set(r["ids"]) == {"plan-a", "plan-c"} for r in runs)
    warnings = [w for r in runs for w in r["warnings"]]
    assert len(warnings) == 1, warnings  # refused once, by rank 0, never offered again
    assert "plan-b-8-ranks was not adopted" in warnings[0] and "8 ranks" in warnings[0]
    assert any("switched to plan plan-c" in m for m in runs[0]["infos"])


@pytest.mark.slow
def test_a_job_in_fallback_takes_the_plan_once_the_service_has_it(
    switched: dict[str, list[dict[str, Any]]],
) -> None:
    runs = switched["recover"]
    assert all(r["correct"] for r in runs), runs
    for r in runs:
        assert r["ids"][0] is None and r["ids"][-1] == "plan-a"
        assert _switch_points(r["ids"]) == _switch_points(runs[0]["ids"])
    warnings = [w for r in runs for w in r["warnings"]]
    assert len(warnings) == 1 and "cannot fetch the job's plan" in warnings[0]


@pytest.mark.slow
def test_a_job_follows_the_service_when_a_link_degrades(tmp_path: Path) -> None:
    """The real service: the fabric changes under a running job (one host's NICs drop to a
    quarter of their rate); the job's 4 ranks switch to the new plan at the same
    all-reduce, and every sum before and after is right."""
    import httpx

    ranks = [f"h{h}/gpu{g}" for h in range(2) for g in range(2)]
    srv = ServerProcess(f"sqlite:///{tmp_path / 'svc.db'}").start()
    box: dict[str, Any] = {}
    try:
        with httpx.Client(base_url=srv.url, timeout=60) as c:
            c.put(
                "/v1/fabric", json=dgx_cluster(2, gpus=2, nic_GBps=25.0), headers=auth("admin")
            ).raise_for_status()
            c.put(
                "/v1/jobs/j", json={"ranks": ranks, "size_bytes": 64 << 20}, headers=auth("job")
            ).raise_for_status()
            ready = tmp_path / "ready"
            scenario = {
                "server": srv.url,
                "job": "j",
                "token": TOKENS["job"],
                "ranks": ranks,
                "calls": 1500,
                "until": None,
                "ready": str(ready),
            }

            def job() -> None:
                try:
                    box["results"] = run_local(
                        replan_run, ([scenario],), LocalRunConfig(4, timeout_s=150)
                    )
                except Exception as exc:  # reported by the assertions below
                    box["error"] = exc

            thread = threading.Thread(target=job)
            thread.start()
            deadline = time.monotonic() + 120
            while not ready.exists() and thread.is_alive() and time.monotonic() < deadline:
                time.sleep(0.05)
            first = c.get("/v1/jobs/j/plan", headers=auth("job")).json()["plan_id"]
            c.put(
                "/v1/fabric",
                json=dgx_cluster(2, gpus=2, nic_GBps=25.0, slow={1: 6.25}),
                headers=auth("admin"),
            ).raise_for_status()
            thread.join(180)
            second = c.get("/v1/jobs/j/plan", headers=auth("job")).json()["plan_id"]
    finally:
        srv.stop()
    assert "error" not in box, box.get("error")
    runs = [r["j"] for r in box["results"]]
    assert first != second
    assert all(r["correct"] for r in runs), runs
    for r in runs:
        assert r["ids"][0] == first and r["ids"][-1] == second, r["ids"]
        assert _switch_points(r["ids"]) == _switch_points(runs[0]["ids"])
    assert runs[0]["warnings"] == []
    assert any(f"switched to plan {second}" in m for m in runs[0]["infos"])
