"""The state store in PostgreSQL, for several daemons sharing the work (DESIGN.md O6).

:class:`PostgresStore` implements :class:`~reconciler.operations.store.StateStore` on the same
logical tables and schema versions as the SQLite store; times are ``timestamptz`` (read back in
UTC), JSON is kept as text as SQLite keeps it, and a ``seq`` column stands for SQLite's rowid
(insertion order breaks ties). Migrations run in one transaction under an advisory lock, so
daemons starting together migrate once. Claiming a runtime (O3) is one transaction holding a
transaction-scoped advisory lock on the runtime's name: two daemons on different hosts never both
move an operation of one runtime to in progress. Saving an operation is one statement, one round
trip: its row and the stage and step rows that changed (see
:class:`~reconciler.operations.store.SavedRows`), guarded in that statement by the version, the
owner and the writer's fence (:class:`~reconciler.operations.model.FenceToken`); a save the
guard refuses writes nothing and raises :class:`~reconciler.errors.LostOwnershipError`.

The URL is libpq's (``postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?PARAM=VALUE...]``); the
password comes from it, from a PGPASSFILE (or ``~/.pgpass``) or from PGPASSWORD, by libpq's own
rules, and is never shown: every message names the URL with its password masked. A lost
connection is a :class:`~reconciler.errors.StoreError` (transient) and the next call connects
again. The only importer of psycopg. Caller: :func:`reconciler.operations.store.open_store`.
"""

from __future__ import annotations

import json
import os
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import unquote

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import DictRow, dict_row

from reconciler.cluster.api import ClusterIdentity
from reconciler.core.brake import Limits
from reconciler.core.head import Head, head_text
from reconciler.core.redaction import MASK, mask_url_password, url_passwords
from reconciler.core.status import ModuleState
from reconciler.errors import LostOwnershipError, NotFoundError, SourceError, StoreError
from reconciler.operations.model import (
    CommitRecord,
    CommitVerdict,
    FenceToken,
    Member,
    Operation,
    OperationState,
    OperationType,
    Retention,
    RuntimeRecord,
    StageRecord,
    StepRecord,
    StepState,
    Suspension,
)
from reconciler.operations.store import (
    EXPIRED_OPERATIONS,
    LIMITS_SCOPE,
    MERGED_OPERATIONS,
    SCHEMA_VERSION,
    OperationRows,
    RowChanges,
    SavedRows,
    data_text,
    decode_data,
    decode_modules,
    deployed_of,
    encode_modules,
    expired_parameters,
    fence_values,
    fenced,
    limits_of,
    may_replace,
    merged_parameters,
    next_beat,
    refused,
)

#: Seconds to wait for the server when the URL (or PGCONNECT_TIMEOUT) does not say.
CONNECT_TIMEOUT = 10
#: Advisory lock keys: one for migrations; claims lock (CLAIM_LOCK, hashtext(runtime)).
MIGRATION_LOCK = 0x7265636F6E63
#: Held while a verdict on a commit is decided (one decision at a time, across replicas).
COMMITS_LOCK = 0x7265636F6E64
CLAIM_LOCK = 0x72636C6D
IN_PROGRESS = str(OperationState.IN_PROGRESS)
FIX = (
    "check the host, port, database, user and password (in the URL, a PGPASSFILE or PGPASSWORD), "
    "or name another store with --state or RECONCILER_STATE"
)

