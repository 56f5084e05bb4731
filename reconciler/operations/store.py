"""The state store: operations, their stages and steps, and each runtime's last known state.

:class:`StateStore` is the small interface; :class:`SqliteStore` keeps it in one SQLite file
(standard library, WAL, a schema version and migrations from the first version). Claiming a
runtime for an operation (O3) happens in an immediate transaction, so two processes sharing the
file never run two operations of one runtime at once; an operation whose owner died (a process
on this host that no longer exists, or a lease that ran out) may be taken over and resumed.
Saving an operation writes its row and only the stage and step rows that changed since the store
last wrote or read it, guarded by a version of the operation's row that every write moves on
(:class:`SavedRows`, shared by both stores): a store that finds it moved by someone else (another
replica, a claim) refuses the save (:class:`~reconciler.errors.LostOwnershipError`), it never
writes the whole operation over the other's. Fencing (issue 23): every write of a daemon's run
carries a :class:`FenceToken` checked in the statement that writes (:data:`FENCE_GUARD`): the
member's epoch is still the token's and no other member fenced it (:meth:`StateStore.fence`,
schema v7), so a replica paused past its lease writes nothing once it was taken over.
:func:`open_store` opens the store a ``--state`` URL names: this one, or the PostgreSQL store of
:mod:`reconciler.operations.store_postgres` for several daemons sharing the work (O6).
Nothing secret is stored (S4). The typed values an operation carries (:class:`OperationData`:
the access, the plan, each pass's module statuses with their errors and changes) and each
runtime's module statuses are turned into JSON here, and only here, and read back into the same
types (rows written by earlier versions included). Callers: the engine, the runner, the CLI, the
daemon.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from reconciler.cluster.api import ClusterIdentity
from reconciler.core.brake import Limits
from reconciler.core.head import Head, head_text
from reconciler.core.model import ClusterAccess
from reconciler.core.objects import ObjectRef
from reconciler.core.plan import ModuleAction, PlannedModule
from reconciler.core.redaction import mask_url_password
from reconciler.core.status import (
    ChangeAction,
    ChangeSetEntry,
    ModuleError,
    ModuleState,
    ModuleStatus,
    PassResult,
    Reason,
    StepFailure,
)
from reconciler.errors import LostOwnershipError, NotFoundError, SourceError, StoreError
from reconciler.operations.model import (
    NO_CHANGE,
    CommitRecord,
    CommitVerdict,
    FenceToken,
    Member,
    Operation,
    OperationData,
    OperationState,
    OperationType,
    Retention,
    RuntimeRecord,
    RuntimeStatus,
    StageRecord,
    StepRecord,
    StepState,
    Suspension,
)

SCHEMA_VERSION = 7
#: The fence of a write (:class:`FenceToken`), in the statement that writes: no token (a
#: ``reconciler sync``, not a member), or the member's epoch is still the token's and was not
#: fenced by another member.
FENCE_GUARD = """(:fence_member IS NULL OR EXISTS (
    SELECT 1 FROM members WHERE name = :fence_member AND epoch = :fence_epoch
    AND fenced_epoch < epoch))"""
#: The whole operation, inserted or replacing the stored one if that one has the same owner
#: (a claim by another owner in between is never overwritten), under the fence.
_UPSERT_OPERATION = f"""
    INSERT INTO operations (id, runtime, type, state, created, updated, deadline, commit_id,
                            message, owner, lease_until, retrigger_of, data, version)
    SELECT :id, :runtime, :type, :state, :created, :updated, :deadline, :commit_id,
           :message, :owner, :lease_until, :retrigger_of, :data, 1
    WHERE {FENCE_GUARD}
    ON CONFLICT (id) DO UPDATE SET
        runtime = excluded.runtime, type = excluded.type, state = excluded.state,
        created = excluded.created, updated = excluded.updated, deadline = excluded.deadline,
        commit_id = excluded.commit_id, message = excluded.message, owner = excluded.owner,
        lease_until = excluded.lease_until, retrigger_of = excluded.retrigger_of,
        data = excluded.data, version = operations.version + 1
    WHERE operations.owner = excluded.owner
"""
#: The operation's row, if it is still at the version this store saw (see :class:`SavedRows`)
#: and its owner's, under the fence.
_UPDATE_SEEN_OPERATION = f"""
    UPDATE operations SET
        runtime = :runtime, type = :type, state = :state, created = :created,
        updated = :updated, deadline = :deadline, commit_id = :commit_id, message = :message,
        owner = :owner, lease_until = :lease_until, retrigger_of = :retrigger_of, data = :data,
        version = version + 1
    WHERE id = :id AND version = :seen AND owner = :owner AND {FENCE_GUARD}
"""  # noqa: S608 (FENCE_GUARD is a constant of this module, no input)
_UPSERT_STAGE = """
    INSERT INTO stages (operation_id, position, name, done, finished) VALUES (?, ?, ?, ?, ?)
    ON CONFLICT (operation_id, position) DO UPDATE SET
        name = excluded.name, done = excluded.done, finished = excluded.finished
"""
_UPSERT_STEP = """
    INSERT INTO steps (operation_id, stage_position, position, name, state, attempts,
                       first_started, started, finished, retry_at, message)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (operation_id, stage_position, position) DO UPDATE SET
        name = excluded.name, state = excluded.state, attempts = excluded.attempts,
        first_started = excluded.first_started, started = excluded.started,
        finished = excluded.finished, retry_at = excluded.retry_at, message = excluded.message
"""
#: Operations :meth:`StateStore.prune` removes first: one that succeeded and changed nothing
#: when the next of its runtime did too (a run of resyncs without drift is kept as its newest).
#: ``{p}`` is the dialect's placeholder, ``{order}`` its insertion order (ties of ``created``).
#: Parameters: :func:`merged_parameters`. Shared by both stores.
MERGED_OPERATIONS = """
    SELECT id FROM (
        SELECT id, state, message,
               LEAD(state) OVER (PARTITION BY runtime ORDER BY created, {order}) AS next_state,
               LEAD(message) OVER (PARTITION BY runtime ORDER BY created, {order}) AS next_message
        FROM operations
    ) paired
    WHERE state = {p} AND message = {p} AND next_state = {p} AND next_message = {p}
    LIMIT {p}
