"""Reporting over real HTTP: sequence numbers, spooling, backoff, a service that goes away."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from syncplan.agents.reporter import Backoff, Reporter
from syncplan.core.report import HostReport

from .conftest import ReportSink

FAST = Backoff(base_s=0.05, factor=2.0, max_s=0.2)


def report(host: str = "h0") -> HostReport:
    return HostReport(host=host, seq=0, endpoint_kind="cpu")


def wait_for(cond, timeout: float = 10.0) -> bool:  # type: ignore[no-untyped-def]
    end = time.time() + timeout
    while time.time() < end:
        if cond():
            return True
        time.sleep(0.02)
    return False


def test_delivers_with_token_and_increasing_seq(sink: ReportSink, tmp_path: Path) -> None:
    r = Reporter(sink.url, "h0", "s3cret", tmp_path, backoff=FAST).start()
    try:
        a = r.submit(report())
        assert wait_for(lambda: r.last_delivered_seq == a.seq)
        b = r.submit(report())
        assert wait_for(lambda: r.last_delivered_seq == b.seq)
    finally:
        r.stop()
    assert b.seq > a.seq
    assert [d["seq"] for d in sink.reports["h0"]] == [a.seq, b.seq]
    assert set(sink.auth) == {"Bearer s3cret"}
    assert r.pending() is None


def test_seq_survives_restart(tmp_path: Path) -> None:
    first = Reporter(None, "h0", None, tmp_path).next_seq()
    (tmp_path / "seq").write_text(f"{first + 10**9}\n")  # far ahead of the clock
    assert Reporter(None, "h0", None, tmp_path).next_seq() == first + 10**9 + 1


def test_service_down_then_up_latest_report_arrives(tmp_path: Path) -> None:
    sink = ReportSink()
    port = sink.port
    sink.stop()  # the service is down
    r = Reporter(
        f"http://127.0.0.1:{port}", "h0", None, tmp_path, backoff=FAST, timeout_s=1.0
    ).start()
    try:
        r.submit(report())
        latest = r.submit(report())
        time.sleep(0.5)  # several failed attempts
        assert r.pending()["seq"] == latest.seq
        sink = ReportSink(port=port)  # the service is back
        assert wait_for(lambda: r.last_delivered_seq == latest.seq)
        assert sink.reports["h0"][-1]["seq"] == latest.seq
    finally:
        r.stop()
        sink.stop()


def test_spooled_report_is_sent_after_agent_restart(sink: ReportSink, tmp_path: Path) -> None:
    offline = Reporter(None, "h0", None, tmp_path)
    spooled = offline.submit(report())  # no server: stays in the spool
    again = Reporter(sink.url, "h0", None, tmp_path, backoff=FAST).start()
    try:
        assert wait_for(lambda: again.last_delivered_seq == spooled.seq)
    finally:
        again.stop()
    assert sink.reports["h0"][0]["seq"] == spooled.seq


def test_refused_report_is_dropped_not_retried(sink: ReportSink, tmp_path: Path) -> None:
    sink.status = 422
    r = Reporter(sink.url, "h0", None, tmp_path, backoff=FAST).start()
    try:
        r.submit(report())
        assert wait_for(lambda: r.pending() is None)
    finally:
        r.stop()
    assert "h0" not in sink.reports or not sink.reports["h0"]


def test_backoff_grows_with_jitter_and_is_capped() -> None:
    b = Backoff(base_s=1.0, factor=2.0, max_s=8.0)
    rng = random.Random(1)
    for attempt, cap in [(0, 1.0), (1, 2.0), (2, 4.0), (3, 8.0), (10, 8.0)]:
        values = [b.delay(attempt, rng) for _ in range(50)]
        assert all(cap / 2 <= v <= cap for v in values)
        assert len({round(v, 6) for v in values}) > 1
    with pytest.raises(ValueError):
        Backoff(base_s=0)