MIGRATIONS: dict[int, str] = {
    1: """
    CREATE TABLE operations (
        id TEXT PRIMARY KEY,
        runtime TEXT NOT NULL,
        type TEXT NOT NULL,
        state TEXT NOT NULL,
        created TIMESTAMPTZ NOT NULL,
        updated TIMESTAMPTZ,
        deadline TIMESTAMPTZ NOT NULL,
        commit_id TEXT NOT NULL DEFAULT '',
        message TEXT NOT NULL DEFAULT '',
        owner TEXT NOT NULL DEFAULT '',
        lease_until TIMESTAMPTZ,
        retrigger_of TEXT NOT NULL DEFAULT '',
        data TEXT NOT NULL DEFAULT '{}',
        seq BIGSERIAL
    );
    CREATE INDEX operations_by_runtime ON operations (runtime, created);
    CREATE TABLE stages (
        operation_id TEXT NOT NULL REFERENCES operations (id),
        position INTEGER NOT NULL,
        name TEXT NOT NULL,
        done BOOLEAN NOT NULL DEFAULT FALSE,
        finished TIMESTAMPTZ,
        PRIMARY KEY (operation_id, position)
    );
    CREATE TABLE steps (
        operation_id TEXT NOT NULL REFERENCES operations (id),
        stage_position INTEGER NOT NULL,
        position INTEGER NOT NULL,
        name TEXT NOT NULL,
        state TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        first_started TIMESTAMPTZ,
        started TIMESTAMPTZ,
        finished TIMESTAMPTZ,
        retry_at TIMESTAMPTZ,
        message TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (operation_id, stage_position, position)
    );
    CREATE TABLE runtimes (
        runtime TEXT PRIMARY KEY,
        state TEXT NOT NULL,
        reason TEXT NOT NULL,
        message TEXT NOT NULL,
        commit_id TEXT NOT NULL,
        updated TIMESTAMPTZ NOT NULL,
        modules TEXT NOT NULL DEFAULT '[]'
    );
    """,
    2: """
    ALTER TABLE runtimes ADD COLUMN access TEXT NOT NULL DEFAULT '';
    CREATE TABLE commits (
        commit_id TEXT PRIMARY KEY,
        verdict TEXT NOT NULL,
        decided TIMESTAMPTZ NOT NULL,
        message TEXT NOT NULL DEFAULT '',
        detail TEXT NOT NULL DEFAULT '{}',
        attempts INTEGER NOT NULL DEFAULT 0,
        seq BIGSERIAL
    );
    """,
    3: """
    CREATE TABLE suspensions (
        runtime TEXT PRIMARY KEY,
        since TIMESTAMPTZ NOT NULL,
        reason TEXT NOT NULL DEFAULT ''
    );
    """,
    4: """
    CREATE TABLE members (
        name TEXT PRIMARY KEY,
        epoch INTEGER NOT NULL,
        heartbeat TIMESTAMPTZ NOT NULL,
        started TIMESTAMPTZ NOT NULL
    );
    """,
    5: """
    ALTER TABLE operations ADD COLUMN version BIGINT NOT NULL DEFAULT 0;
    """,
    6: """
    CREATE TABLE brake_limits (
        scope TEXT PRIMARY KEY,
        max_deletions INTEGER NOT NULL,
        allow BOOLEAN NOT NULL,
        recorded TIMESTAMPTZ NOT NULL
    );
    """,
    7: """
    ALTER TABLE members ADD COLUMN fenced_epoch INTEGER NOT NULL DEFAULT 0;
    """,
}
#: :data:`reconciler.operations.store.FENCE_GUARD` in PostgreSQL's parameters.
FENCE_GUARD = """(%(fence_member)s::text IS NULL OR EXISTS (
    SELECT FROM members WHERE name = %(fence_member)s AND epoch = %(fence_epoch)s
    AND fenced_epoch < epoch))"""

