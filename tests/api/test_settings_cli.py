"""Settings refuse to start without tokens outside development; the store's schema version
is checked; ``syncplan serve --demo`` gives a newcomer a working plan with one curl."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError
from sqlalchemy import create_engine, text
from syncplan.api.db import SchemaError
from syncplan.api.main import create_app
from syncplan.api.settings import DEV_TOKENS, Settings
from syncplan.planner.builders import dgx_cluster

from tests.api.helpers import REPO, TOKENS, free_port

CLI = [sys.executable, "-c", "import sys; from syncplan.cli import main; sys.exit(main())"]


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SYNCPLAN_")}
    return {**env, "PYTHONPATH": str(REPO), **extra}


def test_production_needs_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in list(os.environ):
        if k.startswith("SYNCPLAN_"):
            monkeypatch.delenv(k)
    with pytest.raises(ValidationError, match="SYNCPLAN_ADMIN_TOKEN"):
        Settings()
    strong = {
        "admin_token": "A" + TOKENS["admin"],
        "job_token": "J" + TOKENS["job"],
        "agent_secret": "S" + TOKENS["agent"],
    }
    Settings(**strong)
    for name, weak, why in (
        ("admin_token", "short", "shorter than 32"),
        ("job_token", "a" * 40, "distinct characters"),
        ("admin_token", " " * 40, "whitespace"),
        ("agent_secret", "aaaaaaaa", "shorter than 32"),
    ):
        with pytest.raises(ValidationError, match=why):
            Settings(**{**strong, name: weak})
    with pytest.raises(ValidationError, match="differ"):
        Settings(**{**strong, "job_token": strong["admin_token"]})
    with pytest.raises(ValidationError, match="SYNCPLAN_ADMIN_TOKEN is a placeholder"):
        Settings(**{**strong, "admin_token": DEV_TOKENS["admin"]})
    with pytest.raises(ValidationError, match="SYNCPLAN_JOB_TOKEN is a placeholder"):
        Settings(**{**strong, "job_token": "change-me-job-token-32-random-chars"})
    with pytest.raises(ValidationError, match="SYNCPLAN_AGENT_SECRET"):
        Settings(admin_token=strong["admin_token"], job_token=strong["job_token"])
    with pytest.raises(ValidationError, match="any host"):  # the shared token needs opt-in
        Settings(
            admin_token=strong["admin_token"],
            job_token=strong["job_token"],
            agent_token="G" + TOKENS["agent"],
            allow_shared_agent_token=False,
        )
    dev = Settings(environment="development")
    assert dev.admin_token is not None
    assert dev.admin_token.get_secret_value() == DEV_TOKENS["admin"]
    monkeypatch.setenv("SYNCPLAN_STALE_AFTER_S", "0")
    monkeypatch.setenv("SYNCPLAN_ENVIRONMENT", "development")
    with pytest.raises(ValidationError, match="stale_after_s"):
        Settings()


def test_serve_refuses_to_start_without_tokens(tmp_path: Path) -> None:
    r = subprocess.run(
        [
            *CLI,
            "serve",
            "--port",
            str(free_port()),
            "--database-url",
            f"sqlite:///{tmp_path / 'x.db'}",
        ],
        env=_clean_env(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2
    assert "SYNCPLAN_ADMIN_TOKEN" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_schema_version_is_checked(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'v.db'}"
    settings = Settings(environment="development", database_url=url)
    create_app(settings)
    create_app(settings)  # same version: fine
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE schema_info SET version = 99"))
    engine.dispose()
    with pytest.raises(SchemaError, match="99"):
        create_app(settings)
    env = _clean_env(
        SYNCPLAN_ADMIN_TOKEN=TOKENS["admin"],
        SYNCPLAN_AGENT_SECRET=TOKENS["agent"],
        SYNCPLAN_JOB_TOKEN=TOKENS["job"],
    )
    r = subprocess.run(
        [*CLI, "serve", "--database-url", url],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "schema version is 99" in r.stderr
    assert "Traceback" not in r.stderr


def test_demo_one_curl(tmp_path: Path) -> None:
    topo = tmp_path / "demo.json"
    topo.write_text(json.dumps(dgx_cluster(2, gpus=4)))
    port = free_port()
    proc = subprocess.Popen(
        [
            *CLI,
            "serve",
            "--demo",
            "--port",
            str(port),
            "--demo-topology",
            str(topo),
            "--log-level",
            "warning",
        ],
        env=_clean_env(),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + 60
        while (
            not any(ln.strip().startswith("curl ") for ln in lines) and time.monotonic() < deadline
        ):
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
        out = "".join(lines)
        assert DEV_TOKENS["job"] in out and not (tmp_path / "syncplan-demo.db").exists(), out
        curl = next(ln for ln in lines if ln.strip().startswith("curl "))
        argv = shlex.split(curl.split(" | ")[0])
        body = json.loads(argv[argv.index("-d") + 1])
        headers = dict(
            h.split(": ", 1) for h in (argv[i + 1] for i, a in enumerate(argv) if a == "-H")
        )
        url = argv[-1]
        assert re.fullmatch(rf"http://127\.0\.0\.1:{port}/v1/plans\?format=compact", url)
        for _ in range(100):
            try:
                r = httpx.post(url, json=body, headers=headers, timeout=60)
                break
            except httpx.ConnectError:
                time.sleep(0.1)
        assert r.status_code == 200, r.text
        assert r.json()["ranks"] == body["ranks"] and r.json()["plan_id"]
    finally:
        proc.terminate()
        proc.wait(timeout=15)
