"""A real service process with a small reported cluster, started once for the export,
draw and page tests."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.api.helpers import ServerProcess, auth, host_report


@pytest.fixture(scope="package")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """Three reporting hosts (n3 slower), one job ``train`` (ring) on all their GPUs."""
    root = tmp_path_factory.mktemp("export-server")
    # the hosts must stay fresh across the package's tests, slow ones included
    proc = ServerProcess(
        f"sqlite:///{root / 'syncplan.db'}",
        log=root / "server.log",
        env={"SYNCPLAN_STALE_AFTER_S": "86400"},
    ).start()
    try:
        with httpx.Client(base_url=proc.url, timeout=60) as c:
            rates = {
                "n1": {"n2": 12.0, "n3": 3.0},
                "n2": {"n1": 12.0, "n3": 3.0},
                "n3": {"n1": 3.0, "n2": 3.0},
            }
            for host, peers in rates.items():
                r = c.put(
                    f"/v1/agents/{host}/report",
                    headers=auth("agent"),
                    json=host_report(host, 1, gpus=2, peers=peers),
                )
                assert r.status_code == 200, r.text
            ranks = [{"host": h, "gpu": g} for h in rates for g in range(2)]
            r = c.put(
                "/v1/jobs/train",
                headers=auth("job"),
                json={"ranks": ranks, "size_bytes": 64 << 20, "algorithm": "ring"},
            )
            assert r.status_code == 200, r.text
        yield proc
    finally:
        proc.stop()