#: Saving an operation is one statement (one round trip, no transaction of its own to open or
#: commit): its row is written by one of the two ``saved`` parts below, and only if that part
#: wrote it are its stage and step rows written (the ones given) and those past its shape
#: deleted. The version of the row written, or no row.
_SAVE_ANY = f"""
    INSERT INTO operations (id, runtime, type, state, created, updated, deadline, commit_id,
                            message, owner, lease_until, retrigger_of, data, version)
    SELECT %(id)s, %(runtime)s, %(type)s, %(state)s, %(created)s::timestamptz,
           %(updated)s::timestamptz, %(deadline)s::timestamptz, %(commit_id)s, %(message)s,
           %(owner)s, %(lease_until)s::timestamptz, %(retrigger_of)s, %(data)s, 1
    WHERE {FENCE_GUARD}
    ON CONFLICT (id) DO UPDATE SET
        runtime = excluded.runtime, type = excluded.type, state = excluded.state,
        created = excluded.created, updated = excluded.updated, deadline = excluded.deadline,
        commit_id = excluded.commit_id, message = excluded.message, owner = excluded.owner,
        lease_until = excluded.lease_until, retrigger_of = excluded.retrigger_of,
        data = excluded.data, version = operations.version + 1
    WHERE operations.owner = excluded.owner
    RETURNING version
"""
_SAVE_SEEN = f"""
    UPDATE operations SET
        runtime = %(runtime)s, type = %(type)s, state = %(state)s, created = %(created)s,
        updated = %(updated)s, deadline = %(deadline)s, commit_id = %(commit_id)s,
        message = %(message)s, owner = %(owner)s, lease_until = %(lease_until)s,
        retrigger_of = %(retrigger_of)s, data = %(data)s, version = version + 1
    WHERE id = %(id)s AND version = %(seen)s AND owner = %(owner)s AND {FENCE_GUARD}
    RETURNING version
"""  # noqa: S608 (FENCE_GUARD is a constant of this module, no input)
_SAVE_ROWS = """,
    stage_rows AS (
        INSERT INTO stages (operation_id, position, name, done, finished)
        SELECT %(id)s, s.* FROM saved, unnest(
            %(stage_position)s::int[], %(stage_name)s::text[], %(stage_done)s::boolean[],
            %(stage_finished)s::timestamptz[]) AS s
        ON CONFLICT (operation_id, position) DO UPDATE SET
            name = excluded.name, done = excluded.done, finished = excluded.finished
    ),
    step_rows AS (
        INSERT INTO steps (operation_id, stage_position, position, name, state, attempts,
                           first_started, started, finished, retry_at, message)
        SELECT %(id)s, s.* FROM saved, unnest(
            %(step_stage)s::int[], %(step_position)s::int[], %(step_name)s::text[],
            %(step_state)s::text[], %(step_attempts)s::int[],
            %(step_first_started)s::timestamptz[], %(step_started)s::timestamptz[],
            %(step_finished)s::timestamptz[], %(step_retry_at)s::timestamptz[],
            %(step_message)s::text[]) AS s
        ON CONFLICT (operation_id, stage_position, position) DO UPDATE SET
            name = excluded.name, state = excluded.state, attempts = excluded.attempts,
            first_started = excluded.first_started, started = excluded.started,
            finished = excluded.finished, retry_at = excluded.retry_at, message = excluded.message
    ),
    stages_gone AS (
        DELETE FROM stages WHERE operation_id = %(id)s AND position >= %(stage_count)s
        AND EXISTS (SELECT FROM saved)
    ),
    steps_gone AS (
        DELETE FROM steps WHERE operation_id = %(id)s
        AND position >= coalesce((%(step_counts)s::int[])[stage_position + 1], 0)
        AND EXISTS (SELECT FROM saved)
    )
    SELECT version FROM saved
"""
_SAVE_OPERATION = f"WITH saved AS ({_SAVE_ANY}){_SAVE_ROWS}"
_SAVE_SEEN_OPERATION = f"WITH saved AS ({_SAVE_SEEN}){_SAVE_ROWS}"
_UPSERT_RUNTIME = (
    "INSERT INTO runtimes (runtime, state, reason, message, commit_id, updated, modules, access) "
    "SELECT %(runtime)s, %(state)s, %(reason)s, %(message)s, %(commit_id)s, "
    f"%(updated)s::timestamptz, %(modules)s, %(access)s WHERE {FENCE_GUARD} "
    "ON CONFLICT (runtime) DO UPDATE SET state = excluded.state, reason = excluded.reason, "
    "message = excluded.message, commit_id = excluded.commit_id, updated = excluded.updated, "
    "modules = excluded.modules, access = CASE WHEN excluded.access <> '' "
    "THEN excluded.access ELSE runtimes.access END"
)

Cursor = psycopg.Cursor[DictRow]