"""
#: Then the finished ones beyond the newest ``keep_per_runtime`` of their runtime, but for a
#: failure younger than ``keep_failures_for``. Parameters: :func:`expired_parameters`.
EXPIRED_OPERATIONS = """
    SELECT id FROM (
        SELECT id, state, created,
               ROW_NUMBER() OVER (PARTITION BY runtime ORDER BY created DESC, {order} DESC)
                   AS newer
        FROM operations
    ) ranked
    WHERE newer > {p} AND state IN ({p}, {p}) AND (state <> {p} OR created < {p})
    LIMIT {p}
"""
#: Operations removed per transaction, so that a first prune of a big store never holds the
#: write lock for long.
PRUNE_BATCH = 500


def merged_parameters() -> tuple[object, ...]:
    """The parameters of :data:`MERGED_OPERATIONS`."""
    done = str(OperationState.SUCCEEDED)
    return (done, NO_CHANGE, done, NO_CHANGE, PRUNE_BATCH)


def expired_parameters(retention: Retention, cutoff: object) -> tuple[object, ...]:
    """The parameters of :data:`EXPIRED_OPERATIONS`; ``cutoff``: the oldest failure kept, as
    the dialect stores a time."""
    done, failed = str(OperationState.SUCCEEDED), str(OperationState.FAILED)
    return (retention.keep_per_runtime, done, failed, failed, cutoff, PRUNE_BATCH)


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
    3: """
    CREATE TABLE suspensions (
        runtime TEXT PRIMARY KEY,
        since TEXT NOT NULL,
        reason TEXT NOT NULL DEFAULT ''
    );
    """,
    4: """
    CREATE TABLE members (
        name TEXT PRIMARY KEY,
        epoch INTEGER NOT NULL,
        heartbeat TEXT NOT NULL,
        started TEXT NOT NULL
    );
    """,
    5: """
    ALTER TABLE operations ADD COLUMN version INTEGER NOT NULL DEFAULT 0;
    """,
    6: """
    CREATE TABLE brake_limits (
        scope TEXT PRIMARY KEY,
        max_deletions INTEGER NOT NULL,
        allow INTEGER NOT NULL,
        recorded TEXT NOT NULL
    );
    """,
    7: """
    ALTER TABLE members ADD COLUMN fenced_epoch INTEGER NOT NULL DEFAULT 0;
    """,
}


#: The tables of the schema (and its version's).
TABLES = frozenset(
    {"schema_version"}
    | {name for sql in MIGRATIONS.values() for name in re.findall(r"CREATE TABLE (\w+)", sql)}
)


def _unusable(path: Path, error: sqlite3.DatabaseError) -> str:
    """One line: which file, what is wrong, what to do."""
    return (
        f"{path}: not a usable reconciler state store ({error}); restore it from a backup or "
        "move it away (a new one is created), check that the file and its folder are writable, "
        "or name another store with --state or RECONCILER_STATE"
    )


class StateStore(Protocol):
    """Where operations and runtime states live."""

    def save(self, operation: Operation, fence: FenceToken | None = None) -> None:
        """Insert or update an operation with its stages and steps, unless the stored one was
        written or claimed by someone else since this store last wrote or read it, or ``fence``
        no longer holds (:class:`~reconciler.errors.LostOwnershipError`, nothing written)."""

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
        fence: FenceToken | None = None,
    ) -> str | None:
        """Move the operation to in progress for ``owner`` unless another live owner holds an
        operation of the same runtime; returns that holder's description, else ``None``.
        :class:`~reconciler.errors.LostOwnershipError` when ``fence`` no longer holds."""

    def put_runtime(self, record: RuntimeRecord, fence: FenceToken | None = None) -> None:
        """Record a runtime's last known state (under ``fence``, as :meth:`save`)."""

    def runtimes(self) -> list[RuntimeRecord]:
        """Every runtime's last known state, by name."""

    def runtime_names(self) -> list[str]:
        """The names of the runtimes :meth:`runtimes` lists (a daemon asks at each reconcile)."""

    def deployed(self) -> dict[str, dict[str, str]]:
        """Runtime -> module -> version, as :meth:`RuntimeRecord.deployed` of each record says
        (what the deletion brake counts from; read without building the records)."""

    def runtime(self, runtime: str) -> RuntimeRecord | None:
        """One runtime's last known state."""

    def forget_runtime(self, runtime: str, fence: FenceToken | None = None) -> None:
        """Drop a deprovisioned runtime's record (under ``fence``, as :meth:`save`)."""

    def record_access(
        self, runtime: str, access: ClusterIdentity, fence: FenceToken | None = None
    ) -> None:
        """Remember where ``runtime`` was synced (see :attr:`RuntimeRecord.access`; under
        ``fence``, as :meth:`save`)."""

    def decide_commit(self, record: CommitRecord) -> CommitRecord:
        """Record a verdict on a commit other than ACCEPTED (READING, PENDING, REFUSED, HELD)
        unless one that may not be replaced stands (:func:`may_replace`); the record that
        stands. Replicas judging the same commit at once end with one verdict, the first one
        written."""

    def accept_commit(self, record: CommitRecord, expected: Head | None) -> CommitRecord | None:
        """Make ``record``'s commit (ACCEPTED) the one in force, if the one in force is still
        ``expected`` (``None``: none yet) and its verdict may become ACCEPTED; in one
        transaction (compare-and-set). The commit in force afterwards: a replica whose git is
        behind another's learns the newer one instead of moving the fleet back."""

    def commit(self, commit: Head) -> CommitRecord | None:
        """The verdict on ``commit``, if one was recorded."""

    def last_accepted(self) -> CommitRecord | None:
        """The commit accepted last (the one in force): the ACCEPTED record written last, in
        the store's own order of writes, not by its ``decided`` time (replicas' clocks differ).
        No pointer of its own is needed: every ACCEPTED record is written by
        :meth:`accept_commit`, one decision at a time, so the last one written is the one its
        compare-and-set left in force."""

    def limits_in_force(self) -> Limits | None:
        """The deletion brake's limits recorded by the last ``reconciler sync`` of the whole
        fleet that went ahead (:meth:`record_limits`); ``None`` before one."""

    def record_limits(self, limits: Limits, now: datetime) -> None:
        """Record the limits of a repo a sync of the whole fleet carried out: the next sync is
        judged by the stricter of these and its own (:func:`reconciler.core.brake.limits_for`)."""

    def prune(self, retention: Retention, now: datetime) -> int:
        """Remove the finished operations ``retention`` does not keep at ``now``, with their
        stages and steps; how many."""

    def suspend(self, suspension: Suspension) -> None:
        """Suspend a runtime (again: the reason and time are replaced)."""

    def resume(self, runtime: str) -> bool:
        """Lift a runtime's suspension; whether it was suspended."""

    def suspensions(self) -> dict[str, Suspension]:
        """Every suspended runtime's suspension, by runtime."""

    def heartbeat(self, name: str, now: datetime, lease: timedelta) -> Member:
        """Member ``name`` is alive at ``now``: a new member, or one whose last heartbeat is
        older than ``lease``, starts a new epoch (one more than its last)."""

    def members(self) -> list[Member]:
        """Every member that beat and did not leave, by name."""

    def fence(self, name: str, epoch: int, lapsed_before: datetime) -> bool:
        """Fence member ``name`` at ``epoch`` if its last heartbeat is still older than
        ``lapsed_before`` (its lease lapsed): from then on no write carrying a token of that
        epoch is accepted, and its next heartbeat starts a new epoch. Whether it was fenced
        now. A member calls this before it takes another's runtimes over."""

    def leave(self, name: str) -> None:
        """Member ``name`` stops (its runtimes go to the others at once)."""


