"""The SQL store: tables, engine, and the explicit schema version check.

SQLite (default, a local file) and PostgreSQL (``postgresql+psycopg://...``) are both
supported through SQLAlchemy 2. JSON bodies are stored as canonical text so both back ends
keep them byte for byte.
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy import (
    BigInteger,
    Engine,
    Float,
    Integer,
    String,
    Text,
    create_engine,
    event,
    inspect,
    select,
    text,
)
from sqlalchemy.engine import make_url
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker

SCHEMA_VERSION = 1


class SchemaError(RuntimeError):
    """The database holds a schema this version of the service does not understand."""


class Base(DeclarativeBase):
    pass


class SchemaInfo(Base):
    __tablename__ = "schema_info"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[int] = mapped_column(Integer)


class Meta(Base):
    """Counters: ``generation`` grows with every write, so replicas notice each other."""

    __tablename__ = "meta"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[int] = mapped_column(BigInteger)


class HostReportRow(Base):
    __tablename__ = "host_reports"
    host: Mapped[str] = mapped_column(String(128), primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger)
    digest: Mapped[str] = mapped_column(String(64))
    body: Mapped[str] = mapped_column(Text)
    received_at: Mapped[float] = mapped_column(Float)


class FabricRow(Base):
    __tablename__ = "fabric"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    digest: Mapped[str] = mapped_column(String(64))
    body: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[float] = mapped_column(Float)


class PlanRow(Base):
    __tablename__ = "plans"
    plan_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    cache_key: Mapped[str] = mapped_column(String(64), index=True, unique=True)
    topology_version: Mapped[str] = mapped_column(String(64))
    document: Mapped[str] = mapped_column(Text)
    created_at: Mapped[float] = mapped_column(Float)


class JobRow(Base):
    __tablename__ = "jobs"
    job_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    spec: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[float] = mapped_column(Float)


def make_engine(url: str, pool_size: int = 8, timeout_s: float = 5.0) -> Engine:
    """An engine for ``url``; SQLite gets WAL, a busy timeout and foreign keys. ``timeout_s``
    bounds how long a request waits for the store (SQLite's lock, PostgreSQL's connect and
    pool) before it fails as an outage (503)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": timeout_s})

        @event.listens_for(engine, "connect")
        def _pragmas(conn, _record) -> None:
            cur = conn.cursor()
            if parsed.database not in (None, "", ":memory:"):
                cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        return engine
    connect: dict[str, object] = {}
    if parsed.get_backend_name() == "postgresql":
        connect["connect_timeout"] = max(2, round(timeout_s))
    return create_engine(
        url,
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=True,
        pool_timeout=timeout_s,
        connect_args=connect,
    )


def init_schema(engine: Engine) -> None:
    """Create the tables in an empty database; refuse a database of another schema version."""
    tables = set(inspect(engine).get_table_names())
    ours = set(Base.metadata.tables)
    if tables & ours and "schema_info" not in tables:
        raise SchemaError(
            "the database has syncplan tables but no schema_info table; "
            "it was not created by this service"
        )
    if "schema_info" in tables:
        with Session(engine) as s:
            found = s.scalar(select(SchemaInfo.version).where(SchemaInfo.id == 1))
        if found != SCHEMA_VERSION:
            raise SchemaError(
                f"database schema version is {found}, this service needs "
                f"{SCHEMA_VERSION}; migrate or point SYNCPLAN_DATABASE_URL "
                "elsewhere"
            )
        if not ours <= tables:
            raise SchemaError(
                f"database schema version {found} is missing tables {sorted(ours - tables)}"
            )
        return
    Base.metadata.create_all(engine)
    with Session(engine) as s, s.begin():
        s.merge(SchemaInfo(id=1, version=SCHEMA_VERSION))
        s.merge(Meta(key="generation", value=0))


def session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


def ping(engine: Engine) -> None:
    with engine.connect() as conn:
        conn.execute(text("SELECT 1"))


def iter_session(factory: sessionmaker[Session]) -> Iterator[Session]:
    with factory() as session:
        yield session
