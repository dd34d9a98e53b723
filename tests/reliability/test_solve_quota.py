"""Issue 15 item 4 against a real server: one client cannot occupy the solvers (429 beyond
its quota), a solve that outlasts the time limit is answered 504 with Retry-After and its
plan is cached for the retry, and a job cannot name more distinct sizes than the limit."""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from syncplan.api.limits import MAX_DISTINCT_SIZES
from syncplan.planner.builders import dgx_cluster
from syncplan.planner.verify import verify_plan

from tests.api.helpers import ServerProcess, auth


@pytest.fixture(scope="module")
def busy_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root: Path = tmp_path_factory.mktemp("quota")
    proc = ServerProcess(
        f"sqlite:///{root / 's.db'}",
        log=root / "server.log",
        env={"SYNCPLAN_SOLVES_PER_CLIENT": "1", "SYNCPLAN_SOLVE_TIMEOUT_S": "0.3"},
    ).start()
    with httpx.Client(base_url=proc.url, timeout=60) as c:
        c.put("/v1/fabric", json=dgx_cluster(8, gpus=8), headers=auth("admin")).raise_for_status()
    yield proc
    proc.stop()


@pytest.mark.slow
def test_quota_timeout_and_retry(busy_server: ServerProcess) -> None:
    with httpx.Client(base_url=busy_server.url, timeout=60) as c:
        ranks = c.get("/v1/topology").json()["nodes"]
        gpus = [n["id"] for n in ranks if n["kind"] == "gpu"]
        big = {"ranks": gpus[:64], "size_bytes": 1 << 28, "algorithm": "forest"}
        r = c.post("/v1/plans", json=big, headers=auth("job"))
        assert r.status_code == 504, r.text[:300]
        assert int(r.headers["retry-after"]) > 0
        assert "still being solved" in r.json()["detail"][0]["msg"]
        # the same client asks for another plan while its first is solved: 429
        other = {**big, "size_bytes": 1 << 20}
        r = c.post("/v1/plans", json=other, headers=auth("job"))
        assert r.status_code == 429 and int(r.headers["retry-after"]) > 0, r.text[:300]
        # another client is not refused by the first one's quota
        small = {"ranks": gpus[:2], "size_bytes": 1024}
        r = c.post("/v1/plans", json=small, headers=auth("admin"))
        assert r.status_code in (200, 504), r.text[:300]
        # the first solve went on: a retry gets its plan
        deadline = time.monotonic() + 120
        while True:
            r = c.post("/v1/plans", json=big, headers=auth("job"))
            if r.status_code == 200 or time.monotonic() > deadline:
                break
            assert r.status_code == 504, r.text[:300]
            time.sleep(float(r.headers["retry-after"]) / 5)
        assert r.status_code == 200, r.text[:300]
        topo = c.get("/v1/topology").json()
        doc = r.json()
        from syncplan.planner.topology import Topology

        verify_plan(doc, Topology.from_dict(topo))


def test_job_distinct_sizes_capped(busy_server: ServerProcess) -> None:
    with httpx.Client(base_url=busy_server.url, timeout=60) as c:
        sizes = [1024 * (i + 1) for i in range(MAX_DISTINCT_SIZES + 1)]
        job = {"ranks": ["h0/gpu0", "h1/gpu0"], "bucket_sizes": sizes}
        r = c.put("/v1/jobs/many", json=job, headers=auth("job"))
        assert r.status_code == 422 and "distinct sizes" in r.text, r.text[:300]
        job["bucket_sizes"] = [1 << 20] * 200 + [4096]  # many buckets, two sizes: fine
        assert c.put("/v1/jobs/many", json=job, headers=auth("job")).status_code == 200


def test_parallel_fetches_of_one_job_share_one_build(busy_server: ServerProcess) -> None:
    with httpx.Client(base_url=busy_server.url, timeout=60) as c:
        job = {"ranks": ["h0/gpu0", "h1/gpu0"], "bucket_sizes": [2048, 8192, 2048]}
        c.put("/v1/jobs/pair", json=job, headers=auth("job")).raise_for_status()

        def fetch(_: int) -> int:
            for _ in range(100):
                r = c.get("/v1/jobs/pair/plan", headers=auth("job"))
                if r.status_code != 504:
                    return r.status_code
                time.sleep(0.1)
            return 504

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            codes = list(pool.map(fetch, range(8)))
        assert codes == [200] * 8, codes
