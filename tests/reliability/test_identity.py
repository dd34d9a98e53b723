"""Issue 15 item 2 against a real server: agent tokens are bound to one host, the shared
agent token does not report outside development, and an agent that meets a 409 reads the
stored seq and continues above it."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from syncplan.agents.reporter import Backoff, Reporter
from syncplan.api.identity import host_token
from syncplan.core.report import HostReport

from tests.api.helpers import AGENT_SECRET, REPO, TOKENS, ServerProcess, auth, host_report


@pytest.fixture(scope="module")
def strict_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("identity")
    proc = ServerProcess(
        f"sqlite:///{root / 's.db'}",
        log=root / "server.log",
        env={"SYNCPLAN_ALLOW_SHARED_AGENT_TOKEN": "false"},
    ).start()
    yield proc
    proc.stop()


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_host_token_reports_only_its_host(strict_server: ServerProcess) -> None:
    h0 = host_token(AGENT_SECRET, "h0")
    with httpx.Client(base_url=strict_server.url, timeout=30) as c:
        r = c.put("/v1/agents/h0/report", json=host_report("h0", 1), headers=_bearer(h0))
        assert r.status_code == 200, r.text
        r = c.put("/v1/agents/h1/report", json=host_report("h1", 1), headers=_bearer(h0))
        assert r.status_code == 403 and "bound to host 'h0'" in r.text, r.text
        # the same token with another host's name in it: its MAC no longer matches
        forged = h0.rsplit(".", 1)[0] + ".h1"
        r = c.put("/v1/agents/h1/report", json=host_report("h1", 1), headers=_bearer(forged))
        assert r.status_code == 401, r.text
        # a host token reads (its peers, its stored seq) but does nothing else
        assert c.get("/v1/agents", headers=_bearer(h0)).json()["hosts"]["h0"]["seq"] == 1
        r = c.put("/v1/jobs/j", json={"ranks": ["h0/gpu0"], "size_bytes": 64}, headers=_bearer(h0))
        assert r.status_code == 403
        assert c.delete("/v1/agents/h0", headers=_bearer(h0)).status_code == 403


def test_shared_agent_token_cannot_report_in_production(strict_server: ServerProcess) -> None:
    with httpx.Client(base_url=strict_server.url, timeout=30) as c:
        r = c.put("/v1/agents/h5/report", json=host_report("h5", 1), headers=auth("agent"))
        assert r.status_code == 403 and "syncplan token agent" in r.text, r.text
        assert c.get("/v1/agents", headers=auth("agent")).status_code == 200


def test_admin_endpoint_and_cli_issue_the_same_token(strict_server: ServerProcess) -> None:
    with httpx.Client(base_url=strict_server.url, timeout=30) as c:
        r = c.post("/v1/agents/n7/token", headers=auth("admin"))
        assert r.status_code == 200, r.text
        assert c.post("/v1/agents/n7/token", headers=auth("job")).status_code == 403
    token = r.json()["token"]
    cli = subprocess.run(
        [sys.executable, "-m", "syncplan", "token", "agent", "n7"],
        env={
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": str(REPO),
            "SYNCPLAN_AGENT_SECRET": AGENT_SECRET,
        },
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout.strip() == token
    bad = subprocess.run(
        [sys.executable, "-m", "syncplan", "token", "agent", "a/b"],
        env={
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": str(REPO),
            "SYNCPLAN_AGENT_SECRET": AGENT_SECRET,
        },
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr


def test_agent_recovers_from_409(strict_server: ServerProcess, tmp_path: Path) -> None:
    """A report stored with a seq above the agent's (an earlier install of the agent whose
    spool was lost, with a clock ahead) no longer locks the agent out: it reads the stored
    seq after the 409 and delivers above it."""
    ahead = int(time.time() * 1000) + 3_600_000  # an hour ahead: accepted
    with httpx.Client(base_url=strict_server.url, timeout=30) as c:
        r = c.put("/v1/agents/h3/report", json=host_report("h3", ahead), headers=auth("admin"))
        assert r.status_code == 200, r.text
    delivered: list[int] = []
    rep = Reporter(
        strict_server.url,
        "h3",
        host_token(AGENT_SECRET, "h3"),
        tmp_path,
        backoff=Backoff(base_s=0.1, max_s=0.5),
        on_delivered=delivered.append,
    )
    rep.start()
    try:
        rep.submit(HostReport.model_validate(host_report("h3", 0, gpus=2)))
        deadline = time.monotonic() + 20
        while not delivered and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        rep.stop()
    assert delivered and delivered[0] > ahead, delivered
    with httpx.Client(base_url=strict_server.url, timeout=30) as c:
        hosts = c.get("/v1/agents", headers=auth("job")).json()["hosts"]
    assert hosts["h3"]["seq"] == delivered[0] and hosts["h3"]["endpoints"] == 2
    assert TOKENS["agent"] not in (rep.token or "")