def load_statuses(
    store: StateStore,
    runtimes: Sequence[str] = (),
    *,
    git_suspended: Mapping[str, bool] | None = None,
) -> list[RuntimeStatus]:
    """Every runtime's status now (or those named), by :meth:`RuntimeStatus.of`: its last
    finished record seen through its unfinished operation, if one is under way, and its
    suspension (one read per runtime: linear in the fleet). ``git_suspended``: runtime ->
    ``spec.suspend`` where the caller read git (else the records say)."""
    wanted = set(runtimes)
    suspended = store.suspensions()
    in_git = git_suspended or {}
    return [
        RuntimeStatus.of(
            record,
            store.unfinished(record.runtime),
            suspended.get(record.runtime),
            git_suspended=in_git.get(record.runtime),
        )
        for record in store.runtimes()
        if not wanted or record.runtime in wanted
    ]


def load_status(
    store: StateStore, runtime: str, *, git_suspended: bool | None = None
) -> RuntimeStatus | None:
    """One runtime's status now, as :func:`load_statuses` (``None``: the store has none)."""
    record = store.runtime(runtime)
    if record is None:
        return None
    suspension = store.suspensions().get(runtime)
    unfinished = store.unfinished(runtime)
    return RuntimeStatus.of(record, unfinished, suspension, git_suspended=git_suspended)