class PostgresStore:
    """:class:`~reconciler.operations.store.StateStore` in a PostgreSQL database."""

    def __init__(self, url: str) -> None:
        self.shown = mask_url_password(url)
        self._url = url
        self._conninfo = self._parse(url)
        self._lock = threading.RLock()  # one connection, shared by the daemon's worker threads
        self._saved = SavedRows()
        self._closed = False
        self._db = self._connect()
        try:
            self._migrate()
        except BaseException:
            self._db.close()
            raise

    def close(self) -> None:
        """Close the connection (for good: no call connects again)."""
        self._closed = True
        self._db.close()

    def __del__(self) -> None:
        """A command that ends without :meth:`close` still closes its connection."""
        if getattr(self, "_db", None) is not None:
            self._db.close()

    def schema_version(self) -> int:
        """The schema version of the database."""
        rows = self._query("SELECT max(version) AS v FROM schema_version")
        return int(rows[0]["v"])

    # -- connection ------------------------------------------------------------------------------

    def _parse(self, url: str) -> str:
        """libpq's connection string for ``url``, with our defaults where it names none."""
        extra: dict[str, Any] = {}
        try:
            given = conninfo_to_dict(url)
        except psycopg.Error as error:
            raise SourceError(
                f"--state {self.shown}: not a usable PostgreSQL URL ({self._say(error)}); the "
                "form is postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?PARAM=VALUE]"
            ) from None
        if "connect_timeout" not in given and not os.environ.get("PGCONNECT_TIMEOUT"):
            extra["connect_timeout"] = CONNECT_TIMEOUT
        if "application_name" not in given and not os.environ.get("PGAPPNAME"):
            extra["application_name"] = "reconciler"
        return make_conninfo(url, **extra)

    def _connect(self) -> psycopg.Connection[DictRow]:
        try:
            return psycopg.connect(self._conninfo, autocommit=True, row_factory=dict_row)
        except psycopg.Error as error:
            raise StoreError(
                f"cannot use the state store {self.shown}: {self._say(error)}; {FIX}"
            ) from None

    def _live(self) -> psycopg.Connection[DictRow]:
        """The connection; a new one when the server dropped the last (not after close())."""
        if self._db.broken and not self._closed:
            self._db.close()
            self._db = self._connect()
        return self._db

    def _say(self, error: BaseException) -> str:
        """``error`` on one line, without the password."""
        text = "; ".join(" ".join(line.split()) for line in str(error).splitlines() if line.strip())
        for prefix in ("connection failed: ", "connection is bad: "):
            text = text.removeprefix(prefix)
        text = text.replace(self._url, self.shown)
        for password in url_passwords(self._url):
            text = text.replace(password, MASK).replace(unquote(password), MASK)
        return text

    @contextmanager
    def _translated(self) -> Iterator[None]:
        """psycopg's errors as ours: a lost server or a failed transaction may pass (transient),
        anything else is a broken store (permanent)."""
        try:
            yield
        except psycopg.OperationalError as error:
            raise StoreError(f"the state store {self.shown} failed: {self._say(error)}") from None
        except psycopg.Error as error:
            raise SourceError(
                f"the state store {self.shown} is not usable: {self._say(error)}"
            ) from None

    @contextmanager
    def _transaction(self, read_only: bool = False) -> Iterator[Cursor]:
        """A transaction."""
        with self._lock, self._translated():
            db = self._live()
            with db.transaction(), db.cursor() as cursor:
                if read_only:  # several queries, one snapshot
                    cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                yield cursor

    def _query(self, sql: str, parameters: Sequence[object] = ()) -> list[DictRow]:
        """One statement on its own (a statement reads one snapshot)."""
        with self._lock, self._translated():
            return self._live().execute(sql, parameters).fetchall()

    def _migrate(self) -> None:
        with self._transaction() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            cursor.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            row = cursor.execute("SELECT max(version) AS v FROM schema_version").fetchone()
            current = int(row["v"] or 0) if row else 0
            if current > SCHEMA_VERSION:
                raise SourceError(
                    f"{self.shown} has schema version {current}, newer than this reconciler "
                    f"({SCHEMA_VERSION}); upgrade reconciler"
                )
            for version in range(current + 1, SCHEMA_VERSION + 1):
                cursor.execute(MIGRATIONS[version])
                cursor.execute("INSERT INTO schema_version (version) VALUES (%s)", (version,))

    # -- operations ------------------------------------------------------------------------------

    def save(self, operation: Operation, fence: FenceToken | None = None) -> None:
        """See :class:`~reconciler.operations.store.StateStore`: one statement writing the
        operation's row and the stage and step rows that changed since this store last wrote or
        read it, while nobody else wrote it in between (:class:`SavedRows`), or all of them
        when this store knows nothing of it; under the fence. A refused save writes nothing and
        raises (never a second statement writing the whole operation)."""
        rows = OperationRows.of(operation)
        with self._lock:
            seen = self._saved.seen(operation.id)
            try:
                if seen is not None:
                    changes = rows.changes(seen[1])
                    version = self._write(operation, rows, changes, seen[0], fence)
                else:
                    version = self._write(operation, rows, rows.everything(), None, fence)
            except BaseException:
                self._saved.forget(operation.id)
                raise
            if version is None:
                self._saved.forget(operation.id)
                raise refused(operation, fence)
            self._saved.remember(operation, version, rows)

    def _write(
        self,
        operation: Operation,
        rows: OperationRows,
        changes: RowChanges,
        seen: int | None,
        fence: FenceToken | None,
    ) -> int | None:
        """Write the operation's row and ``changes`` (rows past the shape of ``rows`` deleted);
        with ``seen``, only if its row is still at that version; only under the fence. The new
        version, or ``None`` when nothing was written."""
        sql = _SAVE_OPERATION if seen is None else _SAVE_SEEN_OPERATION
        parameters = _save_parameters(operation, rows, changes) | {"seen": seen}
        parameters |= fence_values(fence)
        with self._lock, self._translated():
            found = self._live().execute(sql, parameters).fetchone()
        return int(found["version"]) if found is not None else None

    def get(self, operation_id: str) -> Operation | None:
        """See :class:`~reconciler.operations.store.StateStore`."""
        with self._transaction(read_only=True) as cursor:
            rows = cursor.execute(
                "SELECT * FROM operations WHERE left(id, %s::int) = %s "
                "ORDER BY created, seq LIMIT 2",
                (len(operation_id), operation_id.lower()),  # ids are lower-case hex
            ).fetchall()
            return self._loaded(cursor, rows)[0] if len(rows) == 1 else None

    def operations(self, runtime: str | None = None, limit: int = 50) -> list[Operation]:
        """See :class:`~reconciler.operations.store.StateStore`."""
        with self._transaction(read_only=True) as cursor:
            rows = cursor.execute(
                "SELECT * FROM operations WHERE %(runtime)s::text IS NULL OR runtime = %(runtime)s "
                "ORDER BY created DESC, seq DESC LIMIT %(limit)s",
                {"runtime": runtime, "limit": limit},
            ).fetchall()
            return self._loaded(cursor, rows)

    def _loaded(self, cursor: Cursor, rows: list[DictRow]) -> list[Operation]:
        """The operations of ``rows`` (read in one snapshot with their stages and steps),
        remembered with the version read."""
        operations = _load_operations(cursor, rows)
        for row, operation in zip(rows, operations, strict=True):
            self._saved.loaded(operation, int(row["version"]))
        return operations

    def unfinished(self, runtime: str) -> Operation | None:
        """See :class:`~reconciler.operations.store.StateStore`."""
        with self._transaction(read_only=True) as cursor:
            rows = cursor.execute(
                "SELECT * FROM operations WHERE runtime = %s AND state IN (%s, %s) "
                "ORDER BY created, seq LIMIT 1",
                (runtime, str(OperationState.PENDING), str(OperationState.IN_PROGRESS)),
            ).fetchall()
            return self._loaded(cursor, rows)[0] if rows else None

    def claim(
        self,
        operation_id: str,
        owner: str,
        now: datetime,
        lease_until: datetime,
        alive: Callable[[str], bool],
        fence: FenceToken | None = None,
    ) -> str | None:
        """See :class:`~reconciler.operations.store.StateStore`. The advisory lock on the runtime
        is held until this transaction ends, so a second claimer reads the first one's result.
        The claim moves the operation's version on (:class:`SavedRows`), remembered once it is
        committed."""
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
        with self._transaction() as cursor:
            row = cursor.execute(
                "SELECT runtime FROM operations WHERE id = %s", (operation_id,)
            ).fetchone()
            if row is None:
                raise NotFoundError(f"no operation {operation_id} in the state store")
            cursor.execute(
                "SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (CLAIM_LOCK, row["runtime"])
            )
            holders = cursor.execute(
                "SELECT id, owner, lease_until FROM operations WHERE runtime = %s AND state = %s "
                "ORDER BY created, seq",
                (row["runtime"], IN_PROGRESS),
            ).fetchall()
            for holder in holders:
                lease = holder["lease_until"]
                if holder["owner"] in (owner, ""):
                    continue
                if lease is not None and lease > now and alive(holder["owner"]):
                    return f"operation {holder['id']} of {holder['owner']}"
            claimed = cursor.execute(
                "UPDATE operations SET state = %(state)s, owner = %(owner)s, "  # noqa: S608 (a constant)
                "lease_until = %(lease)s, updated = %(now)s, version = version + 1 "
                f"WHERE id = %(id)s AND {FENCE_GUARD} RETURNING version",
                {
                    **{"state": IN_PROGRESS, "owner": owner, "id": operation_id},
                    **{"lease": _utc(lease_until), "now": _utc(now)},
                    **fence_values(fence),
                },
            ).fetchone()
        if claimed is None:  # its row was read above: the fence refused it
            raise LostOwnershipError(f"operation {operation_id} not claimed: {fenced(fence)}")
        return int(claimed["version"])

    # -- runtimes --------------------------------------------------------------------------------

    def put_runtime(self, record: RuntimeRecord, fence: FenceToken | None = None) -> None:
        """See :class:`~reconciler.operations.store.StateStore`."""
        with self._transaction() as cursor:
            cursor.execute(
                _UPSERT_RUNTIME,
                {
                    **{"runtime": record.runtime, "state": str(record.state)},
                    **{"reason": record.reason, "message": record.message},
                    **{"commit_id": head_text(record.commit), "updated": _utc(record.updated)},
                    **{
                        "modules": encode_modules(record.modules),
                        "access": record.access.describe(),
                    },
                    **fence_values(fence),
                },
            )
            if cursor.rowcount == 0:
                raise LostOwnershipError(f"runtime {record.runtime} not recorded: {fenced(fence)}")

    def runtimes(self) -> list[RuntimeRecord]:
        """See :class:`~reconciler.operations.store.StateStore`."""
        return [_runtime(row) for row in self._query("SELECT * FROM runtimes ORDER BY runtime")]

    def runtime_names(self) -> list[str]:
        """See :class:`~reconciler.operations.store.StateStore`."""
        return [r["runtime"] for r in self._query("SELECT runtime FROM runtimes ORDER BY runtime")]

    def deployed(self) -> dict[str, dict[str, str]]:
        """See :class:`~reconciler.operations.store.StateStore`."""
        rows = self._query("SELECT runtime, modules FROM runtimes ORDER BY runtime")
        return {row["runtime"]: deployed_of(row["modules"]) for row in rows}

    def runtime(self, runtime: str) -> RuntimeRecord | None:
        """See :class:`~reconciler.operations.store.StateStore`."""
        rows = self._query("SELECT * FROM runtimes WHERE runtime = %s", (runtime,))
        return _runtime(rows[0]) if rows else None

    def forget_runtime(self, runtime: str, fence: FenceToken | None = None) -> None:
        """See :class:`~reconciler.operations.store.StateStore`."""
        sql = f"DELETE FROM runtimes WHERE runtime = %(runtime)s AND {FENCE_GUARD}"  # noqa: S608 (a constant)
        self._guarded(sql, {"runtime": runtime}, fence)

    def record_access(
        self, runtime: str, access: ClusterIdentity, fence: FenceToken | None = None
    ) -> None:
        """See :class:`~reconciler.operations.store.StateStore`."""
        sql = (
            "UPDATE runtimes SET access = %(access)s WHERE runtime = %(runtime)s "  # noqa: S608 (a constant)
            f"AND {FENCE_GUARD}"
        )
        self._guarded(sql, {"runtime": runtime, "access": access.describe()}, fence)

    def _guarded(self, sql: str, values: dict[str, object], fence: FenceToken | None) -> None:
        """Run ``sql``, a write guarded by :data:`FENCE_GUARD`; when it wrote no row, tell a
        refusal (the fence) from nothing to write (no such runtime)."""
        parameters = values | fence_values(fence)
        with self._transaction() as cursor:
            if cursor.execute(sql, parameters).rowcount > 0 or fence is None:
                return
            row = cursor.execute(f"SELECT {FENCE_GUARD} AS ok", parameters).fetchone()
            if row is not None and row["ok"]:
                return
        raise LostOwnershipError(f"runtime {values['runtime']} not written: {fenced(fence)}")

    # -- commits ---------------------------------------------------------------------------------

    def decide_commit(self, record: CommitRecord) -> CommitRecord:
        """See :class:`~reconciler.operations.store.StateStore`: serialised by an advisory lock
        held to the end of the transaction (a row lock cannot lock a row not written yet)."""
        with self._transaction() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", (COMMITS_LOCK,))
            standing = _commit_in(cursor, record.commit)
            current = _last_accepted_in(cursor)
            in_force = current.commit if current is not None else None
            if standing is not None and not may_replace(standing, record, in_force):
                return standing
            _write_commit(cursor, record)
            return record

    def accept_commit(self, record: CommitRecord, expected: Head | None) -> CommitRecord | None:
        """See :class:`~reconciler.operations.store.StateStore`."""
        with self._transaction() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", (COMMITS_LOCK,))
            current = _last_accepted_in(cursor)
            standing = _commit_in(cursor, record.commit)
            moved = (current.commit if current else None) == expected
            if not moved or (standing is not None and not may_replace(standing, record)):
                return current
            _write_commit(cursor, record)
            return record

    def commit(self, commit: Head) -> CommitRecord | None:
        """See :class:`~reconciler.operations.store.StateStore`."""
        rows = self._query("SELECT * FROM commits WHERE commit_id = %s", (commit.text,))
        return _commit(rows[0]) if rows else None

    def last_accepted(self) -> CommitRecord | None:
        """See :class:`~reconciler.operations.store.StateStore`."""
        with self._transaction() as cursor:
            return _last_accepted_in(cursor)

    def limits_in_force(self) -> Limits | None:
        """See :class:`~reconciler.operations.store.StateStore`."""
        rows = self._query("SELECT * FROM brake_limits WHERE scope = %s", (LIMITS_SCOPE,))
        return limits_of(rows[0]) if rows else None

    def record_limits(self, limits: Limits, now: datetime) -> None:
        """See :class:`~reconciler.operations.store.StateStore`."""
        with self._transaction() as cursor:
            cursor.execute(
                "INSERT INTO brake_limits (scope, max_deletions, allow, recorded) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (scope) DO UPDATE SET "
                "max_deletions = excluded.max_deletions, allow = excluded.allow, "
                "recorded = excluded.recorded",
                (LIMITS_SCOPE, limits.max_deletions, limits.allow, _utc(now)),
            )

    def prune(self, retention: Retention, now: datetime) -> int:
        """See :class:`~reconciler.operations.store.StateStore`: the statements of the SQLite
        store, in batches, one transaction each."""
        cutoff = _utc(now - retention.keep_failures_for)
        removed = 0
        for sql, parameters in (
            (MERGED_OPERATIONS, merged_parameters()),
            (EXPIRED_OPERATIONS, expired_parameters(retention, cutoff)),
        ):
            while batch := self._remove(sql.format(p="%s", order="seq"), parameters):
                removed += batch
        return removed

    def _remove(self, sql: str, parameters: tuple[object, ...]) -> int:
        """Remove the operations ``sql`` selects, with their stages and steps; how many."""
        with self._transaction() as cursor:
            ids = [row["id"] for row in cursor.execute(sql, parameters).fetchall()]
            for table, column in (("steps", "operation_id"), ("stages", "operation_id")):
                cursor.execute(f"DELETE FROM {table} WHERE {column} = ANY(%s)", (ids,))  # noqa: S608
            cursor.execute("DELETE FROM operations WHERE id = ANY(%s)", (ids,))
        for operation_id in ids:
            self._saved.forget(operation_id)
        return len(ids)

    def suspend(self, suspension: Suspension) -> None:
        """See :class:`~reconciler.operations.store.StateStore`."""
        with self._transaction() as cursor:
            cursor.execute(
                "INSERT INTO suspensions (runtime, since, reason) VALUES (%s, %s, %s) "
                "ON CONFLICT (runtime) DO UPDATE SET since = excluded.since, "
                "reason = excluded.reason",
                (suspension.runtime, _utc(suspension.since), suspension.reason),
            )

    def resume(self, runtime: str) -> bool:
        """See :class:`~reconciler.operations.store.StateStore`."""
        with self._transaction() as cursor:
            cursor.execute("DELETE FROM suspensions WHERE runtime = %s", (runtime,))
            return cursor.rowcount > 0

    def suspensions(self) -> dict[str, Suspension]:
        """See :class:`~reconciler.operations.store.StateStore`."""
        rows = self._query("SELECT * FROM suspensions ORDER BY runtime")
        return {
            r["runtime"]: Suspension(r["runtime"], r["since"].astimezone(UTC), r["reason"])
            for r in rows
        }

    def heartbeat(self, name: str, now: datetime, lease: timedelta) -> Member:
        """See :class:`~reconciler.operations.store.StateStore` (the member's row locked)."""
        with self._transaction() as cursor:
            cursor.execute(
                "INSERT INTO members (name, epoch, heartbeat, started) VALUES (%s, 0, %s, %s) "
                "ON CONFLICT (name) DO NOTHING",
                (name, _utc(now), _utc(now)),
            )
            row = cursor.execute(
                "SELECT * FROM members WHERE name = %s FOR UPDATE", (name,)
            ).fetchone()
            last = _member(row) if row is not None and int(row["epoch"]) > 0 else None
            member = next_beat(last, name, now, lease)
            cursor.execute(
                "UPDATE members SET epoch = %s, heartbeat = %s, started = %s, fenced_epoch = %s "
                "WHERE name = %s",
                (
                    *(member.epoch, _utc(member.heartbeat), _utc(member.started)),
                    *(member.fenced_epoch, name),
                ),
            )
        return member

    def fence(self, name: str, epoch: int, lapsed_before: datetime) -> bool:
        """See :class:`~reconciler.operations.store.StateStore`."""
        with self._transaction() as cursor:
            cursor.execute(
                "UPDATE members SET fenced_epoch = epoch WHERE name = %s AND epoch = %s "
                "AND heartbeat < %s AND fenced_epoch < epoch",
                (name, epoch, _utc(lapsed_before)),
            )
            return cursor.rowcount > 0

    def members(self) -> list[Member]:
        """See :class:`~reconciler.operations.store.StateStore`."""
        rows = self._query("SELECT * FROM members WHERE epoch > 0 ORDER BY name")
        return [_member(r) for r in rows]

    def leave(self, name: str) -> None:
        """See :class:`~reconciler.operations.store.StateStore`."""
        with self._transaction() as cursor:
            cursor.execute("DELETE FROM members WHERE name = %s", (name,))


