"""Reads and writes of the SQL store; every write runs in one transaction and bumps the
store generation so that other replicas notice it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import CursorResult, Executable, Table, bindparam, delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from syncplan.api.db import FabricRow, HostReportRow, JobRow, Meta, PlanRow
from syncplan.api.errors import APIError
from syncplan.api.merge import canonical_json, digest
from syncplan.core.report import HostReport

ReportStatus = Literal["stored", "unchanged"]
"""What storing a report did: a newer report was ``stored``, or the same one was ``unchanged``."""


@contextmanager
def _tx(session: Session) -> Iterator[None]:
    """One transaction: the session's current one (committed here) or a new one."""
    if not session.in_transaction():
        with session.begin():
            yield
        return
    try:
        yield
    except BaseException:
        session.rollback()
        raise
    session.commit()


def generation(session: Session) -> int:
    return int(session.scalar(select(Meta.value).where(Meta.key == "generation")) or 0)


def _bump(session: Session) -> int:
    new = session.execute(
        update(Meta)
        .where(Meta.key == "generation")
        .values(value=Meta.value + 1)
        .returning(Meta.value)
    ).scalar_one()
    return int(new)


def _rowcount(session: Session, statement: Executable) -> int:
    """Execute an UPDATE or DELETE and return the number of rows it matched."""
    result = session.execute(statement)
    assert isinstance(result, CursorResult)  # DML through a Session returns a cursor result
    return result.rowcount


def report_body(report: HostReport) -> bytes:
    """The stored JSON of a report: deterministic for equal reports (the model's field
    order), so equal bodies have equal digests."""
    return report.model_dump_json().encode()


_T = HostReportRow.__table__
assert isinstance(_T, Table)  # a declarative class's __table__ is its Table
_UPDATE = (
    update(_T)
    .where(_T.c.host == bindparam("h"), _T.c.seq < bindparam("s"))
    .values(
        seq=bindparam("s"), digest=bindparam("d"), body=bindparam("b"), received_at=bindparam("t")
    )
)
_CURRENT = select(_T.c.seq, _T.c.digest, _T.c.received_at).where(_T.c.host == bindparam("h"))
_INSERT = _T.insert().values(
    host=bindparam("h"),
    seq=bindparam("s"),
    digest=bindparam("d"),
    body=bindparam("b"),
    received_at=bindparam("t"),
)


@dataclass(frozen=True)
class ReportIndex:
    host: str
    seq: int
    digest: str
    received_at: float


def put_report(session: Session, report: HostReport, now: float) -> tuple[ReportStatus, float]:
    """Store ``report``; return ("stored" | "unchanged", received_at). 409 on an old seq.

    The seq check and the write are one conditional UPDATE, so concurrent writers (even
    on SQLite, whose driver does not lock on SELECT) can never replace a newer report.
    """
    body = report_body(report)
    body_digest = hashlib.sha256(body).hexdigest()
    values = {"seq": report.seq, "digest": body_digest, "body": body.decode(), "received_at": now}
    for attempt in range(2):
        try:
            with _tx(session):
                done = _rowcount(
                    session,
                    update(HostReportRow)
                    .where(HostReportRow.host == report.host, HostReportRow.seq < report.seq)
                    .values(**values),
                )
                if done:
                    _bump(session)
                    return "stored", now
                row = session.execute(
                    select(
                        HostReportRow.seq, HostReportRow.digest, HostReportRow.received_at
                    ).where(HostReportRow.host == report.host)
                ).first()
                if row is None:
                    session.add(HostReportRow(host=report.host, **values))
                    session.flush()
                    _bump(session)
                    return "stored", now
                if report.seq < row.seq:
                    raise APIError(
                        409,
                        f"seq {report.seq} is older than the stored report's seq {row.seq}",
                        ["body", "seq"],
                        "stale_seq",
                    )
                if row.digest == body_digest:
                    return "unchanged", row.received_at
                raise APIError(
                    409,
                    f"seq {report.seq} is already stored with a different body; send a higher seq",
                    ["body", "seq"],
                    "seq_conflict",
                )
        except IntegrityError:
            if attempt:  # the host's first report raced another: the second try updates
                raise APIError(
                    409,
                    "a concurrent report for this host was stored first; retry",
                    ["path", "host"],
                    "conflict",
                ) from None
    raise AssertionError("unreachable")


