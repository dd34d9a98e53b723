"""The SQL store on each back end (SQLite file; PostgreSQL when it can be started)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from sqlalchemy.orm import Session, sessionmaker
from syncplan.api import store
from syncplan.api.db import init_schema, make_engine, session_factory
from syncplan.api.errors import APIError
from syncplan.core.report import HostReport

from tests.api.helpers import host_report


@pytest.fixture
def factory(store_url: str) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(store_url)
    init_schema(engine)
    yield session_factory(engine)
    engine.dispose()


def _report(seq: int, **kw: object) -> HostReport:
    return HostReport.model_validate(host_report("h0", seq, **kw))  # type: ignore[arg-type]


def test_seq_rules_and_generation(factory: sessionmaker[Session]) -> None:
    with factory() as s:
        assert store.generation(s) == 0
    with factory() as s:
        assert store.put_report(s, _report(3), 1.0) == ("stored", 1.0)
    with factory() as s:
        assert store.put_report(s, _report(3), 2.0) == ("unchanged", 1.0)
    for seq, kw, kind in ((2, {}, "stale_seq"), (3, {"gpus": 2}, "seq_conflict")):
        with factory() as s, pytest.raises(APIError) as err:
            store.put_report(s, _report(seq, **kw), 3.0)
        assert err.value.status == 409 and err.value.type == kind
    with factory() as s:
        gen, index = store.report_index(s)
    assert gen == 1 and [(r.host, r.seq, r.received_at) for r in index] == [("h0", 3, 1.0)]
    with factory() as s:
        store.put_fabric(s, {"nodes": [{"id": "tor", "kind": "switch"}], "links": []}, 4.0)
    with factory() as s:
        store.put_fabric(s, {"nodes": [{"id": "tor", "kind": "switch"}], "links": []}, 5.0)
    with factory() as s:
        assert store.generation(s) == 2  # an identical fabric is not a change
        assert store.delete_report(s, "h0") and store.generation(s) == 3


def test_concurrent_reports_keep_the_newest(factory: sessionmaker[Session]) -> None:
    outcomes: list[str] = []
    lock = threading.Lock()

    def writer(seqs: range) -> None:
        for seq in seqs:
            try:
                with factory() as s:
                    result = store.put_report(s, _report(seq), time.time())[0]
            except APIError as exc:
                assert exc.status == 409
                result = "refused"
            with lock:
                outcomes.append(result)

    threads = [threading.Thread(target=writer, args=(range(i, 60, 4),)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(outcomes) == 60 and "stored" in outcomes
    with factory() as s:
        gen, index = store.report_index(s)
    assert index[0].seq == 59
    assert gen == outcomes.count("stored")  # one generation per stored report, no more


def test_plans_and_jobs(factory: sessionmaker[Session]) -> None:
    with factory() as s:
        store.put_plan(s, "p1", "k1", "v1", b'{"plan_id":"p1"}', 1.0)
    with factory() as s:
        store.put_plan(s, "p1", "k1", "v1", b'{"plan_id":"p1"}', 2.0)  # another replica
    with factory() as s:
        row = store.get_plan_by_key(s, "k1")
        assert row is not None and row.document == '{"plan_id":"p1"}' and row.created_at == 1.0
    with factory() as s:
        store.put_job(s, "j", {"ranks": ["a"], "size_bytes": 1}, 1.0)
    with factory() as s:
        store.put_job(s, "j", {"ranks": ["b"], "size_bytes": 2}, 2.0)
    with factory() as s:
        job = store.get_job(s, "j")
        assert job is not None and '"b"' in job.spec
    with factory() as s:
        assert store.delete_job(s, "j") and not store.delete_job(s, "j")
