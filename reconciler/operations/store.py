"""The state store: operations, their stages and steps, and each runtime's last known state.

:class:`StateStore` is the small interface; :class:`SqliteStore` keeps it in one SQLite file
(standard library, WAL, a schema version and migrations from the first version). Claiming a
runtime for an operation (O3) happens in an immediate transaction, so two processes sharing the
file never run two operations of one runtime at once; an operation whose owner died (a process
on this host that no longer exists, or a lease that ran out) may be taken over and resumed.
Nothing secret is stored (S4). Callers: the engine, the runner and its steps, the CLI, the daemon.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from reconciler.errors import SourceError
from reconciler.operations.model import (
    CommitRecord,
    CommitVerdict,
    Operation,
    OperationState,
    OperationType,
    RuntimeRecord,
    StageRecord,
    StepRecord,
    StepState,
)

SCHEMA_VERSION = 2
_UPSERT_OPERATION = """
    INSERT INTO operations (id, runtime, type, state, created, updated, deadline, commit_id,
                            message, owner, lease_until, retrigger_of, data)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (id) DO UPDATE SET
        runtime = excluded.runtime, type = excluded.type, state = excluded.state,
        created = excluded.created, updated = excluded.updated, deadline = excluded.deadline,
        commit_id = excluded.commit_id, message = excluded.message, owner = excluded.owner,
        lease_until = excluded.lease_until, retrigger_of = excluded.retrigger_of,
        data = excluded.data
