"""``syncplan agent`` as a user runs it: real processes, real sockets."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from syncplan.core.report import HostReport

from .conftest import FIXTURES, ReportSink

REPO = Path(__file__).parents[2]
# The console script's entry point (``python -m syncplan.cli`` would re-import syncplan.cli).
MAIN = "import sys; from syncplan.cli import main; sys.exit(main())"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def agent(*args: str, **kw) -> subprocess.Popen:  # type: ignore[no-untyped-def]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("SYNCPLAN_AGENT_TOKEN", None)
    opts = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True, **kw}
    return subprocess.Popen([sys.executable, "-c", MAIN, "agent", *args], cwd=REPO, env=env, **opts)


def test_once_print_on_this_machine() -> None:
    p = agent(
        "--once",
        "--print",
        "--no-gpu-copy",
        "--host-name",
        "me",
        "--bind",
        "127.0.0.1",
        "--probe-port",
        str(free_port()),
    )
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    rep = HostReport.model_validate_json(out)
    assert rep.host == "me" and rep.endpoint_kind in ("cpu", "gpu")
    assert "Traceback" not in err
    assert err.count("CPU-only") <= 1


def test_once_with_fixture() -> None:
    p = agent(
        "--once",
        "--print",
        "--host-name",
        "hgx",
        "--bind",
        "127.0.0.1",
        "--probe-port",
        "0",
        "--nvml-fixture",
        str(FIXTURES / "hgx8" / "nvml.json"),
        "--sysfs-root",
        str(FIXTURES / "hgx8" / "sys"),
        "--procfs-root",
        str(FIXTURES / "hgx8" / "proc"),
    )
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    rep = HostReport.model_validate_json(out)
    assert len(rep.gpus) == 8 and rep.endpoint_kind == "gpu"


def test_bad_arguments_one_line_no_traceback() -> None:
    for args in (["--peers", "nonsense"], ["--interval", "5"], ["--once", "--host-name", "a b"]):
        p = agent(*args)
        _out, err = p.communicate(timeout=30)
        assert p.returncode == 2, (args, err)
        assert "Traceback" not in err and err.strip().count("\n") == 0, err


def test_daemon_reports_serves_metrics_and_stops_on_sigterm(tmp_path: Path) -> None:
    sink = ReportSink(token="tok")
    http_port = free_port()
    p = agent(
        "--server",
        sink.url,
        "--token",
        "tok",
        "--host-name",
        "d0",
        "--interval",
        "0.5",
        "--bind",
        "127.0.0.1",
        "--probe-port",
        "0",
        "--http-bind",
        "127.0.0.1",
        "--http-port",
        str(http_port),
        "--spool-dir",
        str(tmp_path),
        "--no-gpu-copy",
    )
    try:
        deadline = time.time() + 20
        while len(sink.reports.get("d0", [])) < 2 and time.time() < deadline:
            time.sleep(0.1)
        seqs = [r["seq"] for r in sink.reports.get("d0", [])]
        assert len(seqs) >= 2 and seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        body = urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=5).read()
        assert b"syncplan_agent_last_report_success_timestamp_seconds" in body
        req = urllib.request.Request(f"http://127.0.0.1:{http_port}/v1/probe", method="POST")
        assert urllib.request.urlopen(req, timeout=5).status == 202
        p.send_signal(signal.SIGTERM)
        _out, err = p.communicate(timeout=20)
        assert p.returncode == 0, err
        assert "Traceback" not in err
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
        sink.stop()


def test_daemon_survives_service_outage(tmp_path: Path) -> None:
    """Service stopped while the agent runs, then started: the latest report arrives."""
    sink = ReportSink()
    port = sink.port
    p = agent(
        "--server",
        sink.url,
        "--host-name",
        "f0",
        "--interval",
        "0.3",
        "--bind",
        "127.0.0.1",
        "--probe-port",
        "0",
        "--http-port",
        "-1",
        "--spool-dir",
        str(tmp_path),
        "--no-gpu-copy",
    )
    try:
        deadline = time.time() + 20
        while not sink.reports.get("f0") and time.time() < deadline:
            time.sleep(0.05)
        assert sink.reports.get("f0")
        sink.stop()
        deadline = time.time() + 20  # reports pile up; the newest is spooled
        while not (tmp_path / "pending.json").exists() and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)
        assert p.poll() is None
        spooled = json.loads((tmp_path / "pending.json").read_text())
        sink = ReportSink(port=port)
        deadline = time.time() + 20
        while time.time() < deadline and not any(
            r["seq"] >= spooled["seq"] for r in sink.reports.get("f0", [])
        ):
            time.sleep(0.05)
        assert any(r["seq"] >= spooled["seq"] for r in sink.reports.get("f0", []))
        assert p.poll() is None
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=20)
        assert p.returncode == 0, err
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
        sink.stop()