def default_state_url() -> str:
    """``sqlite:///`` a file under the user's state directory (XDG_STATE_HOME)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return f"sqlite:///{Path(base) / 'reconciler' / 'state.db'}"


def open_store(url: str) -> StateStore:
    """The store a ``--state`` URL names: ``sqlite:///path/to/state.db``, or
    ``postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE`` (also ``postgres://``)."""
    if url.startswith(("postgresql://", "postgres://")):
        from reconciler.operations.store_postgres import PostgresStore  # psycopg only if used

        return PostgresStore(url)
    prefix = "sqlite:///"
    if not url.startswith(prefix):
        raise SourceError(
            f"--state {mask_url_password(url)}: use sqlite:///PATH or "
            "postgresql://USER@HOST[:PORT]/DATABASE"
        )
    return SqliteStore(Path(os.path.expanduser(url[len(prefix) :])))


def open_existing_store(url: str) -> StateStore | None:
    """:func:`open_store` for commands that only read: ``None`` for a SQLite file that does not
    exist (nothing was recorded there), instead of creating it."""
    prefix = "sqlite:///"
    if url.startswith(prefix) and not Path(os.path.expanduser(url[len(prefix) :])).exists():
        return None
    return open_store(url)


def open_store_to_read(url: str) -> StateStore:
    """:func:`open_store` for plans that change nothing (``diff``, ``sync --dry-run``): where
    the SQLite file does not exist, an empty store in memory, so that a read creates no file
    (nor its folder) and plans as a new store would."""
    found = open_existing_store(url)
    return found if found is not None else SqliteStore(Path(":memory:"))


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
        self._saved = SavedRows()
        self._db.row_factory = sqlite3.Row
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            # a commit is kept across a process crash without an fsync; only a power loss may
            # take back the last commits (never corrupt): every step is safe to run again (O4)
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._migrate()
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
        with self._translated():
            rows = self._query("PRAGMA quick_check")
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
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock, self._translated():  # one connection, shared by the worker threads
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                if self._db.in_transaction:
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
        with self._lock, self._translated():
            return self._db.execute(sql, parameters).fetchall()

    def schema_version(self) -> int:
        """The schema version of the file."""
        row = self._db.execute("SELECT max(version) AS v FROM schema_version").fetchone()
        return int(row["v"])

    # -- operations ------------------------------------------------------------------------------

    def save(self, operation: Operation, fence: FenceToken | None = None) -> None:
        """See :class:`StateStore`: only the rows that changed since this store last wrote or
        read the operation, while nobody else wrote it in between (:class:`SavedRows`); all of
        them when this store knows nothing of it. Refused when someone else wrote it since, or
        ``fence`` no longer holds: nothing is written."""
        rows = OperationRows.of(operation)
        values = {**self._operation_values(operation), **fence_values(fence)}
        with self._lock:
            seen = self._saved.seen(operation.id)
            try:
                with self._transaction() as db:
                    if seen is not None:
                        version = self._save_changes(db, operation, rows, seen, values)
                    else:
                        version = self._save_all(db, operation, rows, values)
            except BaseException:
                self._saved.forget(operation.id)
                raise
            if version is None:
                self._saved.forget(operation.id)
                raise refused(operation, fence)
            self._saved.remember(operation, version, rows)

    def _save_changes(
        self,
        db: sqlite3.Connection,
        operation: Operation,
        rows: OperationRows,
        seen: tuple[int, OperationRows],
        values: dict[str, object],
    ) -> int | None:
        """Write the operation's row and its changed rows if its row is still at the version
        ``seen``, its owner's, under the fence; the new version, or ``None`` (nothing
        written)."""
        version, before = seen
        if db.execute(_UPDATE_SEEN_OPERATION, {**values, "seen": version}).rowcount == 0:
            return None
        self._write_rows(db, operation.id, rows.changes(before))
        return version + 1

    def _save_all(
        self,
        db: sqlite3.Connection,
        operation: Operation,
        rows: OperationRows,
        values: dict[str, object],
    ) -> int | None:
        """Write the operation with all its rows (replacing what was stored of it if that has
        the same owner), under the fence; the new version of its row, or ``None`` (nothing
        written)."""
        if db.execute(_UPSERT_OPERATION, values).rowcount == 0:
            return None
        db.execute("DELETE FROM steps WHERE operation_id = ?", (operation.id,))
        db.execute("DELETE FROM stages WHERE operation_id = ?", (operation.id,))
        self._write_rows(db, operation.id, rows.everything())
        return self._version_in(db, operation.id)

    @staticmethod
    def _version_in(db: sqlite3.Connection, operation_id: str) -> int:
        row = db.execute("SELECT version FROM operations WHERE id = ?", (operation_id,)).fetchone()
        return int(row["version"])

    @staticmethod
    def _operation_values(operation: Operation) -> dict[str, object]:
        """The operation's own row, by column."""
        return {
            "id": operation.id,
            "runtime": operation.runtime,
            "type": str(operation.type),
            "state": str(operation.state),
            "created": _iso(operation.created),
            "updated": _iso(operation.updated),
            "deadline": _iso(operation.deadline),
            "commit_id": head_text(operation.commit),
            "message": operation.message,
            "owner": operation.owner,
            "lease_until": _iso(operation.lease_until),
            "retrigger_of": operation.retrigger_of,
            "data": data_text(operation),
        }

    @staticmethod
    def _write_rows(db: sqlite3.Connection, operation_id: str, changes: RowChanges) -> None:
        """Delete the stage and step rows gone, upsert those new or different."""
        db.executemany(
            "DELETE FROM steps WHERE operation_id = ? AND stage_position = ? AND position = ?",
            [(operation_id, *key) for key in changes.gone_steps],
        )
        db.executemany(
            "DELETE FROM stages WHERE operation_id = ? AND position = ?",
            [(operation_id, key) for key in changes.gone_stages],
        )
        db.executemany(
            _UPSERT_STAGE,
            [
                (operation_id, key, name, int(done), _iso(finished))
                for key, (name, done, finished) in changes.stages
            ],
        )
        db.executemany(
            _UPSERT_STEP,
            [
                (operation_id, *key, name, state, attempts, *(_iso(t) for t in times), message)
                for key, (name, state, attempts, *times, message) in changes.steps
            ],
        )

    def get(self, operation_id: str) -> Operation | None:
        """See :class:`StateStore`."""
        rows = self._query(  # a prefix compared as text: % and _ are no wildcards here
            "SELECT * FROM operations WHERE substr(id, 1, ?) = ? ORDER BY created LIMIT 2",
            (len(operation_id), operation_id.lower()),  # ids are lower-case hex
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
        fence: FenceToken | None = None,
    ) -> str | None:
        """See :class:`StateStore`. The claim moves the operation's version on
        (:class:`SavedRows`), remembered once it is committed."""
        with self._lock:
            outcome = self._claim(operation_id, owner, now, lease_until, alive, fence)
            if isinstance(outcome, str):
                return outcome
            self._saved.claimed(operation_id, outcome)
        return None

    def _claim(
        self,
        operation_id: str,
        owner: str,
        now: datetime,
        lease_until: datetime,
        alive: Callable[[str], bool],
        fence: FenceToken | None,
    ) -> str | int:
        """:meth:`claim` in one transaction: the live holder's description, or the version of
        the operation's row claimed."""
        with self._transaction() as db:
            row = db.execute(
                "SELECT runtime FROM operations WHERE id = ?", (operation_id,)
            ).fetchone()
            if row is None:
                raise NotFoundError(f"no operation {operation_id} in the state store")
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
            claimed = db.execute(
                "UPDATE operations SET state = :state, owner = :owner, lease_until = :lease, "  # noqa: S608 (a constant)
                f"updated = :now, version = version + 1 WHERE id = :id AND {FENCE_GUARD}",
                {
                    "state": str(OperationState.IN_PROGRESS),
                    "owner": owner,
                    "lease": _iso(lease_until),
                    "now": _iso(now),
                    "id": operation_id,
                    **fence_values(fence),
                },
            )
            if claimed.rowcount == 0:
                raise LostOwnershipError(f"operation {operation_id} not claimed: {fenced(fence)}")
            return self._version_in(db, operation_id)

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
        operation = Operation(
            id=row["id"],
            runtime=row["runtime"],
            type=OperationType(row["type"]),
            state=OperationState(row["state"]),
            created=created,
            deadline=deadline,
            stages=stages,
            commit=Head.parse(row["commit_id"]),
            message=row["message"],
            updated=_parse(row["updated"]),
            owner=row["owner"],
            lease_until=_parse(row["lease_until"]),
            retrigger_of=row["retrigger_of"],
            data=decode_data(row["data"]),
        )
        # the row was read first: rows read later at a newer version fail the check at the
        # next save (versions only grow), they are never taken for the version read
        self._saved.loaded(operation, int(row["version"]))
        return operation

    # -- runtimes --------------------------------------------------------------------------------

    def put_runtime(self, record: RuntimeRecord, fence: FenceToken | None = None) -> None:
        """See :class:`StateStore`."""
        with self._transaction() as db:
            written = db.execute(
                "INSERT INTO runtimes (runtime, state, reason, message, commit_id, updated, "
                "modules, access) SELECT :runtime, :state, :reason, :message, :commit_id, "
                f":updated, :modules, :access WHERE {FENCE_GUARD} "
                "ON CONFLICT (runtime) DO UPDATE SET state = excluded.state, "
                "reason = excluded.reason, message = excluded.message, "
                "commit_id = excluded.commit_id, updated = excluded.updated, "
                "modules = excluded.modules, "
                "access = CASE WHEN excluded.access != '' THEN excluded.access ELSE access END",
                {
                    "runtime": record.runtime,
                    "state": str(record.state),
                    "reason": record.reason,
                    "message": record.message,
                    "commit_id": head_text(record.commit),
                    "updated": _iso(record.updated),
                    "modules": encode_modules(record.modules),
                    "access": record.access.describe(),
                    **fence_values(fence),
                },
            )
            if written.rowcount == 0:
                raise LostOwnershipError(f"runtime {record.runtime} not recorded: {fenced(fence)}")

    def runtimes(self) -> list[RuntimeRecord]:
        """See :class:`StateStore`."""
        return [_runtime(row) for row in self._query("SELECT * FROM runtimes ORDER BY runtime")]

    def runtime_names(self) -> list[str]:
        """See :class:`StateStore`."""
        return [r["runtime"] for r in self._query("SELECT runtime FROM runtimes ORDER BY runtime")]

    def deployed(self) -> dict[str, dict[str, str]]:
        """See :class:`StateStore`."""
        rows = self._query("SELECT runtime, modules FROM runtimes ORDER BY runtime")
        return {row["runtime"]: deployed_of(row["modules"]) for row in rows}

    def runtime(self, runtime: str) -> RuntimeRecord | None:
        """See :class:`StateStore`."""
        rows = self._query("SELECT * FROM runtimes WHERE runtime = ?", (runtime,))
        return _runtime(rows[0]) if rows else None

    def forget_runtime(self, runtime: str, fence: FenceToken | None = None) -> None:
        """See :class:`StateStore`."""
        with self._transaction() as db:
            self._guarded(
                db,
                f"DELETE FROM runtimes WHERE runtime = :runtime AND {FENCE_GUARD}",  # noqa: S608 (a constant)
                {"runtime": runtime},
                fence,
            )

    def record_access(
        self, runtime: str, access: ClusterIdentity, fence: FenceToken | None = None
    ) -> None:
        """See :class:`StateStore`."""
        with self._transaction() as db:
            self._guarded(
                db,
                f"UPDATE runtimes SET access = :access WHERE runtime = :runtime AND {FENCE_GUARD}",  # noqa: S608 (a constant)
                {"runtime": runtime, "access": access.describe()},
                fence,
            )

    @staticmethod
    def _guarded(
        db: sqlite3.Connection, sql: str, values: dict[str, object], fence: FenceToken | None
    ) -> None:
        """Run ``sql``, a write guarded by :data:`FENCE_GUARD`; when it wrote no row, tell a
        refusal (the fence) from nothing to write (no such runtime), in this transaction."""
        parameters = {**values, **fence_values(fence)}
        if db.execute(sql, parameters).rowcount > 0 or fence is None:
            return
        if db.execute(f"SELECT {FENCE_GUARD} AS ok", fence_values(fence)).fetchone()["ok"]:
            return
        raise LostOwnershipError(f"runtime {values['runtime']} not written: {fenced(fence)}")

    # -- commits ---------------------------------------------------------------------------------

    def decide_commit(self, record: CommitRecord) -> CommitRecord:
        """See :class:`StateStore`."""
        with self._transaction() as db:
            standing = self._commit_in(db, record.commit)
            current = self._last_accepted_in(db)
            in_force = current.commit if current is not None else None
            if standing is not None and not may_replace(standing, record, in_force):
                return standing
            self._write_commit(db, record)
            return record

    def accept_commit(self, record: CommitRecord, expected: Head | None) -> CommitRecord | None:
        """See :class:`StateStore`."""
        with self._transaction() as db:
            current = self._last_accepted_in(db)
            standing = self._commit_in(db, record.commit)
            moved = (current.commit if current else None) == expected
            if not moved or (standing is not None and not may_replace(standing, record)):
                return current
            self._write_commit(db, record)
            return record

    @staticmethod
    def _commit_in(db: sqlite3.Connection, commit: Head) -> CommitRecord | None:
        row = db.execute("SELECT * FROM commits WHERE commit_id = ?", (commit.text,)).fetchone()
        return _commit(row) if row is not None else None

    @staticmethod
    def _last_accepted_in(db: sqlite3.Connection) -> CommitRecord | None:
        row = db.execute(
            # a new row's rowid is one more than the largest (no AUTOINCREMENT needed)
            "SELECT * FROM commits WHERE verdict = ? ORDER BY rowid DESC LIMIT 1",
            (str(CommitVerdict.ACCEPTED),),
        ).fetchone()
        return _commit(row) if row is not None else None

    @staticmethod
    def _write_commit(db: sqlite3.Connection, record: CommitRecord) -> None:
        """The verdict, as the newest row (the last ACCEPTED row written is the one in force)."""
        db.execute("DELETE FROM commits WHERE commit_id = ?", (record.commit.text,))
        db.execute(
            "INSERT INTO commits (commit_id, verdict, decided, message, detail, attempts) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (
                record.commit.text,
                str(record.verdict),
                _iso(record.decided),
                record.message,
                json.dumps(record.detail, sort_keys=True),
                record.attempts,
            ),
        )

    def commit(self, commit: Head) -> CommitRecord | None:
        """See :class:`StateStore`."""
        rows = self._query("SELECT * FROM commits WHERE commit_id = ?", (commit.text,))
        return _commit(rows[0]) if rows else None

    def last_accepted(self) -> CommitRecord | None:
        """See :class:`StateStore`."""
        with self._lock, self._translated():
            return self._last_accepted_in(self._db)

    def limits_in_force(self) -> Limits | None:
        """See :class:`StateStore`."""
        rows = self._query("SELECT * FROM brake_limits WHERE scope = ?", (LIMITS_SCOPE,))
        return limits_of(rows[0]) if rows else None

    def record_limits(self, limits: Limits, now: datetime) -> None:
        """See :class:`StateStore`."""
        with self._transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO brake_limits (scope, max_deletions, allow, recorded) "
                "VALUES (?, ?, ?, ?)",
                (LIMITS_SCOPE, limits.max_deletions, int(limits.allow), _iso(now)),
            )

    def prune(self, retention: Retention, now: datetime) -> int:
        """See :class:`StateStore`: in batches of :data:`PRUNE_BATCH`, one transaction each."""
        cutoff = _iso(now - retention.keep_failures_for)
        removed = 0
        for sql, parameters in (
            (MERGED_OPERATIONS, merged_parameters()),
            (EXPIRED_OPERATIONS, expired_parameters(retention, cutoff)),
        ):
            while batch := self._remove(sql.format(p="?", order="rowid"), parameters):
                removed += batch
        return removed

    def _remove(self, sql: str, parameters: tuple[object, ...]) -> int:
        """Remove the operations ``sql`` selects, with their stages and steps; how many."""
        with self._lock:
            with self._transaction() as db:
                ids = [(row["id"],) for row in db.execute(sql, parameters)]
                db.executemany("DELETE FROM steps WHERE operation_id = ?", ids)
                db.executemany("DELETE FROM stages WHERE operation_id = ?", ids)
                db.executemany("DELETE FROM operations WHERE id = ?", ids)
            for (operation_id,) in ids:
                self._saved.forget(operation_id)
        return len(ids)

    def suspend(self, suspension: Suspension) -> None:
        """See :class:`StateStore`."""
        with self._transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO suspensions (runtime, since, reason) VALUES (?, ?, ?)",
                (suspension.runtime, _iso(suspension.since), suspension.reason),
            )

    def resume(self, runtime: str) -> bool:
        """See :class:`StateStore`."""
        with self._transaction() as db:
            return db.execute("DELETE FROM suspensions WHERE runtime = ?", (runtime,)).rowcount > 0

    def suspensions(self) -> dict[str, Suspension]:
        """See :class:`StateStore`."""
        rows = self._query("SELECT * FROM suspensions ORDER BY runtime")
        return {
            r["runtime"]: Suspension(r["runtime"], _since(r["since"]), r["reason"]) for r in rows
        }

    def heartbeat(self, name: str, now: datetime, lease: timedelta) -> Member:
        """See :class:`StateStore`."""
        with self._transaction() as db:
            row = db.execute("SELECT * FROM members WHERE name = ?", (name,)).fetchone()
            member = next_beat(_member(row) if row is not None else None, name, now, lease)
            db.execute(
                "INSERT OR REPLACE INTO members (name, epoch, heartbeat, started, fenced_epoch) "
                "VALUES (?, ?, ?, ?, ?)",
                (
                    *(name, member.epoch, _iso(member.heartbeat), _iso(member.started)),
                    member.fenced_epoch,
                ),
            )
        return member

    def fence(self, name: str, epoch: int, lapsed_before: datetime) -> bool:
        """See :class:`StateStore`."""
        with self._transaction() as db:
            cursor = db.execute(
                "UPDATE members SET fenced_epoch = epoch WHERE name = ? AND epoch = ? "
                "AND heartbeat < ? AND fenced_epoch < epoch",
                (name, epoch, _iso(lapsed_before)),
            )
            return cursor.rowcount > 0

    def members(self) -> list[Member]:
        """See :class:`StateStore`."""
        return [_member(r) for r in self._query("SELECT * FROM members ORDER BY name")]

    def leave(self, name: str) -> None:
        """See :class:`StateStore`."""
        with self._transaction() as db:
            db.execute("DELETE FROM members WHERE name = ?", (name,))


