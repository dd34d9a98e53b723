"""The service fixtures of tests/api (a real server, PostgreSQL), shared here."""

from tests.api.conftest import anyio_backend, postgres_url, server, store_url  # noqa: F401
