"""The state store in one SQLite file (standard library, WAL): the dialect of
:class:`~reconciler.operations.store.base.SqlBase` for SQLite, and the only importer of sqlite3.

Times are ISO text in UTC, the rowid is the insertion order, and a write transaction
(``BEGIN IMMEDIATE``) excludes every other writer of the file: claiming a runtime (O3) in one
never races another process's. A damaged, foreign or newer file is refused in one line that
says what to do.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from reconciler.errors import SourceError, StoreError
from reconciler.operations.store.base import Parameters, Statements, dialect
from reconciler.operations.store.operations import OperationTables
from reconciler.operations.store.outbox import OutboxTables
from reconciler.operations.store.records import RecordTables
from reconciler.operations.store.rollouts import RolloutTables
from reconciler.operations.store.schema import SQLITE_TYPES, TABLES

_SQL = dialect({"{order}": "rowid", "{for_update}": "", "{data_json}": "data"}, pyformat=False)


def _unusable(path: Path, error: sqlite3.DatabaseError) -> str:
    """One line: which file, what is wrong, what to do."""
    return (
        f"{path}: not a usable reconciler state store ({error}); restore it from a backup or "
        "move it away (a new one is created), check that the file and its folder are writable, "
        "or name another store with --state or RECONCILER_STATE"
    )


class SqliteStore(OperationTables, RecordTables, RolloutTables, OutboxTables):
    """:class:`~reconciler.operations.store.contract.StateStore` in one SQLite file."""

    TYPES = SQLITE_TYPES

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.shown = str(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(
                path, timeout=30, isolation_level=None, check_same_thread=False
            )
        except (OSError, sqlite3.Error) as error:
            raise SourceError(f"cannot open the state store {path}: {error}") from error
        self._db.row_factory = sqlite3.Row
        self._statements = Statements(self._db.execute, self._db.executemany, _SQL)
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            # a commit is kept across a process crash without an fsync; only a power loss may
            # take back the last commits (never corrupt): every step is safe to run again (O4)
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self.migrate()
            self._check_tables()
        except sqlite3.DatabaseError as error:
            self._db.close()
            raise SourceError(_unusable(path, error)) from error
        except SourceError:
            self._db.close()
            raise

    def close(self) -> None:
        """Close the file."""
        self._db.close()

    def check(self) -> None:
        """Read the whole file once (``PRAGMA quick_check``): a damaged store is refused at a
        daemon's start, not found out at its first query of a damaged page."""
        rows = self.query("PRAGMA quick_check")
        problems = [str(row[0]) for row in rows if str(row[0]) != "ok"]
        if problems:
            raise SourceError(_unusable(self.path, sqlite3.DatabaseError(problems[0])))

    def _check_tables(self) -> None:
        """Every table of the schema is there (a file of another program, or a damaged one,
        may claim the schema version and lack them)."""
        rows = self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        missing = sorted(TABLES.difference(str(row[0]) for row in rows))
        if missing:
            raise SourceError(
                _unusable(self.path, sqlite3.DatabaseError(f"no table {', '.join(missing)}"))
            )

    @contextmanager
    def _translated(self) -> Iterator[None]:
        """sqlite3's errors about the file as ours, once: a locked file may pass (transient);
        a damaged, foreign or read-only one will not (permanent). Misuse (a closed connection,
        a broken constraint) is our bug and stays as it is."""
        try:
            yield
        except sqlite3.OperationalError as error:
            if "locked" in str(error) or "busy" in str(error):
                raise StoreError(f"the state store {self.path} is busy: {error}") from None
            raise SourceError(_unusable(self.path, error)) from None
        except sqlite3.DatabaseError as error:
            if type(error) is not sqlite3.DatabaseError:  # ProgrammingError, IntegrityError...
                raise
            raise SourceError(_unusable(self.path, error)) from None

    @contextmanager
    def transaction(self) -> Iterator[Statements]:
        """See :meth:`SqlBase.transaction`: ``BEGIN IMMEDIATE`` takes the file's write lock."""
        with self._lock, self._translated():  # one connection, shared by the worker threads
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._statements
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    @contextmanager
    def snapshot(self) -> Iterator[Statements]:
        """See :meth:`SqlBase.snapshot`: the connection is shared under the store's lock, and
        its statements read what this process's writes left."""
        with self._lock, self._translated():
            yield self._statements

    def query(self, sql: str, parameters: Parameters = ()) -> list[Any]:
        """See :meth:`SqlBase.query`."""
        with self._lock, self._translated():
            return self._statements.run(sql, parameters).fetchall()

    def time(self, moment: datetime | None) -> object:
        """ISO text in UTC."""
        return moment.astimezone(UTC).isoformat() if moment is not None else None

    def read_time(self, value: Any) -> datetime | None:
        """See :meth:`SqlBase.read_time`."""
        return datetime.fromisoformat(value) if value else None
