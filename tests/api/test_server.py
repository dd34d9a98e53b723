"""End to end against a real server process and a real store (SQLite file; PostgreSQL
when one can be started): reports in, topology out, plans verified, restart, all kept."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import httpx
from syncplan.api.models import TopologyPublic
from syncplan.planner.topology import Topology
from syncplan.planner.verify import verify_plan

from tests.api.helpers import ServerProcess, auth, host_report

RATES = {"h0": {"h1": 12.0, "h2": 6.0}, "h1": {"h2": 6.0}, "h2": {}}


def _report_all(c: httpx.Client, seq: int = 1) -> None:
    for host, peers in RATES.items():
        r = c.put(
            f"/v1/agents/{host}/report",
            json=host_report(host, seq, peers=peers),
            headers=auth("agent"),
        )
        assert r.status_code == 200, r.text
        assert r.json()["status"] == "stored"


def _verified(doc: dict, topo_doc: dict) -> None:
    topo = Topology.from_dict(topo_doc)
    rep = verify_plan(doc, topo)
    assert rep.ok, rep.error


def test_reports_topology_plans_survive_restart(store_url: str, tmp_path: Path) -> None:
    srv = ServerProcess(store_url, log=tmp_path / "server.log").start()
    try:
        with httpx.Client(base_url=srv.url, timeout=60) as c:
            _report_all(c)
            topo = c.get("/v1/topology", headers=auth("job")).json()
            TopologyPublic.model_validate(topo)
            ids = {n["id"]: n for n in topo["nodes"]}
            assert ids["h1/gpu3"] == {"id": "h1/gpu3", "kind": "gpu", "host": "h1"}
            assert ids["fabric"]["kind"] == "switch"
            uplinks = {lk["src"]: lk for lk in topo["links"] if lk["dst"] == "fabric"}
            # max over peer measurements: h0 and h1 measured 12 GB/s together; h2 only 6.
            assert {h: uplinks[f"{h}/nic0"]["bandwidth_GBps"] for h in RATES} == {
                "h0": 12.0,
                "h1": 12.0,
                "h2": 6.0,
            }
            assert uplinks["h0/nic0"]["latency_us"] == 5.0
            nvlink = next(
                lk for lk in topo["links"] if lk["src"] == "h0/gpu0" and lk["dst"] == "h0/nvswitch0"
            )
            assert nvlink["bandwidth_GBps"] == 270.0  # measured beats nominal
            assert topo["stale_hosts"] == [] and set(topo["hosts"]) == set(RATES)

            ranks = [n for n in ids if ids[n]["kind"] == "gpu"]
            r = c.post(
                "/v1/plans", json={"ranks": ranks, "size_bytes": 64 << 20}, headers=auth("job")
            )
            assert r.status_code == 200, r.text
            plan = r.json()
            assert plan["topology_version"] == topo["version"]
            _verified(plan, topo)
            again = c.post(
                "/v1/plans",
                json={"ranks": ranks, "size_bytes": "64MiB", "algorithm": "auto"},
                headers=auth("admin"),
            )
            assert again.json()["plan_id"] == plan["plan_id"]

            job = {
                "ranks": [{"host": h, "gpu": g} for h in ("h0", "h2") for g in range(4)],
                "bucket_sizes": [1 << 20, 32 << 20, 1 << 20],
            }
            r = c.put("/v1/jobs/train-1", json=job, headers=auth("job"))
            assert r.status_code == 200, r.text
            assert r.json()["ranks"][4] == "h2/gpu0"
            fetched = c.get("/v1/jobs/train-1/plan", headers=auth("job"))
            assert fetched.headers["content-encoding"] == "gzip"  # httpx asks for it
            plain = c.get(
                "/v1/jobs/train-1/plan", headers={**auth("job"), "Accept-Encoding": "identity"}
            )
            assert "content-encoding" not in plain.headers
            assert plain.content == fetched.content
            job_plan = fetched.json()
            assert job_plan["topology_version"] == topo["version"]
            assert [p["size_bytes"] for p in job_plan["plans"]] == job["bucket_sizes"]
            assert job_plan["plans"][0] == job_plan["plans"][2]
            for p in job_plan["plans"]:
                _verified(p, topo)
            before = {
                "topology": c.get("/v1/topology", headers=auth("job")).content,
                "plan": c.get(f"/v1/plans/{plan['plan_id']}", headers=auth("job")).content,
                "job": c.get("/v1/jobs/train-1/plan", headers=auth("job")).content,
            }
        # uvicorn shuts down gracefully, then re-raises SIGTERM (systemd counts it clean)
        assert srv.stop() in (0, -signal.SIGTERM)

        srv.start()
        with httpx.Client(base_url=srv.url, timeout=60) as c:
            assert c.get("/v1/topology", headers=auth("job")).content == before["topology"]
            assert (
                c.get(f"/v1/plans/{plan['plan_id']}", headers=auth("job")).content == before["plan"]
            )
            assert c.get("/v1/jobs/train-1/plan", headers=auth("job")).content == before["job"]
            stale = c.put("/v1/agents/h2/report", json=host_report("h2", 0), headers=auth("agent"))
            assert stale.status_code == 409
            assert stale.json()["detail"][0]["loc"] == ["body", "seq"]
            same = c.put(
                "/v1/agents/h2/report",
                json=host_report("h2", 1, peers=RATES["h2"]),
                headers=auth("agent"),
            )
            assert same.status_code == 200 and same.json()["status"] == "unchanged"

            # h2 measures a faster link: the graph changes, the job gets a new plan.
            r = c.put(
                "/v1/agents/h2/report",
                json=host_report("h2", 2, peers={"h0": 9.0}),
                headers=auth("agent"),
            )
            assert r.status_code == 200
            topo2 = c.get("/v1/topology", headers=auth("job")).json()
            assert topo2["version"] != topo["version"]
            h2_up = next(
                lk for lk in topo2["links"] if lk["src"] == "h2/nic0" and lk["dst"] == "fabric"
            )
            assert h2_up["bandwidth_GBps"] == 9.0
            job_plan2 = c.get("/v1/jobs/train-1/plan", headers=auth("job")).json()
            assert job_plan2["topology_version"] == topo2["version"]
            for p in job_plan2["plans"]:
                _verified(p, topo2)
    finally:
        srv.stop()


def test_stale_hosts_left_out(tmp_path: Path) -> None:
    srv = ServerProcess(
        f"sqlite:///{tmp_path / 's.db'}",
        log=tmp_path / "server.log",
        env={"SYNCPLAN_STALE_AFTER_S": "3"},
    ).start()
    try:
        with httpx.Client(base_url=srv.url, timeout=60) as c:
            _report_all(c)
            c.put(
                "/v1/jobs/j",
                json={"ranks": ["h0/gpu0", "h2/gpu0"], "size_bytes": 4096},
                headers=auth("job"),
            ).raise_for_status()
            for seq in range(2, 8):  # keep h0 and h1 fresh while h2 ages past the TTL
                time.sleep(0.6)
                for host in ("h0", "h1"):
                    c.put(
                        f"/v1/agents/{host}/report",
                        json=host_report(host, seq, peers=RATES[host]),
                        headers=auth("agent"),
                    ).raise_for_status()
            topo = c.get("/v1/topology", headers=auth("job")).json()
            assert topo["stale_hosts"] == ["h2"] and topo["hosts"]["h2"]["stale"]
            assert not any(n.get("host") == "h2" for n in topo["nodes"])
            r = c.get("/v1/jobs/j/plan", headers=auth("job"))
            assert r.status_code == 409
            assert "h2/gpu0" in r.json()["detail"][0]["msg"]
            job = c.get("/v1/jobs/j", headers=auth("job")).json()
            assert job["ranks"] is None and "h2/gpu0" in job["problem"]
            metrics = c.get("/metrics").text
            assert "syncplan_hosts_stale 1.0" in metrics
            assert "syncplan_hosts_reporting 2.0" in metrics
    finally:
        srv.stop()