#: In an ACCEPTED record's detail: the ``--allow-deletions`` that let a held commit through.
ALLOWED_DELETIONS = "allowedDeletions"
#: The row of ``brake_limits`` that ``reconciler sync`` keeps.
LIMITS_SCOPE = "sync"


def limits_of(row: Any) -> Limits:
    """The limits of a ``brake_limits`` row (either store's)."""
    return Limits(int(row["max_deletions"]), bool(row["allow"]))


def may_replace(
    standing: CommitRecord | None, new: CommitRecord, in_force: Head | None = None
) -> bool:
    """Whether ``new`` may replace ``standing``, the verdict recorded on the same commit: a
    verdict is decided once. READING (a daemon reading it) and PENDING (its reading failed in a
    way that may pass) give way to anything; HELD to ACCEPTED only when ``--allow-deletions``
    named it (the record says so under :data:`ALLOWED_DELETIONS`); ACCEPTED to ACCEPTED (in
    force again after a revert), and to HELD when it is no longer ``in_force`` (a force-push
    back to it is judged again, from the commit in force)."""
    if standing is None or standing.verdict in (CommitVerdict.READING, CommitVerdict.PENDING):
        return True
    if new.verdict is CommitVerdict.ACCEPTED and standing.verdict is CommitVerdict.HELD:
        return bool(new.detail.get(ALLOWED_DELETIONS))  # not a replica that judged without
    accepted = CommitVerdict.ACCEPTED
    if new.verdict is CommitVerdict.HELD and standing.verdict is accepted:
        return standing.commit != in_force
    return new.verdict is accepted and standing.verdict is accepted


