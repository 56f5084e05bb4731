"""The state store in PostgreSQL, for several daemons sharing the work (DESIGN.md O6).

:class:`PostgresStore` implements :class:`~reconciler.operations.store.StateStore` on the same
logical tables and schema versions as the SQLite store; times are ``timestamptz`` (read back in
UTC), JSON is kept as text as SQLite keeps it, and a ``seq`` column stands for SQLite's rowid
(insertion order breaks ties). Migrations run in one transaction under an advisory lock, so
daemons starting together migrate once. Claiming a runtime (O3) is one transaction holding a
transaction-scoped advisory lock on the runtime's name: two daemons on different hosts never both
move an operation of one runtime to in progress.

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
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import unquote

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import DictRow, dict_row

from reconciler.core.head import Head, head_text
from reconciler.core.redaction import MASK, mask_url_password, url_passwords
from reconciler.core.status import ModuleState
from reconciler.errors import NotFoundError, SourceError, StoreError
from reconciler.operations.model import (
    CommitRecord,
    CommitVerdict,
    Member,
    Operation,
    OperationState,
    OperationType,
    RuntimeRecord,
    StageRecord,
    StepRecord,
    StepState,
    Suspension,
)
from reconciler.operations.store import (
    SCHEMA_VERSION,
    data_text,
    decode_data,
    decode_modules,
    deployed_of,
    encode_modules,
    may_replace,
    next_beat,
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
}

_UPSERT_OPERATION = """
    INSERT INTO operations (id, runtime, type, state, created, updated, deadline, commit_id,
                            message, owner, lease_until, retrigger_of, data)
    VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
    ON CONFLICT (id) DO UPDATE SET
        runtime = excluded.runtime, type = excluded.type, state = excluded.state,
        created = excluded.created, updated = excluded.updated, deadline = excluded.deadline,
        commit_id = excluded.commit_id, message = excluded.message, owner = excluded.owner,
        lease_until = excluded.lease_until, retrigger_of = excluded.retrigger_of,
        data = excluded.data
