"""The seam between the one SQL implementation of the state store and its two dialects.

:class:`SqlBase` is what the SQL of :mod:`~reconciler.operations.store.operations` and
:mod:`~reconciler.operations.store.records` runs on, and all a dialect supplies: its
connection and transactions (:meth:`SqlBase.transaction`, :meth:`SqlBase.snapshot`,
:meth:`SqlBase.query`), how it keeps a time, its insertion-order column, its placeholders
(statements here are written with ``?`` and ``:name``; :class:`Statements` turns them into the
dialect's) and its locks (:meth:`SqlBase.serialise`). Migrations
(:mod:`~reconciler.operations.store.schema`) run here, for both. Writes carry a
:class:`~reconciler.operations.model.FenceToken` checked in the statement that writes
(:data:`FENCE_GUARD`).
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, ClassVar, Protocol

from reconciler.errors import LostOwnershipError, SourceError
from reconciler.operations.model import FenceToken, Operation
from reconciler.operations.store.rows import SavedRows
from reconciler.operations.store.schema import SCHEMA_VERSION, ColumnTypes, migrations_after

#: The fence of a write (:class:`FenceToken`), in the statement that writes: no token (a
#: ``reconciler sync``, not a member), or the member's epoch is still the token's and was not
#: fenced by another member.
FENCE_GUARD = """(CAST(:fence_member AS TEXT) IS NULL OR EXISTS (
    SELECT 1 FROM members WHERE name = :fence_member AND epoch = :fence_epoch
    AND fenced_epoch < epoch))"""
#: Lock keys (PostgreSQL's advisory locks; SQLite's write transactions exclude each other):
#: migrations, verdicts on commits, claims of a runtime (with the runtime's name), claims of
#: notifications in the outbox.
MIGRATION_LOCK = 0x7265636F6E63
COMMITS_LOCK = 0x7265636F6E64
CLAIM_LOCK = 0x72636C6D
OUTBOX_LOCK = 0x72636F62

#: A statement's parameters: by position (``?``) or by name (``:name``).
Parameters = Sequence[object] | dict[str, object]


class Result(Protocol):
    """What a statement run returns (a DB-API cursor)."""

    @property
    def rowcount(self) -> int:
        """The rows the statement wrote."""

    def fetchone(self) -> Any:
        """The next row, or ``None``."""

    def fetchall(self) -> list[Any]:
        """The rows left."""


class Statements:
    """Runs the store's statements in a dialect's placeholders, on one connection or cursor."""

    def __init__(
        self,
        execute: Callable[[str, Any], Result],
        execute_many: Callable[[str, Any], object],
        dialect: Callable[[str], str],
    ) -> None:
        self._execute = execute
        self._execute_many = execute_many
        self._dialect = dialect

    def run(self, sql: str, parameters: Parameters = ()) -> Result:
        """Run one statement."""
        return self._execute(self._dialect(sql), parameters)

    def run_many(self, sql: str, rows: Sequence[Parameters]) -> None:
        """Run one statement for each of ``rows`` (none: nothing)."""
        if rows:
            self._execute_many(self._dialect(sql), rows)


def fence_values(fence: FenceToken | None) -> dict[str, object]:
    """The parameters of :data:`FENCE_GUARD` for ``fence`` (none: no guard)."""
    if fence is None:
        return {"fence_member": None, "fence_epoch": 0}
    return {"fence_member": fence.member, "fence_epoch": fence.epoch}


def fenced(fence: FenceToken | None) -> str:
    """Why a guarded write was refused, in words."""
    if fence is None:
        return "another owner claimed or wrote it since"
    return (
        f"another owner claimed or wrote it since, or member {fence.member}'s epoch "
        f"{fence.epoch} is no longer current (its lease lapsed: fenced by another member, or "
        "it beat again in a new epoch)"
    )


def refused(operation: Operation, fence: FenceToken | None) -> LostOwnershipError:
    """The error of a save the store refused (nothing written)."""
    return LostOwnershipError(f"operation {operation.id} not saved: {fenced(fence)}")


def marks(count: int) -> str:
    """``?, ?, ?``: the placeholders of ``count`` values in an ``IN`` list."""
    return ", ".join("?" * count)


class SqlBase:
    """What a dialect supplies (see the module's docstring), and the migrations."""

    #: The dialect's column types, for the migrations.
    TYPES: ClassVar[ColumnTypes]
    #: The store as messages name it (a path, a URL without its password).
    shown: str

    def __init__(self) -> None:
        self._lock = threading.RLock()  # one connection, shared by the daemon's worker threads
        self._saved = SavedRows()

    def transaction(self) -> AbstractContextManager[Statements]:
        """A write transaction, excluding other writers of what it locks; committed at the end,
        rolled back on an exception."""
        raise NotImplementedError

    def snapshot(self) -> AbstractContextManager[Statements]:
        """Reads of several statements that see one state of the database."""
        raise NotImplementedError

    def query(self, sql: str, parameters: Parameters = ()) -> list[Any]:
        """The rows of one statement on its own."""
        raise NotImplementedError

    def time(self, moment: datetime | None) -> object:
        """A time as the dialect stores it."""
        raise NotImplementedError

    def read_time(self, value: Any) -> datetime | None:
        """A stored time, aware (in UTC as written)."""
        raise NotImplementedError

    def serialise(self, statements: Statements, key: int, name: str | None = None) -> None:
        """Hold lock ``key`` (of ``name``, if given) to the end of the transaction, where the
        dialect's write transactions do not already exclude each other."""

    def read_stored_time(self, value: Any) -> datetime:
        """A stored time that may not be empty."""
        moment = self.read_time(value)
        assert moment is not None
        return moment

    def schema_version(self) -> int:
        """The schema version of the database."""
        return int(self.query("SELECT max(version) AS v FROM schema_version")[0]["v"])

    def migrate(self) -> None:
        """Bring the database to :data:`SCHEMA_VERSION`, in one transaction (one migration at a
        time across processes)."""
        with self.transaction() as statements:
            self.serialise(statements, MIGRATION_LOCK)
            statements.run("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            row = statements.run("SELECT max(version) AS v FROM schema_version").fetchone()
            current = int(row["v"] or 0) if row is not None else 0
            if current > SCHEMA_VERSION:
                raise SourceError(
                    f"{self.shown} has schema version {current}, newer than this reconciler "
                    f"({SCHEMA_VERSION}); upgrade reconciler"
                )
            for migration in migrations_after(current):
                for statement in migration.for_types(self.TYPES):
                    statements.run(statement)
                statements.run(
                    "INSERT INTO schema_version (version) VALUES (?)", (migration.version,)
                )


_NAMED = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


def dialect(tokens: dict[str, str], pyformat: bool) -> Callable[[str], str]:
    """How a dialect writes the store's statements: ``tokens`` (``{order}``...) replaced, and
    with ``pyformat`` the placeholders ``?`` and ``:name`` as ``%s`` and ``%(name)s``. Each
    statement is worked out once."""

    @functools.lru_cache(maxsize=512)
    def written(sql: str) -> str:
        for token, text in tokens.items():
            sql = sql.replace(token, text)
        if pyformat:
            sql = _NAMED.sub(r"%(\1)s", sql.replace("%", "%%").replace("?", "%s"))
        return sql

    return written