def _save_parameters(
    operation: Operation, rows: OperationRows, changes: RowChanges
) -> dict[str, object]:
    """The parameters of :data:`_SAVE_OPERATION`: the operation's row, ``changes`` as arrays by
    column and the shape of ``rows`` (stages, steps in each) past which rows are deleted."""
    stages, steps = changes.stages, changes.steps
    counts = [0] * len(rows.stages)
    for index, _ in rows.steps:
        counts[index] += 1
    return {
        **(_operation_values(operation)),
        "stage_position": [key for key, _ in stages],
        "stage_name": [row[0] for _, row in stages],
        "stage_done": [row[1] for _, row in stages],
        "stage_finished": [row[2] for _, row in stages],
        "step_stage": [key[0] for key, _ in steps],
        "step_position": [key[1] for key, _ in steps],
        **{name: [row[n] for _, row in steps] for n, name in enumerate(_STEP_COLUMNS)},
        "stage_count": len(rows.stages),
        "step_counts": counts,
    }


#: The parameters of a step row's values, in the order of :data:`StepRow`.
_STEP_COLUMNS = (
    *("step_name", "step_state", "step_attempts", "step_first_started", "step_started"),
    *("step_finished", "step_retry_at", "step_message"),
)


def _operation_values(operation: Operation) -> dict[str, object]:
    """The operation's own row, by column."""
    return {
        "id": operation.id,
        "runtime": operation.runtime,
        "type": str(operation.type),
        "state": str(operation.state),
        "created": _utc(operation.created),
        "updated": _utc(operation.updated),
        "deadline": _utc(operation.deadline),
        "commit_id": head_text(operation.commit),
        "message": operation.message,
        "owner": operation.owner,
        "lease_until": _utc(operation.lease_until),
        "retrigger_of": operation.retrigger_of,
        "data": data_text(operation),
    }