"""
_INSERT_STAGE = (
    "INSERT INTO stages (operation_id, position, name, done, finished) VALUES (%s, %s, %s, %s, %s)"
)
_INSERT_STEP = (
    "INSERT INTO steps (operation_id, stage_position, position, name, state, attempts, "
    "first_started, started, finished, retry_at, message) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
_UPSERT_RUNTIME = (
    "INSERT INTO runtimes (runtime, state, reason, message, commit_id, updated, modules, access) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
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
    def _transaction(self, read_only: bool = False, batched: bool = False) -> Iterator[Cursor]:
        """A transaction; ``batched``: in pipeline mode, its statements sent in one round trip
        (none may need the answer of another, nor hold several commands)."""
        with self._lock, self._translated():
            db = self._live()
            batch = db.pipeline() if batched else nullcontext()
            with batch, db.transaction(), db.cursor() as cursor:
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

    def save(self, operation: Operation) -> None:
        """See :class:`~reconciler.operations.store.StateStore`."""
        stages = [
            (operation.id, index, stage.name, stage.done, _utc(stage.finished))
            for index, stage in enumerate(operation.stages)
        ]
        steps = [
            (
                *(operation.id, index, position, step.name, str(step.state), step.attempts),
                *(_utc(step.first_started), _utc(step.started), _utc(step.finished)),
                *(_utc(step.retry_at), step.message),
            )
            for index, stage in enumerate(operation.stages)
            for position, step in enumerate(stage.steps)
        ]
        with self._transaction(batched=True) as cursor:  # seven statements, one round trip
            cursor.execute(_UPSERT_OPERATION, _operation_row(operation))
            cursor.execute("DELETE FROM steps WHERE operation_id = %s", (operation.id,))
            cursor.execute("DELETE FROM stages WHERE operation_id = %s", (operation.id,))
            cursor.executemany(_INSERT_STAGE, stages)
            cursor.executemany(_INSERT_STEP, steps)

    def get(self, operation_id: str) -> Operation | None:
        """See :class:`~reconciler.operations.store.StateStore`."""
        with self._transaction(read_only=True) as cursor:
            rows = cursor.execute(
                "SELECT * FROM operations WHERE left(id, %s::int) = %s "
                "ORDER BY created, seq LIMIT 2",
                (len(operation_id), operation_id.lower()),  # ids are lower-case hex
            ).fetchall()
            return _load_operations(cursor, rows)[0] if len(rows) == 1 else None

    def operations(self, runtime: str | None = None, limit: int = 50) -> list[Operation]:
        """See :class:`~reconciler.operations.store.StateStore`."""
        with self._transaction(read_only=True) as cursor:
            rows = cursor.execute(
                "SELECT * FROM operations WHERE %(runtime)s::text IS NULL OR runtime = %(runtime)s "
                "ORDER BY created DESC, seq DESC LIMIT %(limit)s",
                {"runtime": runtime, "limit": limit},
            ).fetchall()
            return _load_operations(cursor, rows)

    def unfinished(self, runtime: str) -> Operation | None:
        """See :class:`~reconciler.operations.store.StateStore`."""
        with self._transaction(read_only=True) as cursor:
            rows = cursor.execute(
                "SELECT * FROM operations WHERE runtime = %s AND state IN (%s, %s) "
                "ORDER BY created, seq LIMIT 1",
                (runtime, str(OperationState.PENDING), str(OperationState.IN_PROGRESS)),
            ).fetchall()
            return _load_operations(cursor, rows)[0] if rows else None

    def claim(
        self,
        operation_id: str,
        owner: str,
        now: datetime,
        lease_until: datetime,
        alive: Callable[[str], bool],
    ) -> str | None:
        """See :class:`~reconciler.operations.store.StateStore`. The advisory lock on the runtime
        is held until this transaction ends, so a second claimer reads the first one's result."""
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
            cursor.execute(
                "UPDATE operations SET state = %s, owner = %s, lease_until = %s, updated = %s "
                "WHERE id = %s",
                (IN_PROGRESS, owner, _utc(lease_until), _utc(now), operation_id),
            )
        return None

    # -- runtimes --------------------------------------------------------------------------------

    def put_runtime(self, record: RuntimeRecord) -> None:
        """See :class:`~reconciler.operations.store.StateStore`."""
        with self._transaction() as cursor:
            cursor.execute(
                _UPSERT_RUNTIME,
                (
                    *(record.runtime, str(record.state), record.reason, record.message),
                    *(head_text(record.commit), _utc(record.updated)),
                    *(encode_modules(record.modules), record.access),
                ),
            )

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

    def forget_runtime(self, runtime: str) -> None:
        """See :class:`~reconciler.operations.store.StateStore`."""
        with self._transaction() as cursor:
            cursor.execute("DELETE FROM runtimes WHERE runtime = %s", (runtime,))

    def record_access(self, runtime: str, access: str) -> None:
        """See :class:`~reconciler.operations.store.StateStore`."""
        with self._transaction() as cursor:
            cursor.execute("UPDATE runtimes SET access = %s WHERE runtime = %s", (access, runtime))

    # -- commits ---------------------------------------------------------------------------------

    def decide_commit(self, record: CommitRecord) -> CommitRecord:
        """See :class:`~reconciler.operations.store.StateStore`: serialised by an advisory lock
        held to the end of the transaction (a row lock cannot lock a row not written yet)."""
        with self._transaction() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", (COMMITS_LOCK,))
            standing = _commit_in(cursor, record.commit)
            if standing is not None and not may_replace(standing, record):
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
                "UPDATE members SET epoch = %s, heartbeat = %s, started = %s WHERE name = %s",
                (member.epoch, _utc(member.heartbeat), _utc(member.started), name),
            )
        return member

    def members(self) -> list[Member]:
        """See :class:`~reconciler.operations.store.StateStore`."""
        rows = self._query("SELECT * FROM members WHERE epoch > 0 ORDER BY name")
        return [_member(r) for r in rows]

    def leave(self, name: str) -> None:
        """See :class:`~reconciler.operations.store.StateStore`."""
        with self._transaction() as cursor:
            cursor.execute("DELETE FROM members WHERE name = %s", (name,))


def _operation_row(operation: Operation) -> tuple[object, ...]:
    return (
        *(operation.id, operation.runtime, str(operation.type), str(operation.state)),
        *(_utc(operation.created), _utc(operation.updated), _utc(operation.deadline)),
        *(head_text(operation.commit), operation.message, operation.owner),
        *(_utc(operation.lease_until), operation.retrigger_of, data_text(operation)),
    )


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
        row["access"],
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
    return Member(row["name"], int(row["epoch"]), heartbeat, started)


def _utc(moment: datetime | None) -> datetime | None:
    """A time as stored and as read: aware, in UTC (a naive one is taken as local time, as the
    SQLite store takes it)."""
    return moment.astimezone(UTC) if moment is not None else None
