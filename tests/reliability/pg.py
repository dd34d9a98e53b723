"""A PostgreSQL cluster of its own that a test can stop and start again (on the same port)."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.api.conftest import _pg_bin
from tests.api.helpers import free_port


class PgCluster:
    """initdb + pg_ctl in a temporary folder; ``url`` is a SQLAlchemy URL to database
    ``syncplan``. Skips the test when PostgreSQL or psycopg is not installed."""

    def __init__(self) -> None:
        bindir = _pg_bin()
        if bindir is None:
            pytest.skip("PostgreSQL not installed (no initdb; apt-get install postgresql)")
        try:
            import psycopg  # noqa: F401
        except ImportError:
            pytest.skip("psycopg not installed (pip install 'syncplan[postgres]')")
        self.bin = bindir
        self.prefix: list[str] = []
        if os.geteuid() == 0:
            try:
                pwd.getpwnam("postgres")
            except KeyError:
                pytest.skip("running as root but there is no 'postgres' user")
            self.prefix = ["runuser", "-u", "postgres", "--"]
        self.root = Path(tempfile.mkdtemp(prefix="syncplan-pg-"))
        if self.prefix:
            shutil.chown(self.root, "postgres", "postgres")
        self.data, self.port = self.root / "data", free_port()
        init = self._run(
            "initdb",
            "-D",
            str(self.data),
            "-A",
            "trust",
            "-U",
            "postgres",
            "--no-sync",
            "-E",
            "UTF8",
        )
        if init.returncode != 0:
            shutil.rmtree(self.root, ignore_errors=True)
            pytest.skip(f"initdb failed: {init.stderr.strip()[-300:]}")
        self.start()
        made = self._run(
            "createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "syncplan"
        )
        assert made.returncode == 0, made.stderr

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/syncplan"

    def _run(self, tool: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.prefix, str(self.bin / tool), *args], capture_output=True, text=True, timeout=60
        )

    def start(self) -> None:
        r = self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.root / "server.log"),
            "-w",
            "-t",
            "30",
            "-o",
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off",
            "start",
        )
        assert r.returncode == 0, r.stderr

    def stop(self, mode: str = "immediate") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def remove(self) -> None:
        self.stop("fast")
        shutil.rmtree(self.root, ignore_errors=True)