def next_beat(last: Member | None, name: str, now: datetime, lease: timedelta) -> Member:
    """Member ``name`` after a heartbeat at ``now``: the same epoch while its lease held and
    nobody fenced it, the next one after a lapse or a fence (or the first)."""
    if last is None:
        return Member(name, 1, now, now)
    if last.live(now, lease) and not last.fenced:
        return Member(name, last.epoch, now, last.started, last.fenced_epoch)
    return Member(name, last.epoch + 1, now, now, last.fenced_epoch)


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


def _member(row: Any) -> Member:
    heartbeat, started = _since(row["heartbeat"]), _since(row["started"])
    return Member(row["name"], int(row["epoch"]), heartbeat, started, int(row["fenced_epoch"]))


#: A stage's row as values: name, done, finished (in UTC).
StageRow = tuple[str, bool, datetime | None]
#: A step's row as values: name, state, attempts, first started, started, finished, retry at
#: (times in UTC) and message.
StepRow = tuple[
    str, str, int, datetime | None, datetime | None, datetime | None, datetime | None, str
]


@dataclass(frozen=True, slots=True)
class RowChanges:
    """The stage and step rows a save writes (new or different, by key) and the keys of those
    it deletes."""

    stages: list[tuple[int, StageRow]]
    steps: list[tuple[tuple[int, int], StepRow]]
    gone_stages: list[int]
    gone_steps: list[tuple[int, int]]