def _load_operations(cursor: Cursor, rows: list[DictRow]) -> list[Operation]:
    """The operations of ``rows`` with their stages and steps (two queries for all of them)."""
    ids = [row["id"] for row in rows]
    steps: dict[tuple[str, int], list[StepRecord]] = defaultdict(list)
    for step in cursor.execute(
        "SELECT * FROM steps WHERE operation_id = ANY(%s) "
        "ORDER BY operation_id, stage_position, position",
        (ids,),
    ):
        steps[(step["operation_id"], step["stage_position"])].append(_step(step))
    stages: dict[str, list[StageRecord]] = defaultdict(list)
    for stage in cursor.execute(
        "SELECT * FROM stages WHERE operation_id = ANY(%s) ORDER BY operation_id, position",
        (ids,),
    ):
        key = (stage["operation_id"], stage["position"])
        stages[stage["operation_id"]].append(
            StageRecord(stage["name"], steps[key], stage["done"], _utc(stage["finished"]))
        )
    return [_operation(row, stages[row["id"]]) for row in rows]


def _operation(row: DictRow, stages: list[StageRecord]) -> Operation:
    return Operation(
        id=row["id"],
        runtime=row["runtime"],
        type=OperationType(row["type"]),
        state=OperationState(row["state"]),
        created=row["created"].astimezone(UTC),
        deadline=row["deadline"].astimezone(UTC),
        stages=stages,
        commit=Head.parse(row["commit_id"]),
        message=row["message"],
        updated=_utc(row["updated"]),
        owner=row["owner"],
        lease_until=_utc(row["lease_until"]),
        retrigger_of=row["retrigger_of"],
        data=decode_data(row["data"]),
    )


