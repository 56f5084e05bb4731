"""State store backends for tests: a SQLite file in the test's folder (:class:`SqliteBackend`),
and a schema of its own in the PostgreSQL database that ``RECONCILER_TEST_POSTGRES`` names
(:class:`PostgresBackend`); both open stores and reach the database directly. The fixtures that
make them are in ``tests/store_contract/conftest.py``; the replica and fencing trials in real
processes use :func:`with_schema` too."""

from __future__ import annotations

import os
import sqlite3
import uuid
from pathlib import Path
from typing import Protocol

import psycopg

from reconciler.operations.store import SqliteStore, StateStore
from reconciler.operations.store.postgres import PostgresStore
from reconciler.operations.store.schema import (
    POSTGRES_TYPES,
    SQLITE_TYPES,
    ColumnTypes,
    script_up_to,
)

#: The PostgreSQL database of the tests, by URL (empty: SQLite only).
POSTGRES_URL = os.environ.get("RECONCILER_TEST_POSTGRES", "")


class Backend(Protocol):
    """One database under test: opens stores on it (each with a connection of its own) and
    reaches it directly to set up what only an older reconciler would have written."""

    name: str
    url: str

    def open(self) -> StateStore:
        """A new store on the database, closed when the test ends."""

    def create_at_version(self, version: int) -> None:
        """The schema of ``version`` exactly as that version's migrations left it."""

    def execute(self, sql: str) -> None:
        """Run ``sql`` on the database directly (plain SQL that both databases accept)."""

    def close(self) -> None:
        """Close every store opened and drop what the test made."""


def schema_at_version(version: int, types: ColumnTypes) -> str:
    """The SQL that makes the schema of ``version`` exactly as its migrations left it, in the
    dialect of ``types``, with its ``schema_version`` row."""
    statements = "".join(s + ";" for s in script_up_to(version, types))
    return (
        "CREATE TABLE schema_version (version INTEGER NOT NULL);"
        f"{statements} INSERT INTO schema_version (version) VALUES ({version})"
    )


class SqliteBackend:
    """A SQLite file in the test's temporary folder."""

    name = "sqlite"

    def __init__(self, folder: Path) -> None:
        self.path = folder / "state.db"
        self.url = f"sqlite:///{self.path}"
        self.opened: list[SqliteStore] = []

    def open(self) -> StateStore:
        store = SqliteStore(self.path)
        self.opened.append(store)
        return store

    def create_at_version(self, version: int) -> None:
        self.execute(schema_at_version(version, SQLITE_TYPES))

    def execute(self, sql: str) -> None:
        db = sqlite3.connect(self.path)
        try:
            db.executescript(sql)
        finally:
            db.close()

    def close(self) -> None:
        for store in self.opened:
            store.close()


def with_schema(url: str, schema: str) -> str:
    """``url`` with ``schema`` first on the search path (where the store's tables go)."""
    joiner = "&" if "?" in url else "?"
    return f"{url}{joiner}options=-csearch_path%3D{schema}"


class PostgresBackend:
    """A schema of its own in the database that RECONCILER_TEST_POSTGRES names."""

    name = "postgresql"

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.schema = f"rc_contract_{uuid.uuid4().hex[:12]}"
        self.url = with_schema(base_url, self.schema)
        self.opened: list[PostgresStore] = []
        self.execute(f"CREATE SCHEMA {self.schema}")

    def open(self) -> StateStore:
        store = PostgresStore(self.url)
        self.opened.append(store)
        return store

    def create_at_version(self, version: int) -> None:
        self.execute(schema_at_version(version, POSTGRES_TYPES))

    def execute(self, sql: str) -> None:
        with psycopg.connect(self.url, autocommit=True) as db:
            db.execute(sql.encode())  # several statements: no parameters

    def close(self) -> None:
        for store in self.opened:
            store.close()
        with psycopg.connect(self.base_url, autocommit=True) as db:
            db.execute(f"DROP SCHEMA {self.schema} CASCADE".encode())
