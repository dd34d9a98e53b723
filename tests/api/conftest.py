"""Fixtures: a store URL per back end (SQLite file; PostgreSQL when it can be started),
a real server process, and the ASGI app for in-process tests."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.api.helpers import TOKENS, ServerProcess, free_port

# The service tests report with the shared agent token (TOKENS["agent"]) for any host; in
# production that needs this opt-in (tests/reliability/test_identity.py turns it off).
os.environ.setdefault("SYNCPLAN_ALLOW_SHARED_AGENT_TOKEN", "true")


def _pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).resolve().parent if initdb else None


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A throwaway PostgreSQL cluster on a free loopback port, or a skip saying why."""
    bindir = _pg_bin()
    if bindir is None:
        pytest.skip("PostgreSQL not installed (no initdb; apt-get install postgresql)")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("psycopg not installed (pip install 'syncplan[postgres]')")
    prefix: list[str] = []
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root but there is no 'postgres' user to run the server")
        prefix = ["runuser", "-u", "postgres", "--"]
    root = Path(tempfile.mkdtemp(prefix="syncplan-pg-"))
    if prefix:
        shutil.chown(root, "postgres", "postgres")
    data, port = root / "data", free_port()
    log = root / "server.log"

    def run(*cmd: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*prefix, *cmd], capture_output=True, text=True, timeout=timeout)

    init = run(
        str(bindir / "initdb"),
        "-D",
        str(data),
        "-A",
        "trust",
        "-U",
        "postgres",
        "--no-sync",
        "-E",
        "UTF8",
    )
    if init.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"initdb failed: {init.stderr.strip()[-300:]}")
    start = run(
        str(bindir / "pg_ctl"),
        "-D",
        str(data),
        "-l",
        str(log),
        "-w",
        "-t",
        "30",
        "-o",
        f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off",
        "start",
    )
    if start.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"PostgreSQL did not start: {start.stderr.strip()[-300:]}")
    try:
        made = run(
            str(bindir / "createdb"),
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
            "-U",
            "postgres",
            "syncplan",
        )
        assert made.returncode == 0, made.stderr
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/syncplan"
    finally:
        run(str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty store of each back end."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'syncplan.db'}"
        return
    base = request.getfixturevalue("postgres_url")
    from sqlalchemy import create_engine, text

    name = f"t{os.getpid()}_{abs(hash(request.node.nodeid)) % 10**8}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f"CREATE DATABASE {name}"))
    try:
        yield base.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with admin.connect() as c:
            c.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        admin.dispose()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One real server on a SQLite file, shared by a test module. Its hosts never go stale: on
    a loaded machine a module outlives the 60 s default (staleness has tests of its own)."""
    root = tmp_path_factory.mktemp("server")
    proc = ServerProcess(
        f"sqlite:///{root / 'syncplan.db'}",
        log=root / "server.log",
        env={"SYNCPLAN_STALE_AFTER_S": "86400"},
    ).start()
    yield proc
    proc.stop()


@pytest.fixture
def settings_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for scope, token in TOKENS.items():
        monkeypatch.setenv(f"SYNCPLAN_{scope.upper()}_TOKEN", token)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