@dataclass(frozen=True, slots=True)
class OperationRows:
    """An operation's stage and step rows as values, by key (a stage's position; a step's stage
    position and position): what a store keeps of it besides the operation's own row."""

    stages: dict[int, StageRow]
    steps: dict[tuple[int, int], StepRow]

    @classmethod
    def of(cls, operation: Operation) -> OperationRows:
        """The rows of ``operation`` as it is now."""
        stages = {
            index: (stage.name, stage.done, _utc(stage.finished))
            for index, stage in enumerate(operation.stages)
        }
        steps = {
            (index, position): (
                *(step.name, str(step.state), step.attempts, _utc(step.first_started)),
                *(_utc(step.started), _utc(step.finished), _utc(step.retry_at), step.message),
            )
            for index, stage in enumerate(operation.stages)
            for position, step in enumerate(stage.steps)
        }
        return cls(stages, steps)

    def changes(self, since: OperationRows) -> RowChanges:
        """What turns the rows ``since`` into these: the rows new or different, the keys gone."""
        return RowChanges(
            [(key, row) for key, row in self.stages.items() if since.stages.get(key) != row],
            [(key, row) for key, row in self.steps.items() if since.steps.get(key) != row],
            [key for key in since.stages if key not in self.stages],
            [key for key in since.steps if key not in self.steps],
        )

    def everything(self) -> RowChanges:
        """Every row, as a save that knows nothing of the rows stored writes them."""
        return RowChanges(list(self.stages.items()), list(self.steps.items()), [], [])


#: How many unfinished operations a store remembers the rows of (a daemon runs one per runtime).
SAVED_LIMIT = 1000


