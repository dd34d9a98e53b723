"""The in-memory view of the store: rebuilt only when the graph can have changed, stale
hosts leave at their TTL, writes by another process are picked up."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session, sessionmaker
from syncplan.api import store
from syncplan.api.db import init_schema, make_engine, session_factory
from syncplan.api.state import ClusterState
from syncplan.core.report import HostReport

from tests.api.helpers import host_report


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _put(factory: sessionmaker[Session], clock: Clock, host: str, seq: int, **kw: Any) -> None:
    with factory() as s:
        store.put_report(s, HostReport.model_validate(host_report(host, seq, **kw)), clock.now)


def test_rebuilds_only_when_needed(store_url: str) -> None:
    engine = make_engine(store_url)
    init_schema(engine)
    factory = session_factory(engine)
    clock = Clock()
    state = ClusterState(factory, stale_after_s=30, sync_interval_s=5, clock=clock)
    _put(factory, clock, "h0", 1, peers={"h1": 10.0})
    _put(factory, clock, "h1", 1)
    snap = state.refresh()
    assert state.current() is snap and state.merges == 1

    clock.now += 10
    _put(factory, clock, "h0", 2, peers={"h1": 10.0})  # new seq, same graph
    state.invalidate()
    assert state.current() is None
    snap2 = state.refresh()
    assert snap2.version == snap.version and state.merges == 1
    assert snap2.hosts["h0"].seq == 2

    # Another process wrote: seen after sync_interval_s without any local invalidate().
    _put(factory, clock, "h1", 2, peers={"h0": 11.0})
    clock.now += 4
    assert state.current() is snap2
    clock.now += 1
    assert state.current() is None
    snap3 = state.refresh()
    assert snap3.version != snap.version and state.merges == 2

    # h0 last reported at t=1010; h1 reports again at t=1035; at t=1040 only h0 is stale.
    clock.now = 1035
    _put(factory, clock, "h1", 3, peers={"h0": 11.0})
    state.invalidate()
    state.refresh()
    clock.now = 1040
    snap4 = state.current() or state.refresh()
    assert snap4.stale == {"h0"} and snap4.hosts["h0"].stale
    assert not any(n.get("host") == "h0" for n in snap4.graph["nodes"])
    _put(factory, clock, "h0", 3, peers={"h1": 10.0})
    state.invalidate()
    assert state.refresh().stale == frozenset()
    engine.dispose()
