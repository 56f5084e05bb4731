"""A SQLite store written by the first version of the schema opens, migrates to the current one
and reads back what that version wrote: its operations' data in the first JSON form (modules as
a list of statuses, versions as ``from``/``to``, a failure and a module error kept as text) and
its runtimes. The file's schema is the first version's as it was written then, not rebuilt from
today's migrations."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

from reconciler.cluster.api import NO_IDENTITY, ClusterIdentity
from reconciler.core.brake import Limits
from reconciler.core.status import ModuleError, ModuleState, Reason
from reconciler.errors import PermanentError
from reconciler.operations.model import OperationState
from reconciler.operations.store import SCHEMA_VERSION, SqliteStore
from reconciler.operations.store.schema import SQLITE_TYPES, script_up_to

T0 = datetime(2026, 11, 18, 12, 0, tzinfo=UTC)
SNAPSHOT = ClusterIdentity.parse("snapshot /srv/clusters")

#: The schema of version 1, as the first reconciler wrote it.
VERSION_1 = """
CREATE TABLE schema_version (version INTEGER NOT NULL);
CREATE TABLE operations (
    id TEXT PRIMARY KEY, runtime TEXT NOT NULL, type TEXT NOT NULL, state TEXT NOT NULL,
    created TEXT NOT NULL, updated TEXT, deadline TEXT NOT NULL,
    commit_id TEXT NOT NULL DEFAULT '', message TEXT NOT NULL DEFAULT '',
    owner TEXT NOT NULL DEFAULT '', lease_until TEXT, retrigger_of TEXT NOT NULL DEFAULT '',
    data TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX operations_by_runtime ON operations (runtime, created);
CREATE TABLE stages (
    operation_id TEXT NOT NULL REFERENCES operations (id), position INTEGER NOT NULL,
    name TEXT NOT NULL, done INTEGER NOT NULL DEFAULT 0, finished TEXT,
    PRIMARY KEY (operation_id, position)
);
CREATE TABLE steps (
    operation_id TEXT NOT NULL REFERENCES operations (id), stage_position INTEGER NOT NULL,
    position INTEGER NOT NULL, name TEXT NOT NULL, state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0, first_started TEXT, started TEXT, finished TEXT,
    retry_at TEXT, message TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (operation_id, stage_position, position)
);
CREATE TABLE runtimes (
    runtime TEXT PRIMARY KEY, state TEXT NOT NULL, reason TEXT NOT NULL, message TEXT NOT NULL,
    commit_id TEXT NOT NULL, updated TEXT NOT NULL, modules TEXT NOT NULL DEFAULT '[]'
);
INSERT INTO schema_version (version) VALUES (1);
"""

DATA = {
    "plan": [{"module": "widget", "action": "install", "reason": "new", "to": "1.0.0"}],
    "modules": [
        {"module": "widget", "state": "Error", "reason": "Failed", "message": "no quota"},
        {"module": "gadget", "state": "Error", "message": "quota", "error": "quota exceeded"},
    ],
    "failure": "step Apply_Modules: no quota",
}


def _write_version_1_file(path: Path) -> None:
    db = sqlite3.connect(path)
    try:
        db.executescript(VERSION_1)
        db.execute(
            "INSERT INTO operations (id, runtime, type, state, created, deadline, message, data) "
            "VALUES ('abc1', 'rt', 'provision', 'failed', ?, ?, 'step failed', ?)",
            (T0.isoformat(), (T0 + timedelta(hours=2)).isoformat(), json.dumps(DATA)),
        )
        db.execute("INSERT INTO stages VALUES ('abc1', 0, 'apply', 1, ?)", (T0.isoformat(),))
        db.execute(
            "INSERT INTO steps (operation_id, stage_position, position, name, state, attempts,"
            " message) VALUES ('abc1', 0, 0, 'Apply_Modules', 'failed', 1, 'no quota')"
        )
        db.execute(
            "INSERT INTO runtimes VALUES ('rt', 'Error', 'Failed', 'no quota', 'c1', ?, ?)",
            (T0.isoformat(), json.dumps(DATA["modules"])),
        )
        db.commit()
    finally:
        db.close()


def test_a_version_1_file_opens_migrated_and_reads_back_what_it_kept(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    _write_version_1_file(path)

    store = SqliteStore(path)

    assert store.schema_version() == SCHEMA_VERSION
    operation = store.get("abc1")
    assert operation is not None
    assert (operation.state, operation.created) == (OperationState.FAILED, T0)
    assert [s.name for s in operation.stages[0].steps] == ["Apply_Modules"]
    assert operation.data.plan[0].to_version == "1.0.0"
    widget, gadget = operation.data.applied.modules
    assert widget.error == ModuleError(PermanentError, "no quota")  # its reason said Failed
    assert gadget.error == ModuleError(PermanentError, "quota exceeded")  # kept as text
    failure = operation.data.failure
    assert failure is not None
    assert (failure.reason, failure.error) == (
        Reason.STEP_FAILED,
        ModuleError(PermanentError, "step Apply_Modules: no quota"),
    )
    record = store.runtime("rt")
    assert record is not None
    assert (record.state, record.access) == (ModuleState.ERROR, NO_IDENTITY)
    assert [m.error for m in record.modules] == [widget.error, gadget.error]


def test_a_version_1_file_takes_every_later_write(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    _write_version_1_file(path)
    store = SqliteStore(path)

    store.record_access("rt", SNAPSHOT)  # version 2
    store.record_limits(Limits(3, allow=False), T0)  # version 6
    member = store.heartbeat("m1", T0, timedelta(seconds=30))  # version 4
    fenced = store.fence("m1", member.epoch, T0 + timedelta(minutes=1))  # version 7

    again = SqliteStore(path)
    record = again.runtime("rt")
    assert record is not None
    assert record.access == SNAPSHOT
    assert again.limits_in_force() == Limits(3, allow=False)
    assert fenced
    assert [m.fenced for m in again.members()] == [True]


def test_the_migrations_rebuild_the_version_1_tables(tmp_path: Path) -> None:
    frozen, rebuilt = tmp_path / "frozen.db", tmp_path / "rebuilt.db"
    _write_version_1_file(frozen)
    db = sqlite3.connect(rebuilt)
    db.executescript(";".join(script_up_to(1, SQLITE_TYPES)))
    db.close()

    def columns(path: Path) -> dict[str, list[tuple[str, str]]]:
        db = sqlite3.connect(path)
        try:
            tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
            return {
                t: [(c[1], c[2]) for c in db.execute(f"PRAGMA table_info({t})")]
                for t in tables
                if t != "schema_version"
            }
        finally:
            db.close()

    assert columns(rebuilt) == columns(frozen)