def put_reports(
    session: Session, reports: list[HostReport], now: float
) -> list[tuple[ReportStatus, float] | APIError]:
    """Store several reports in one transaction (one commit, one generation bump): for
    each, what ``put_report`` returns, or the APIError it would raise. Each report's seq
    check and write is one conditional UPDATE, as in ``put_report``; a report of a host
    that is not stored yet is inserted. If an insert races another replica, the whole batch
    is rolled back and each report is stored alone."""
    prepared = []
    for report in reports:
        raw = report_body(report)
        prepared.append((report, raw.decode(), hashlib.sha256(raw).hexdigest()))
    out: list[tuple[ReportStatus, float] | APIError] = []
    try:
        with _tx(session):
            conn = session.connection()
            stored = False
            for report, body, body_digest in prepared:
                values = {"h": report.host, "s": report.seq, "d": body_digest, "b": body, "t": now}
                if conn.execute(_UPDATE, values).rowcount:
                    stored = True
                    out.append(("stored", now))
                    continue
                row = conn.execute(_CURRENT, values).first()
                if row is None:
                    conn.execute(_INSERT, values)
                    stored = True
                    out.append(("stored", now))
                elif report.seq < row.seq:
                    out.append(
                        APIError(
                            409,
                            f"seq {report.seq} is older than the stored report's seq {row.seq}",
                            ["body", "seq"],
                            "stale_seq",
                        )
                    )
                elif row.digest == body_digest:
                    out.append(("unchanged", row.received_at))
                else:
                    out.append(
                        APIError(
                            409,
                            f"seq {report.seq} is already stored with a "
                            "different body; send a higher seq",
                            ["body", "seq"],
                            "seq_conflict",
                        )
                    )
            if stored:
                _bump(session)
    except IntegrityError:
        session.rollback()
        out = []
        for report, _, _ in prepared:
            try:
                out.append(put_report(session, report, now))
            except APIError as exc:
                out.append(exc)
    return out


def delete_report(session: Session, host: str) -> bool:
    with _tx(session):
        gone = _rowcount(session, delete(HostReportRow).where(HostReportRow.host == host))
        if gone:
            _bump(session)
    return bool(gone)


def report_index(session: Session) -> tuple[int, list[ReportIndex]]:
    """The store generation and (host, seq, digest, received_at) of every report, read in
    one transaction."""
    with _tx(session):
        gen = generation(session)
        rows = session.execute(
            select(
                HostReportRow.host,
                HostReportRow.seq,
                HostReportRow.digest,
                HostReportRow.received_at,
            )
        ).all()
    return gen, [ReportIndex(*r) for r in rows]


def report_bodies(session: Session, hosts: list[str]) -> dict[str, tuple[str, str]]:
    """host -> (digest, body) for the given hosts."""
    out: dict[str, tuple[str, str]] = {}
    for i in range(0, len(hosts), 500):
        part = hosts[i : i + 500]
        for h, d, b in session.execute(
            select(HostReportRow.host, HostReportRow.digest, HostReportRow.body).where(
                HostReportRow.host.in_(part)
            )
        ):
            out[h] = (d, b)
    return out


def put_fabric(session: Session, fabric: dict[str, Any], now: float) -> str:
    body_digest = digest(fabric)
    with _tx(session):
        row = session.get(FabricRow, 1, with_for_update=True)
        if row is not None and row.digest == body_digest:
            return body_digest
        session.merge(
            FabricRow(
                id=1, digest=body_digest, body=canonical_json(fabric).decode(), updated_at=now
            )
        )
        _bump(session)
    return body_digest


def get_fabric(session: Session) -> FabricRow | None:
    return session.get(FabricRow, 1)


def delete_fabric(session: Session) -> bool:
    with _tx(session):
        gone = _rowcount(session, delete(FabricRow))
        if gone:
            _bump(session)
    return bool(gone)


def get_plan(session: Session, plan_id: str) -> PlanRow | None:
    return session.get(PlanRow, plan_id)


def get_plan_by_key(session: Session, key: str) -> PlanRow | None:
    return session.scalar(select(PlanRow).where(PlanRow.cache_key == key))


def put_plan(
    session: Session, plan_id: str, key: str, version: str, document: bytes, now: float
) -> None:
    """Store a plan; a plan already stored under the same id (another replica) is kept."""
    try:
        with _tx(session):
            if session.get(PlanRow, plan_id) is None:
                session.add(
                    PlanRow(
                        plan_id=plan_id,
                        cache_key=key,
                        topology_version=version,
                        document=document.decode(),
                        created_at=now,
                    )
                )
    except IntegrityError:
        pass


def put_job(session: Session, job_id: str, spec: dict[str, Any], now: float) -> None:
    with _tx(session):
        session.merge(JobRow(job_id=job_id, spec=json.dumps(spec, sort_keys=True), updated_at=now))
        _bump(session)


def get_job(session: Session, job_id: str) -> JobRow | None:
    return session.get(JobRow, job_id)


def delete_job(session: Session, job_id: str) -> bool:
    with _tx(session):
        gone = _rowcount(session, delete(JobRow).where(JobRow.job_id == job_id))
        if gone:
            _bump(session)
    return bool(gone)
