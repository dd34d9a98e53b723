"""Job schedules over HTTP against a real server process: gradients in, a schedule whose
every plan verifies out; a measured profile re-plans once per change."""

from __future__ import annotations

import httpx
import pytest
from syncplan.executor.launch import LaunchConfig
from syncplan.executor.schedule_client import fetch_schedule, report_profile
from syncplan.planner.topology import Topology
from syncplan.planner.verify import verify_plan

from tests.api.helpers import TOKENS, ServerProcess, auth, host_report

pytestmark = pytest.mark.slow

GRADS = [
    {"numel": n, "dtype": "float32", "backward_s": 0.002, "forward_s": 0.001}
    for n in (1 << 18, 4096, 1 << 16, 1 << 18, 256)
]


def _setup(c: httpx.Client) -> dict:
    for host, peers in {"s0": {"s1": 12.0}, "s1": {}}.items():
        r = c.put(
            f"/v1/agents/{host}/report",
            json=host_report(host, 1, gpus=2, peers=peers),
            headers=auth("agent"),
        )
        assert r.status_code == 200, r.text
    return c.get("/v1/topology", headers=auth("job")).json()


def test_schedule_profile_and_bad_input(server: ServerProcess) -> None:
    with httpx.Client(base_url=server.url, timeout=120) as c:
        topo_doc = _setup(c)
        topo = Topology.from_dict(topo_doc)
        ranks = [{"host": h, "gpu": g} for h in ("s0", "s1") for g in range(2)]
        r = c.put(
            "/v1/jobs/sched-1", json={"ranks": ranks, "gradients": GRADS}, headers=auth("job")
        )
        assert r.status_code == 200, r.text
        assert r.json()["sizes"] == [sum(g["numel"] * 4 for g in GRADS)]  # sized by gradients
        r = c.get("/v1/jobs/sched-1/schedule", headers=auth("job"))
        assert r.status_code == 200, r.text
        sched = r.json()
        assert sched["topology_version"] == topo_doc["version"]
        assert sched["profile"] == "declared" and sched["recommended"] in sched["modes"]
        for mode in sched["modes"].values():
            assert mode["predicted_iteration_s"] <= mode["predicted_iteration_no_overlap_s"]
            for b in mode["buckets"]:
                for doc in b["plans"].values():
                    rep = verify_plan(doc, topo)
                    assert rep.ok, rep.error
        etag = r.headers["etag"]
        same = c.get("/v1/jobs/sched-1/schedule", headers={**auth("job"), "If-None-Match": etag})
        assert same.status_code == 304

        prof = {"forward_s": [0.01] * len(GRADS), "backward_s": [0.02] * len(GRADS)}
        cfg = LaunchConfig(job_id="sched-1", server=server.url, token=TOKENS["job"])
        assert fetch_schedule(cfg)["modes"] == sched["modes"]  # the executor's client
        assert report_profile(cfg, prof) is True
        jitter = {**prof, "forward_s": [0.01000001] * len(GRADS)}
        r = c.put("/v1/jobs/sched-1/profile", json=jitter, headers=auth("job"))
        assert r.json()["changed"] is False  # same profile within resolution: no re-plan
        measured = c.get("/v1/jobs/sched-1/schedule", headers=auth("job")).json()
        assert measured["profile"] == "measured"
        assert measured["modes"]["allreduce"]["backward_s"] == pytest.approx(0.02 * len(GRADS))

        bad = c.put(
            "/v1/jobs/sched-1/profile",
            json={"forward_s": [0.1], "backward_s": [0.1]},
            headers=auth("job"),
        )
        assert bad.status_code == 422 and "5 gradients" in bad.text
        bad = c.put(
            "/v1/jobs/sched-2",
            json={"ranks": ranks, "gradients": [{"numel": 4, "dtype": "int8"}]},
            headers=auth("job"),
        )
        assert bad.status_code == 422 and "dtype" in bad.text
        bad = c.put(
            "/v1/jobs/sched-2",
            json={"ranks": ranks, "gradients": [{"numel": 4, "backward_s": -1}]},
            headers=auth("job"),
        )
        assert bad.status_code == 422
        assert (
            c.put(
                "/v1/jobs/plain", json={"ranks": ranks, "size_bytes": 1024}, headers=auth("job")
            ).status_code
            == 200
        )
        r = c.get("/v1/jobs/plain/schedule", headers=auth("job"))
        assert r.status_code == 409 and "gradients" in r.text
        assert c.get("/v1/jobs/nope/schedule", headers=auth("job")).status_code == 404
        r = c.put("/v1/jobs/plain/profile", json=prof, headers=auth("job"))
        assert r.status_code == 409
