"""State stores the contract runs against: SQLite always (a real file in ``tmp_path``); a real
PostgreSQL server when ``RECONCILER_TEST_POSTGRES`` names a database by URL (each test then works
in a schema of its own, dropped afterwards). ``bash tests/pg_server.sh pytest tests/store_contract``
starts a throwaway server and sets the variable, as CI does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.store_backends import POSTGRES_URL, Backend, PostgresBackend, SqliteBackend


def _backends() -> list[str]:
    return ["sqlite", "postgresql"] if POSTGRES_URL else ["sqlite"]


@pytest.fixture(params=_backends())
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    made: Backend = (
        SqliteBackend(tmp_path) if request.param == "sqlite" else PostgresBackend(POSTGRES_URL)
    )
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def postgres() -> Iterator[PostgresBackend]:
    """The PostgreSQL backend alone, for what only it has (password sources, reconnecting)."""
    if not POSTGRES_URL:
        pytest.skip("RECONCILER_TEST_POSTGRES is not set (bash tests/pg_server.sh pytest ...)")
    made = PostgresBackend(POSTGRES_URL)
    try:
        yield made
    finally:
        made.close()
