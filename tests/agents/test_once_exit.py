"""``syncplan agent --once`` exits 1, with one line saying why, when its report was refused or
never delivered (before: exit 0 either way); 0 once the service stored it."""

from __future__ import annotations

import subprocess

from .conftest import FIXTURES, ReportSink
from .test_cli import agent, free_port


def _once(server: str, tmp: str) -> subprocess.Popen:
    return agent(
        "--once",
        "--server",
        server,
        "--token",
        "tok",
        "--host-name",
        "hgx",
        "--bind",
        "127.0.0.1",
        "--probe-port",
        "0",
        "--spool-dir",
        tmp,
        "--nvml-fixture",
        str(FIXTURES / "hgx8" / "nvml.json"),
        "--sysfs-root",
        str(FIXTURES / "hgx8" / "sys"),
        "--procfs-root",
        str(FIXTURES / "hgx8" / "proc"),
    )


def _last_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def test_once_exits_0_when_the_report_is_stored(tmp_path) -> None:  # type: ignore[no-untyped-def]
    sink = ReportSink(token="tok")
    try:
        p = _once(sink.url, str(tmp_path))
        _out, err = p.communicate(timeout=120)
    finally:
        sink.stop()
    assert p.returncode == 0, err
    assert len(sink.reports["hgx"]) == 1


def test_once_exits_1_when_the_report_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    sink = ReportSink(token="other-token")  # our token is refused: 401
    sink403 = ReportSink()
    sink403.status = 403
    try:
        for s, code in ((sink, 401), (sink403, 403)):
            p = _once(s.url, str(tmp_path / str(code)))
            _out, err = p.communicate(timeout=120)
            assert p.returncode == 1, (code, err)
            line = _last_line(err)
            assert f"refused ({code}" in line and "report" in line, err
            assert "Traceback" not in err
    finally:
        sink.stop()
        sink403.stop()


def test_once_exits_1_when_the_service_is_unreachable(tmp_path) -> None:  # type: ignore[no-untyped-def]
    p = _once(f"http://127.0.0.1:{free_port()}", str(tmp_path))
    _out, err = p.communicate(timeout=120)
    assert p.returncode == 1, err
    assert "not delivered" in _last_line(err) and "unreachable" in _last_line(err), err
