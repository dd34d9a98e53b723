"""The export routes on a real service process."""

from __future__ import annotations

import httpx
import pytest

from syncplan.export.msccl_xml import parse_msccl_xml
from tests.api.helpers import ServerProcess, auth
from tests.export.msccl_sim import simulate
from tests.export.test_nccl_topo import check_nccl_structure


@pytest.mark.slow
def test_plan_as_msccl(cluster: ServerProcess) -> None:
    with httpx.Client(base_url=cluster.url, timeout=60) as c:
        plan = c.get("/v1/jobs/train/plan", headers=auth("job")).json()
        for alg in ("ring", "hierarchical", "forest"):
            doc = c.post(
                "/v1/plans",
                headers=auth("job"),
                json={"ranks": plan["ranks"], "size_bytes": 1 << 24, "algorithm": alg},
            ).json()
            r = c.get(
                f"/v1/plans/{doc['plan_id']}/export",
                headers=auth("job"),
                params={"format": "msccl", "target": "rccl"},
            )
            assert r.status_code == 200, r.text
            assert r.headers["content-type"].startswith("application/xml")
            algo = parse_msccl_xml(r.text)
            assert algo.ngpus == 6 and algo.minBytes > 0
            simulate(r.text, max_steps=64)
        missing = c.get("/v1/plans/nope/export", headers=auth("job"))
        assert missing.status_code == 404
        bad = c.get(
            f"/v1/plans/{plan['plan_id']}/export", headers=auth("job"), params={"channels": 0}
        )
        assert bad.status_code == 422 and bad.json()["detail"][0]["loc"][:2] == [
            "query",
            "channels",
        ]
        tight = c.get(
            f"/v1/plans/{plan['plan_id']}/export",
            headers=auth("job"),
            params={"min_bytes": 10, "max_bytes": 5},
        )
        assert tight.status_code == 422 and "min_bytes" in tight.json()["detail"][0]["msg"]


def test_host_as_nccl_topology(cluster: ServerProcess) -> None:
    with httpx.Client(base_url=cluster.url, timeout=60) as c:
        r = c.get("/v1/topology/export", params={"format": "nccl", "host": "n3"})
        assert r.status_code == 200, r.text
        got = check_nccl_structure(r.text)
        assert got["gpus"] == 2
        assert got["nets"] == [3.0]  # the measured 3 GB/s, not the nominal 12.5
        assert 'busid="0000:01:00.0"' in r.text and 'name="eth0"' in r.text  # from the report
        env = c.get(
            "/v1/topology/export",
            params={"format": "nccl-env", "host": "n3", "topo_path": "/x/n3.xml"},
        )
        assert env.text == "NCCL_TOPO_FILE=/x/n3.xml\nNCCL_SOCKET_IFNAME=eth0\nNCCL_IB_DISABLE=1\n"
        assert c.get("/v1/topology/export", params={"host": "n9"}).status_code == 404
        assert c.get("/v1/topology/export").status_code == 422