def _step(row: DictRow) -> StepRecord:
    return StepRecord(
        name=row["name"],
        state=StepState(row["state"]),
        attempts=row["attempts"],
        first_started=_utc(row["first_started"]),
        started=_utc(row["started"]),
        finished=_utc(row["finished"]),
        retry_at=_utc(row["retry_at"]),
        message=row["message"],
    )


def _runtime(row: DictRow) -> RuntimeRecord:
    return RuntimeRecord(
        row["runtime"],
        ModuleState(row["state"]),
        row["reason"],
        row["message"],
        Head.parse(row["commit_id"]),
        row["updated"].astimezone(UTC),
        decode_modules(row["modules"]),
        ClusterIdentity.parse(row["access"]),
    )


def _commit_in(cursor: Cursor, commit: Head) -> CommitRecord | None:
    row = cursor.execute("SELECT * FROM commits WHERE commit_id = %s", (commit.text,)).fetchone()
    return _commit(row) if row is not None else None


def _last_accepted_in(cursor: Cursor) -> CommitRecord | None:
    row = cursor.execute(
        "SELECT * FROM commits WHERE verdict = %s ORDER BY seq DESC LIMIT 1",
        (str(CommitVerdict.ACCEPTED),),
    ).fetchone()
    return _commit(row) if row is not None else None


