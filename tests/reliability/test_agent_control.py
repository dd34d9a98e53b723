"""Issue 15 item 10 (agent side): the agent's control port listens on loopback by default,
refuses to be exposed without a token, and then requires it for its control endpoints."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
from syncplan.agents.config import AgentConfig
from syncplan.agents.metrics import AgentHTTP, AgentMetrics


def _call(url: str, method: str = "GET", token: str | None = None) -> int:
    req = urllib.request.Request(url, method=method)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_defaults_and_exposure() -> None:
    cfg = AgentConfig(host="h0", server="http://127.0.0.1:1", token="t" * 40)
    assert cfg.http_bind == "127.0.0.1" and cfg.control_token is None
    with pytest.raises(ValueError, match="control endpoints"):
        AgentConfig(host="h0", server="http://127.0.0.1:1", http_bind="0.0.0.0")
    exposed = AgentConfig(
        host="h0", server="http://127.0.0.1:1", http_bind="0.0.0.0", token="t" * 40
    )
    assert exposed.control_token == "t" * 40


def test_control_endpoints_need_the_token() -> None:
    triggered: list[int] = []
    http = AgentHTTP(
        AgentMetrics(),
        "127.0.0.1",
        0,
        report=lambda: {"host": "h0"},
        trigger=lambda: triggered.append(1),
        control_token="secret-" * 6,
    )
    base = f"http://127.0.0.1:{http.port}"
    try:
        assert _call(f"{base}/v1/probe", "POST") == 401
        assert _call(f"{base}/v1/probe", "POST", "wrong") == 401
        assert _call(f"{base}/v1/report") == 401
        assert not triggered
        assert _call(f"{base}/v1/probe", "POST", "secret-" * 6) == 202
        assert _call(f"{base}/v1/report", token="secret-" * 6) == 200
        assert triggered == [1]
        assert _call(f"{base}/metrics") == 200 and _call(f"{base}/healthz") == 200
    finally:
        http.stop()