class SavedRows:
    """What one store object last wrote or read of each unfinished operation: the version its
    row had then, and its stage and step rows (:class:`OperationRows`).

    A save writes the operation's row only if it is still at that version (optimistic
    concurrency; every write of an operation, a claim too, moves the version on), and then only
    the stage and step rows that differ. When another process or store object wrote in between,
    the version differs and the store writes the whole operation instead. Finished operations
    are forgotten, and the least recently used beyond ``limit``. Thread-safe: a daemon's worker
    threads share a store."""

    def __init__(self, limit: int = SAVED_LIMIT) -> None:
        self._limit = limit
        self._known: OrderedDict[str, tuple[int, OperationRows]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """How many operations are remembered."""
        return len(self._known)

    def seen(self, operation_id: str) -> tuple[int, OperationRows] | None:
        """The version and rows last written or read of the operation, if remembered."""
        with self._lock:
            return self._known.get(operation_id)

    def remember(self, operation: Operation, version: int, rows: OperationRows) -> None:
        """The store wrote or read ``rows`` of ``operation`` with its row at ``version``."""
        with self._lock:
            if operation.finished:
                self._known.pop(operation.id, None)
                return
            self._known[operation.id] = (version, rows)
            self._known.move_to_end(operation.id)
            while len(self._known) > self._limit:
                self._known.popitem(last=False)

    def claimed(self, operation_id: str, version: int) -> None:
        """This store's claim moved the operation's row to ``version`` (its stages and steps
        untouched): still remembered if the store knew the version before it."""
        with self._lock:
            known = self._known.get(operation_id)
            if known is not None and known[0] == version - 1:
                self._known[operation_id] = (version, known[1])
            else:
                self._known.pop(operation_id, None)

    def loaded(self, operation: Operation, version: int) -> None:
        """The store read ``operation`` with its row at ``version`` (a finished one is not kept:
        its rows are not worked out). Never back: when this store wrote or claimed a newer
        version while the read ran (a worker's save between a ``/status`` read of the row and
        this call), what it wrote stands, or its next save would be refused as another's."""
        if operation.finished:
            self.forget(operation.id)
            return
        rows = OperationRows.of(operation)
        with self._lock:
            known = self._known.get(operation.id)
            if known is not None and known[0] > version:
                return
        self.remember(operation, version, rows)

    def forget(self, operation_id: str) -> None:
        """Nothing is known of the operation (a save that may or may not have been written)."""
        with self._lock:
            self._known.pop(operation_id, None)


class _DataTexts:
    """:func:`encode_data` of each unfinished operation's data, kept while the data is the same
    object (:class:`OperationData` is frozen; steps replace it): the engine saves an operation
    after every step, and its data changes at few of them."""

    def __init__(self) -> None:
        self._texts: dict[str, tuple[OperationData, str]] = {}

    def of(self, operation: Operation) -> str:
        """The JSON text of ``operation``'s data."""
        kept = self._texts.get(operation.id)
        data = operation.data
        text = kept[1] if kept is not None and kept[0] is data else encode_data(data)
        if operation.finished:
            self._texts.pop(operation.id, None)
        else:
            self._texts[operation.id] = (data, text)
        return text


#: Shared by the stores of a process (an operation is saved to one store).
data_text = _DataTexts().of


def encode_data(data: OperationData) -> str:
    """An operation's typed data as the JSON text every store keeps."""
    return json.dumps(_data_json(data), sort_keys=True)


def decode_data(text: str) -> OperationData:
    """Inverse of :func:`encode_data` (rows written by earlier versions included)."""
    return _data_from_json(json.loads(text))


def deployed_of(modules: str) -> dict[str, str]:
    """:meth:`RuntimeRecord.deployed` of a record whose modules are the JSON text ``modules``
    (:func:`encode_modules`), without building the statuses."""
    unmanaged = str(ModuleState.UNMANAGED)
    return {
        m["module"]: m.get("version") or ""
        for m in json.loads(modules)
        if m.get("state") and m["state"] != unmanaged
    }


def encode_modules(modules: tuple[ModuleStatus, ...]) -> str:
    """A runtime's module statuses as the JSON text every store keeps."""
    return json.dumps([_status_json(m) for m in modules], sort_keys=True)


def decode_modules(text: str) -> tuple[ModuleStatus, ...]:
    """Inverse of :func:`encode_modules`."""
    return tuple(_status_from_json(m) for m in json.loads(text))


def _runtime(row: sqlite3.Row) -> RuntimeRecord:
    updated = _parse(row["updated"])
    assert updated is not None
    return RuntimeRecord(
        row["runtime"],
        ModuleState(row["state"]),
        row["reason"],
        row["message"],
        Head.parse(row["commit_id"]),
        updated,
        decode_modules(row["modules"]),
        ClusterIdentity.parse(row["access"]),
    )


def _commit(row: sqlite3.Row) -> CommitRecord:
    decided = _parse(row["decided"])
    head = Head.parse(row["commit_id"])
    assert decided is not None
    assert head is not None
    return CommitRecord(
        head,
        CommitVerdict(row["verdict"]),
        decided,
        row["message"],
        json.loads(row["detail"]),
        row["attempts"],
    )


def _iso(moment: datetime | None) -> str | None:
    return moment.astimezone(UTC).isoformat() if moment is not None else None


def _utc(moment: datetime | None) -> datetime | None:
    return moment.astimezone(UTC) if moment is not None else None


def _since(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _parse(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


# -- the JSON of typed values, kept in the data columns -----------------------------------------


def _data_json(data: OperationData) -> dict[str, Any]:
    document: dict[str, Any] = {
        "plan": [p.to_json() for p in data.plan],
        "applied": _pass_json(data.applied),
        "removals": _pass_json(data.removals),
    }
    if data.access is not None:
        document["cluster"] = asdict(data.access)
    if data.blocking:
        document["blocking"] = data.blocking
    if data.inventories_left:
        document["inventoriesLeft"] = list(data.inventories_left)
    if data.failure is not None:
        document["failure"] = _failure_json(data.failure)
    return document


def _failure_json(failure: StepFailure) -> dict[str, Any]:
    return {
        "step": failure.step,
        "reason": str(failure.reason),
        **_error_json(failure.error),
    }


def _failure_from_json(document: dict[str, Any] | None) -> StepFailure | None:
    if not isinstance(document, dict):
        return None
    try:
        reason = Reason(str(document.get("reason")))
    except ValueError:
        reason = Reason.STEP_FAILED  # a code of a newer version, read by an older one
    return StepFailure(str(document.get("step", "")), reason, _error_from_json(document))


def _error_json(error: ModuleError) -> dict[str, Any]:
    return {
        "cause": error.cause.__name__,
        "permanent": error.permanent,
        "message": error.message,
        "retryAfter": error.retry_after,
    }


def _error_from_json(document: dict[str, Any]) -> ModuleError:
    cause = ModuleError.cause_named(str(document.get("cause", "")), bool(document["permanent"]))
    return ModuleError(cause, str(document.get("message", "")), document.get("retryAfter"))


def _data_from_json(document: dict[str, Any]) -> OperationData:
    """An operation's data; rows of the first versions kept ``modules`` and ``removals`` as
    lists of statuses and the plan's versions as ``from``/``to``."""
    applied = document.get("applied", {"modules": document.get("modules", [])})
    removals = document.get("removals", [])
    cluster = document.get("cluster")
    return OperationData(
        access=ClusterAccess(**cluster) if cluster is not None else None,
        plan=tuple(_planned_from_json(p) for p in document.get("plan", [])),
        applied=_pass_from_json(applied),
        removals=_pass_from_json(removals if isinstance(removals, dict) else {"modules": removals}),
        blocking=str(document.get("blocking", "")),
        inventories_left=tuple(document.get("inventoriesLeft", ())),
        failure=_failure_from_json(document.get("failure")),
    )


def _planned_from_json(entry: dict[str, Any]) -> PlannedModule:
    return PlannedModule(
        entry["module"],
        ModuleAction(entry["action"]),
        entry["reason"],
        entry.get("fromVersion", entry.get("from")),
        entry.get("toVersion", entry.get("to")),
    )


def _pass_json(result: PassResult) -> dict[str, Any]:
    return {
        "modules": [_status_json(m) for m in result.modules],
        "changes": [
            {"module": c.module, "action": str(c.action), **c.ref.to_json()} for c in result.changes
        ],
    }


def _pass_from_json(document: dict[str, Any]) -> PassResult:
    changes = tuple(
        ChangeSetEntry(c["module"], ObjectRef.from_json(c), ChangeAction(c["action"]))
        for c in document.get("changes", [])
    )
    return PassResult(tuple(_status_from_json(m) for m in document["modules"]), changes)


def _status_json(status: ModuleStatus) -> dict[str, Any]:
    document = status.to_json()
    if status.error is not None:
        document["error"] = _error_json(status.error)
    return document


def _status_from_json(document: dict[str, Any]) -> ModuleStatus:
    """A module's status; one stored before errors were kept reads its reason: ``Failed`` was
    a permanent error, ``Retrying`` a transient one (its delay unknown: none)."""
    state = ModuleState(document["state"]) if document.get("state") else None
    error = document.get("error")
    kept = None
    if error is not None:
        kept = _error_from_json(error)
    elif state is ModuleState.ERROR:
        permanent = document.get("reason") == Reason.FAILED.value
        kept = ModuleError(ModuleError.cause_named("", permanent), document.get("message", ""))
    return ModuleStatus(
        document["module"],
        state,
        document.get("reason") or "",
        document.get("message") or "",
        document.get("version"),
        kept,
    )
