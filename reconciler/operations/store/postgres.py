"""The state store in PostgreSQL, for several daemons sharing the work (DESIGN.md O6): the
dialect of :class:`~reconciler.operations.store.base.SqlBase` for PostgreSQL, and the only
importer of psycopg.

Times are ``timestamptz`` (read back in UTC), JSON is kept as text as SQLite keeps it, and a
``seq`` column stands for SQLite's rowid (insertion order breaks ties). Transactions serialise
what they must with transaction-scoped advisory locks: migrations (daemons starting together
migrate once), verdicts on commits, and claims of a runtime (O3: two daemons on different hosts
never both move an operation of one runtime to in progress). Saving an operation is one
statement, one round trip (:meth:`PostgresStore.write_operation`): its row and the stage and
step rows that changed, guarded in that statement by the version, the owner and the writer's
fence; a save the guard refuses writes nothing.

The URL is libpq's (``postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?PARAM=VALUE...]``); the
password comes from it, from a PGPASSFILE (or ``~/.pgpass``) or from PGPASSWORD, by libpq's own
rules, and is never shown: every message names the URL with its password masked. A lost
connection is a :class:`~reconciler.errors.StoreError` (transient) and the next call connects
again.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import DictRow, dict_row

from reconciler.core.redaction import MASK, mask_url_password, url_passwords
from reconciler.errors import SourceError, StoreError
from reconciler.operations.store.base import Parameters, Statements, dialect, fence_values
from reconciler.operations.store.operations import (
    UPDATE_SEEN_OPERATION,
    UPSERT_OPERATION,
    OperationTables,
    Save,
)
from reconciler.operations.store.outbox import OutboxTables
from reconciler.operations.store.records import RecordTables
from reconciler.operations.store.rollouts import RolloutTables
from reconciler.operations.store.rows import OperationRows, RowChanges
from reconciler.operations.store.schema import POSTGRES_TYPES

#: Seconds to wait for the server when the URL (or PGCONNECT_TIMEOUT) does not say.
CONNECT_TIMEOUT = 10
FIX = (
    "check the host, port, database, user and password (in the URL, a PGPASSFILE or PGPASSWORD), "
    "or name another store with --state or RECONCILER_STATE"
)
_SQL = dialect(
    {"{order}": "seq", "{for_update}": "FOR UPDATE", "{data_json}": "CAST(data AS json)"},
    pyformat=True,
)

#: The rest of the one statement that saves an operation: the row written by the statement
#: named ``saved`` (:data:`UPSERT_OPERATION` or :data:`UPDATE_SEEN_OPERATION`), and only if it
#: wrote one, the stage and step rows given (as arrays by column) and those past the
#: operation's shape deleted. The version of the row written, or no row.
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
#: The operation's own row's values, typed where PostgreSQL cannot tell from a SELECT list.
_TYPED = {"created", "updated", "deadline", "lease_until"}


def _saving(sql: str) -> str:
    """The one statement saving an operation whose row ``sql`` writes."""
    written = _SQL(sql)
    for column in _TYPED:
        written = written.replace(f"%({column})s,", f"%({column})s::timestamptz,")
    return f"WITH saved AS ({written} RETURNING version){_SAVE_ROWS}"


_SAVE_ANY = _saving(UPSERT_OPERATION)
_SAVE_SEEN = _saving(UPDATE_SEEN_OPERATION)


class PostgresStore(OperationTables, RecordTables, RolloutTables, OutboxTables):
    """:class:`~reconciler.operations.store.contract.StateStore` in a PostgreSQL database."""

    TYPES = POSTGRES_TYPES

    def __init__(self, url: str) -> None:
        super().__init__()
        self.shown = mask_url_password(url)
        self._url = url
        self._conninfo = self._parse(url)
        self._closed = False
        self._db = self._connect()
        try:
            self.migrate()
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

    # -- the dialect -----------------------------------------------------------------------------

    @contextmanager
    def _in_transaction(self, read_only: bool) -> Iterator[Statements]:
        with self._lock, self._translated():
            db = self._live()
            with db.transaction(), db.cursor() as cursor:
                if read_only:  # several queries, one snapshot
                    cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                yield Statements(cursor.execute, cursor.executemany, _SQL)

    @contextmanager
    def transaction(self) -> Iterator[Statements]:
        """See :meth:`SqlBase.transaction`."""
        with self._in_transaction(read_only=False) as statements:
            yield statements

    @contextmanager
    def snapshot(self) -> Iterator[Statements]:
        """See :meth:`SqlBase.snapshot`: a read-only transaction at REPEATABLE READ."""
        with self._in_transaction(read_only=True) as statements:
            yield statements

    def query(self, sql: str, parameters: Parameters = ()) -> list[Any]:
        """See :meth:`SqlBase.query`: one statement reads one snapshot."""
        with self._lock, self._translated():
            return self._live().execute(_SQL(sql), parameters).fetchall()

    def serialise(self, statements: Statements, key: int, name: str | None = None) -> None:
        """See :meth:`SqlBase.serialise`: a transaction-scoped advisory lock."""
        if name is None:
            statements.run("SELECT pg_advisory_xact_lock(?)", (key,))
        else:
            statements.run("SELECT pg_advisory_xact_lock(?, hashtext(?))", (key, name))

    def time(self, moment: datetime | None) -> object:
        """Aware, in UTC (a naive one is taken as local time, as the SQLite store takes it)."""
        return moment.astimezone(UTC) if moment is not None else None

    def read_time(self, value: Any) -> datetime | None:
        """See :meth:`SqlBase.read_time`."""
        return value.astimezone(UTC) if value is not None else None

    def write_operation(self, save: Save) -> int | None:
        """See :meth:`OperationTables.write_operation`: in one statement (one round trip, no
        transaction of its own to open or commit)."""
        seen = save.seen[0] if save.seen is not None else None
        parameters = _save_parameters(save.rows, save.changes())
        parameters |= self.operation_values(save.operation) | fence_values(save.fence)
        sql = _SAVE_SEEN if seen is not None else _SAVE_ANY
        with self._lock, self._translated():
            found = self._live().execute(sql, parameters | {"seen": seen}).fetchone()
        return int(found["version"]) if found is not None else None


def _save_parameters(rows: OperationRows, changes: RowChanges) -> dict[str, object]:
    """``changes`` as arrays by column and the shape of ``rows`` (stages, steps in each) past
    which rows are deleted."""
    stages, steps = changes.stages, changes.steps
    counts = [0] * len(rows.stages)
    for index, _ in rows.steps:
        counts[index] += 1
    return {
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
