"""The state store's schema: its versions as one ordered, declarative list of migrations.

Each :class:`Migration` is the statements that bring a database from the version before to its
own, written once for both databases with ``$``-named column types (:class:`ColumnTypes`) that
each dialect fills in: SQLite keeps times as ISO text and flags as integers, PostgreSQL as
``timestamptz`` and ``boolean``, with a ``seq`` column standing for SQLite's rowid. A store
runs the migrations past its database's version in one transaction
(:meth:`reconciler.operations.store.base.SqlBase.migrate`); there is no migration code
besides this list. Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from string import Template


@dataclass(frozen=True, slots=True)
class ColumnTypes:
    """What a dialect calls the column types the migrations name."""

    time: str
    flag: str
    false: str
    big: str
    #: The column numbering the rows of a table in insertion order (empty where the database
    #: has one of its own, as SQLite's rowid).
    seq: str


SQLITE_TYPES = ColumnTypes(time="TEXT", flag="INTEGER", false="0", big="INTEGER", seq="")
POSTGRES_TYPES = ColumnTypes(
    time="TIMESTAMPTZ", flag="BOOLEAN", false="FALSE", big="BIGINT", seq=",\n        seq BIGSERIAL"
)


@dataclass(frozen=True, slots=True)
class Migration:
    """The statements that make schema ``version`` of the one before."""

    version: int
    statements: tuple[str, ...]

    def for_types(self, types: ColumnTypes) -> list[str]:
        """The statements in a dialect's column types."""
        names = {
            "time": types.time,
            "flag": types.flag,
            "false": types.false,
            "big": types.big,
            "seq": types.seq,
        }
        return [Template(statement).substitute(names) for statement in self.statements]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        (
            """CREATE TABLE operations (
        id TEXT PRIMARY KEY,
        runtime TEXT NOT NULL,
        type TEXT NOT NULL,
        state TEXT NOT NULL,
        created $time NOT NULL,
        updated $time,
        deadline $time NOT NULL,
        commit_id TEXT NOT NULL DEFAULT '',
        message TEXT NOT NULL DEFAULT '',
        owner TEXT NOT NULL DEFAULT '',
        lease_until $time,
        retrigger_of TEXT NOT NULL DEFAULT '',
        data TEXT NOT NULL DEFAULT '{}'$seq
    )""",
            "CREATE INDEX operations_by_runtime ON operations (runtime, created)",
            """CREATE TABLE stages (
        operation_id TEXT NOT NULL REFERENCES operations (id),
        position INTEGER NOT NULL,
        name TEXT NOT NULL,
        done $flag NOT NULL DEFAULT $false,
        finished $time,
        PRIMARY KEY (operation_id, position)
    )""",
            """CREATE TABLE steps (
        operation_id TEXT NOT NULL REFERENCES operations (id),
        stage_position INTEGER NOT NULL,
        position INTEGER NOT NULL,
        name TEXT NOT NULL,
        state TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        first_started $time,
        started $time,
        finished $time,
        retry_at $time,
        message TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (operation_id, stage_position, position)
    )""",
            """CREATE TABLE runtimes (
        runtime TEXT PRIMARY KEY,
        state TEXT NOT NULL,
        reason TEXT NOT NULL,
        message TEXT NOT NULL,
        commit_id TEXT NOT NULL,
        updated $time NOT NULL,
        modules TEXT NOT NULL DEFAULT '[]'
    )""",
        ),
    ),
    Migration(
        2,
        (
            "ALTER TABLE runtimes ADD COLUMN access TEXT NOT NULL DEFAULT ''",
            """CREATE TABLE commits (
        commit_id TEXT PRIMARY KEY,
        verdict TEXT NOT NULL,
        decided $time NOT NULL,
        message TEXT NOT NULL DEFAULT '',
        detail TEXT NOT NULL DEFAULT '{}',
        attempts INTEGER NOT NULL DEFAULT 0$seq
    )""",
        ),
    ),
    Migration(
        3,
        (
            """CREATE TABLE suspensions (
        runtime TEXT PRIMARY KEY,
        since $time NOT NULL,
        reason TEXT NOT NULL DEFAULT ''
    )""",
        ),
    ),
    Migration(
        4,
        (
            """CREATE TABLE members (
        name TEXT PRIMARY KEY,
        epoch INTEGER NOT NULL,
        heartbeat $time NOT NULL,
        started $time NOT NULL
    )""",
        ),
    ),
    Migration(5, ("ALTER TABLE operations ADD COLUMN version $big NOT NULL DEFAULT 0",)),
    Migration(
        6,
        (
            """CREATE TABLE brake_limits (
        scope TEXT PRIMARY KEY,
        max_deletions INTEGER NOT NULL,
        allow $flag NOT NULL,
        recorded $time NOT NULL
    )""",
        ),
    ),
    Migration(7, ("ALTER TABLE members ADD COLUMN fenced_epoch INTEGER NOT NULL DEFAULT 0",)),
    Migration(
        8,
        (
            """CREATE TABLE rollouts (
        id TEXT PRIMARY KEY,
        commit_id TEXT NOT NULL,
        state TEXT NOT NULL,
        created $time NOT NULL,
        updated $time NOT NULL,
        version $big NOT NULL DEFAULT 0,
        data TEXT NOT NULL DEFAULT '{}'$seq
    )""",
        ),
    ),
    Migration(
        9,
        (
            """CREATE TABLE notifications (
        id TEXT PRIMARY KEY,
        state TEXT NOT NULL,
        created $time NOT NULL,
        owner TEXT NOT NULL DEFAULT '',
        lease_until $time,
        finished $time,
        data TEXT NOT NULL$seq
    )""",
            "CREATE INDEX notifications_by_state ON notifications (state)",
        ),
    ),
    Migration(
        10,
        (
            """CREATE TABLE capabilities (
        runtime TEXT PRIMARY KEY,
        kube_version TEXT NOT NULL,
        api_versions TEXT NOT NULL,
        recorded $time NOT NULL
    )""",
        ),
    ),
)

#: The version the migrations lead to.
SCHEMA_VERSION = MIGRATIONS[-1].version

#: The tables of the schema (and its version's).
TABLES = frozenset(
    {"schema_version"}
    | {
        name
        for migration in MIGRATIONS
        for statement in migration.statements
        for name in re.findall(r"CREATE TABLE (\w+)", statement)
    }
)


def migrations_after(version: int) -> list[Migration]:
    """The migrations a database at ``version`` runs, in order."""
    return [m for m in MIGRATIONS if m.version > version]


def script_up_to(version: int, types: ColumnTypes) -> list[str]:
    """Every statement of the schema at ``version`` in ``types`` (tests build old databases
    with it)."""
    return [s for m in MIGRATIONS if m.version <= version for s in m.for_types(types)]
