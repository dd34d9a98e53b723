"""Issue 15 item 7: after an outage the agent delivers within seconds of the service's
return, even when its backoff has grown long (it polls ``/readyz`` while it waits)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from syncplan.agents.reporter import Backoff, Reporter
from syncplan.core.report import HostReport

from tests.api.helpers import TOKENS, ServerProcess, free_port, host_report


@pytest.mark.slow
def test_delivery_resumes_within_seconds(tmp_path: Path) -> None:
    port = free_port()
    server = ServerProcess(f"sqlite:///{tmp_path / 's.db'}", log=tmp_path / "server.log")
    delivered: list[float] = []
    # the first retry waits 15-30 s: without the readiness poll delivery would come that late
    rep = Reporter(
        f"http://127.0.0.1:{port}",
        "h0",
        TOKENS["agent"],
        tmp_path / "spool",
        backoff=Backoff(base_s=30.0, max_s=60.0),
        on_delivered=lambda _: delivered.append(time.monotonic()),
    )
    rep.start()
    try:
        rep.submit(HostReport.model_validate(host_report("h0", 0)))
        time.sleep(3.0)  # the service is down: the first try failed, the agent backs off
        assert not delivered
        server.start(port=port)
        back = time.monotonic()
        deadline = back + 20
        while not delivered and time.monotonic() < deadline:
            time.sleep(0.05)
        assert delivered, "not delivered within 20 s of the service's return"
        assert delivered[0] - back < 6.0, delivered[0] - back
    finally:
        rep.stop()
        server.stop()