"""
MIGRATIONS: dict[int, str] = {
    1: """
    CREATE TABLE operations (
        id TEXT PRIMARY KEY,
        runtime TEXT NOT NULL,
        type TEXT NOT NULL,
        state TEXT NOT NULL,
        created TEXT NOT NULL,
        updated TEXT,
        deadline TEXT NOT NULL,
        commit_id TEXT NOT NULL DEFAULT '',
        message TEXT NOT NULL DEFAULT '',
        owner TEXT NOT NULL DEFAULT '',
        lease_until TEXT,
        retrigger_of TEXT NOT NULL DEFAULT '',
        data TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX operations_by_runtime ON operations (runtime, created);
    CREATE TABLE stages (
        operation_id TEXT NOT NULL REFERENCES operations (id),
        position INTEGER NOT NULL,
        name TEXT NOT NULL,
        done INTEGER NOT NULL DEFAULT 0,
        finished TEXT,
        PRIMARY KEY (operation_id, position)
    );
    CREATE TABLE steps (
        operation_id TEXT NOT NULL REFERENCES operations (id),
        stage_position INTEGER NOT NULL,
        position INTEGER NOT NULL,
        name TEXT NOT NULL,
        state TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        first_started TEXT,
        started TEXT,
        finished TEXT,
        retry_at TEXT,
        message TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (operation_id, stage_position, position)
    );
    CREATE TABLE runtimes (
        runtime TEXT PRIMARY KEY,
        state TEXT NOT NULL,
        reason TEXT NOT NULL,
        message TEXT NOT NULL,
        commit_id TEXT NOT NULL,
        updated TEXT NOT NULL,
        modules TEXT NOT NULL DEFAULT '[]'
    );
    """,
    2: """
    ALTER TABLE runtimes ADD COLUMN access TEXT NOT NULL DEFAULT '';
    CREATE TABLE commits (
        commit_id TEXT PRIMARY KEY,
        verdict TEXT NOT NULL,
        decided TEXT NOT NULL,
        message TEXT NOT NULL DEFAULT '',
        detail TEXT NOT NULL DEFAULT '{}',
        attempts INTEGER NOT NULL DEFAULT 0
    );
    """,
}


class StateStore(Protocol):
    """Where operations and runtime states live."""

    def save(self, operation: Operation) -> None:
        """Insert or update an operation with its stages and steps."""

    def get(self, operation_id: str) -> Operation | None:
        """An operation by id (a unique prefix is enough)."""

    def operations(self, runtime: str | None = None, limit: int = 50) -> list[Operation]:
        """Newest first, for one runtime or all."""

    def unfinished(self, runtime: str) -> Operation | None:
        """The runtime's pending or in-progress operation, if any."""

    def claim(
        self,
        operation_id: str,
        owner: str,
        now: datetime,
        lease_until: datetime,
        alive: Callable[[str], bool],
    ) -> str | None:
        """Move the operation to in progress for ``owner`` unless another live owner holds an
        operation of the same runtime; returns that holder's description, else ``None``."""

    def put_runtime(self, record: RuntimeRecord) -> None:
        """Record a runtime's last known state."""

    def runtimes(self) -> list[RuntimeRecord]:
        """Every runtime's last known state, by name."""

    def runtime(self, runtime: str) -> RuntimeRecord | None:
        """One runtime's last known state."""

    def forget_runtime(self, runtime: str) -> None:
        """Drop a deprovisioned runtime's record."""

    def record_access(self, runtime: str, access: str) -> None:
        """Remember where ``runtime`` was synced (see :attr:`RuntimeRecord.access`)."""

    def put_commit(self, record: CommitRecord) -> None:
        """Record the daemon's verdict on a commit."""

    def commit(self, commit: str) -> CommitRecord | None:
        """The verdict on ``commit``, if one was recorded."""

    def last_accepted(self) -> CommitRecord | None:
        """The commit accepted last (the one in force)."""


def default_state_url() -> str:
    """``sqlite:///`` a file under the user's state directory (XDG_STATE_HOME)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return f"sqlite:///{Path(base) / 'reconciler' / 'state.db'}"


def open_store(url: str) -> SqliteStore:
    """The store a ``--state`` URL names: ``sqlite:///path/to/state.db``."""
    prefix = "sqlite:///"
    if not url.startswith(prefix):
        raise SourceError(f"--state {url}: only sqlite:///PATH is supported")
    return SqliteStore(Path(os.path.expanduser(url[len(prefix) :])))


class SqliteStore:
    """:class:`StateStore` in one SQLite file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(
                path, timeout=30, isolation_level=None, check_same_thread=False
            )
        except (OSError, sqlite3.Error) as error:
            raise SourceError(f"cannot open the state store {path}: {error}") from error
        self._lock = threading.RLock()
        self._db.row_factory = sqlite3.Row
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except sqlite3.DatabaseError as error:
            self._db.close()
            raise SourceError(
                f"{path}: not a usable reconciler state store ({error}); name another with "
                "--state or RECONCILER_STATE"
            ) from error

    def close(self) -> None:
        """Close the file."""
        self._db.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:  # one connection, shared by the daemon's worker threads
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _migrate(self) -> None:
        with self._transaction() as db:
            db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            row = db.execute("SELECT max(version) AS v FROM schema_version").fetchone()
            current = int(row["v"] or 0)
            if current > SCHEMA_VERSION:
                raise SourceError(
                    f"{self.path} has schema version {current}, newer than this reconciler "
                    f"({SCHEMA_VERSION}); upgrade reconciler"
                )
            for version in range(current + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[version].split(";"):  # in this transaction
                    if statement.strip():
                        db.execute(statement)
                db.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))

    def _query(self, sql: str, parameters: tuple[object, ...] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._db.execute(sql, parameters).fetchall()

    def schema_version(self) -> int:
        """The schema version of the file."""
        row = self._db.execute("SELECT max(version) AS v FROM schema_version").fetchone()
        return int(row["v"])

    # -- operations ------------------------------------------------------------------------------

    def save(self, operation: Operation) -> None:
        """See :class:`StateStore`."""
        with self._transaction() as db:
            db.execute(
                _UPSERT_OPERATION,
                (
                    operation.id,
                    operation.runtime,
                    str(operation.type),
                    str(operation.state),
                    _iso(operation.created),
                    _iso(operation.updated),
                    _iso(operation.deadline),
                    operation.commit,
                    operation.message,
                    operation.owner,
                    _iso(operation.lease_until),
                    operation.retrigger_of,
                    json.dumps(operation.data, sort_keys=True),
                ),
            )
            db.execute("DELETE FROM steps WHERE operation_id = ?", (operation.id,))
            db.execute("DELETE FROM stages WHERE operation_id = ?", (operation.id,))
            for index, stage in enumerate(operation.stages):
                db.execute(
                    "INSERT INTO stages (operation_id, position, name, done, finished) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (operation.id, index, stage.name, int(stage.done), _iso(stage.finished)),
                )
                for position, step in enumerate(stage.steps):
                    db.execute(
                        "INSERT INTO steps (operation_id, stage_position, position, name, state, "
                        "attempts, first_started, started, finished, retry_at, message) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (
                            operation.id,
                            index,
                            position,
                            step.name,
                            str(step.state),
                            step.attempts,
                            _iso(step.first_started),
                            _iso(step.started),
                            _iso(step.finished),
                            _iso(step.retry_at),
                            step.message,
                        ),
                    )

    def get(self, operation_id: str) -> Operation | None:
        """See :class:`StateStore`."""
        rows = self._query(
            "SELECT * FROM operations WHERE id LIKE ? ORDER BY created", (operation_id + "%",)
        )
        if len(rows) != 1:
            return None
        return self._operation(rows[0])

    def operations(self, runtime: str | None = None, limit: int = 50) -> list[Operation]:
        """See :class:`StateStore`."""
        if runtime is None:
            rows = self._query(
                "SELECT * FROM operations ORDER BY created DESC, rowid DESC LIMIT ?", (limit,)
            )
        else:
            rows = self._query(
                "SELECT * FROM operations WHERE runtime = ? "
                "ORDER BY created DESC, rowid DESC LIMIT ?",
                (runtime, limit),
            )
        return [self._operation(row) for row in rows]

    def unfinished(self, runtime: str) -> Operation | None:
        """See :class:`StateStore`."""
        rows = self._query(
            "SELECT * FROM operations WHERE runtime = ? AND state IN (?, ?) "
            "ORDER BY created LIMIT 1",
            (runtime, str(OperationState.PENDING), str(OperationState.IN_PROGRESS)),
        )
        return self._operation(rows[0]) if rows else None

    def claim(
        self,
        operation_id: str,
        owner: str,
        now: datetime,
        lease_until: datetime,
        alive: Callable[[str], bool],
    ) -> str | None:
        """See :class:`StateStore`."""
        with self._transaction() as db:
            row = db.execute(
                "SELECT runtime FROM operations WHERE id = ?", (operation_id,)
            ).fetchone()
            holders = db.execute(
                "SELECT id, owner, lease_until FROM operations WHERE runtime = ? AND state = ?",
                (row["runtime"], str(OperationState.IN_PROGRESS)),
            )
            for holder in holders:
                lease = _parse(holder["lease_until"])
                if holder["owner"] == owner or holder["owner"] == "":
                    continue
                if lease is not None and lease > now and alive(holder["owner"]):
                    return f"operation {holder['id']} of {holder['owner']}"
            db.execute(
                "UPDATE operations SET state = ?, owner = ?, lease_until = ?, updated = ? "
                "WHERE id = ?",
                (
                    str(OperationState.IN_PROGRESS),
                    owner,
                    _iso(lease_until),
                    _iso(now),
                    operation_id,
                ),
            )
        return None

    def _operation(self, row: sqlite3.Row) -> Operation:
        stages: list[StageRecord] = []
        for stage in self._query(
            "SELECT * FROM stages WHERE operation_id = ? ORDER BY position", (row["id"],)
        ):
            steps = [
                StepRecord(
                    name=step["name"],
                    state=StepState(step["state"]),
                    attempts=step["attempts"],
                    first_started=_parse(step["first_started"]),
                    started=_parse(step["started"]),
                    finished=_parse(step["finished"]),
                    retry_at=_parse(step["retry_at"]),
                    message=step["message"],
                )
                for step in self._query(
                    "SELECT * FROM steps WHERE operation_id = ? AND stage_position = ? "
                    "ORDER BY position",
                    (row["id"], stage["position"]),
                )
            ]
            stages.append(
                StageRecord(stage["name"], steps, bool(stage["done"]), _parse(stage["finished"]))
            )
        created, deadline = _parse(row["created"]), _parse(row["deadline"])
        assert created is not None
        assert deadline is not None
        return Operation(
            id=row["id"],
            runtime=row["runtime"],
            type=OperationType(row["type"]),
            state=OperationState(row["state"]),
            created=created,
            deadline=deadline,
            stages=stages,
            commit=row["commit_id"],
            message=row["message"],
            updated=_parse(row["updated"]),
            owner=row["owner"],
            lease_until=_parse(row["lease_until"]),
            retrigger_of=row["retrigger_of"],
            data=json.loads(row["data"]),
        )

    # -- runtimes --------------------------------------------------------------------------------

    def put_runtime(self, record: RuntimeRecord) -> None:
        """See :class:`StateStore`."""
        with self._transaction() as db:
            db.execute(
                "INSERT INTO runtimes (runtime, state, reason, message, commit_id, updated, "
                "modules, access) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (runtime) DO UPDATE SET state = excluded.state, "
                "reason = excluded.reason, message = excluded.message, "
                "commit_id = excluded.commit_id, updated = excluded.updated, "
                "modules = excluded.modules, "
                "access = CASE WHEN excluded.access != '' THEN excluded.access ELSE access END",
                (
                    record.runtime,
                    record.state,
                    record.reason,
                    record.message,
                    record.commit,
                    _iso(record.updated),
                    json.dumps(record.modules, sort_keys=True),
                    record.access,
                ),
            )

    def runtimes(self) -> list[RuntimeRecord]:
        """See :class:`StateStore`."""
        return [_runtime(row) for row in self._query("SELECT * FROM runtimes ORDER BY runtime")]

    def runtime(self, runtime: str) -> RuntimeRecord | None:
        """See :class:`StateStore`."""
        rows = self._query("SELECT * FROM runtimes WHERE runtime = ?", (runtime,))
        return _runtime(rows[0]) if rows else None

    def forget_runtime(self, runtime: str) -> None:
        """See :class:`StateStore`."""
        with self._transaction() as db:
            db.execute("DELETE FROM runtimes WHERE runtime = ?", (runtime,))

    def record_access(self, runtime: str, access: str) -> None:
        """See :class:`StateStore`."""
        with self._transaction() as db:
            db.execute("UPDATE runtimes SET access = ? WHERE runtime = ?", (access, runtime))

    # -- commits ---------------------------------------------------------------------------------

    def put_commit(self, record: CommitRecord) -> None:
        """See :class:`StateStore`."""
        with self._transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO commits (commit_id, verdict, decided, message, detail, "
                "attempts) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    record.commit,
                    str(record.verdict),
                    _iso(record.decided),
                    record.message,
                    json.dumps(record.detail, sort_keys=True),
                    record.attempts,
                ),
            )

    def commit(self, commit: str) -> CommitRecord | None:
        """See :class:`StateStore`."""
        rows = self._query("SELECT * FROM commits WHERE commit_id = ?", (commit,))
        return _commit(rows[0]) if rows else None

    def last_accepted(self) -> CommitRecord | None:
        """See :class:`StateStore`."""
        rows = self._query(
            "SELECT * FROM commits WHERE verdict = ? ORDER BY decided DESC, rowid DESC LIMIT 1",
            (str(CommitVerdict.ACCEPTED),),
        )
        return _commit(rows[0]) if rows else None


def _runtime(row: sqlite3.Row) -> RuntimeRecord:
    updated = _parse(row["updated"])
    assert updated is not None
    return RuntimeRecord(
        row["runtime"],
        row["state"],
        row["reason"],
        row["message"],
        row["commit_id"],
        updated,
        json.loads(row["modules"]),
        row["access"],
    )


def _commit(row: sqlite3.Row) -> CommitRecord:
    decided = _parse(row["decided"])
    assert decided is not None
    return CommitRecord(
        row["commit_id"],
        CommitVerdict(row["verdict"]),
        decided,
        row["message"],
        json.loads(row["detail"]),
        row["attempts"],
    )


def _iso(moment: datetime | None) -> str | None:
    return moment.astimezone(UTC).isoformat() if moment is not None else None


def _parse(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None