def _write_commit(cursor: Cursor, record: CommitRecord) -> None:
    """The verdict, as the newest row: ``seq`` numbers the writes, which COMMITS_LOCK puts in
    one order (the last ACCEPTED row written is the one in force, whatever the clocks said)."""
    cursor.execute("DELETE FROM commits WHERE commit_id = %s", (record.commit.text,))
    cursor.execute(
        "INSERT INTO commits (commit_id, verdict, decided, message, detail, attempts) "
        "VALUES (%s, %s, %s, %s, %s, %s)",
        (
            *(record.commit.text, str(record.verdict), _utc(record.decided)),
            record.message,
            *(json.dumps(record.detail, sort_keys=True), record.attempts),
        ),
    )


def _commit(row: DictRow) -> CommitRecord:
    head = Head.parse(row["commit_id"])
    assert head is not None
    return CommitRecord(
        head,
        CommitVerdict(row["verdict"]),
        row["decided"].astimezone(UTC),
        row["message"],
        json.loads(row["detail"]),
        row["attempts"],
    )


def _member(row: DictRow) -> Member:
    heartbeat, started = row["heartbeat"].astimezone(UTC), row["started"].astimezone(UTC)
    return Member(row["name"], int(row["epoch"]), heartbeat, started, int(row["fenced_epoch"]))


def _utc(moment: datetime | None) -> datetime | None:
    """A time as stored and as read: aware, in UTC (a naive one is taken as local time, as the
    SQLite store takes it)."""
    return moment.astimezone(UTC) if moment is not None else None
