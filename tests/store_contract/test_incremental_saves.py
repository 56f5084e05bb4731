"""Saving an operation writes only what changed (StateStore.save, DESIGN.md O6), and stays right
when someone else wrote the operation in between: another store object on the same database (a
second replica), a claim, a takeover.

Runs against SQLite always and PostgreSQL when RECONCILER_TEST_POSTGRES is set (see
conftest.py). The rows a save writes are counted by triggers in the database itself.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import replace
from datetime import timedelta, timezone
from pathlib import Path

import psycopg
import pytest

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.head import Head
from reconciler.core.model import ModuleRef
from reconciler.errors import LostOwnershipError
from reconciler.operations.engine import Engine
from reconciler.operations.model import (
    Operation,
    OperationData,
    OperationState,
    StageRecord,
    StepRecord,
    StepState,
)
from reconciler.operations.runner import Runner
from reconciler.operations.store import OperationRows, SavedRows, SqliteStore
from tests.support.lifecycle_helpers import repo
from tests.support.store_backends import Backend
from tests.support.stored_operations import T0, start_step, three_stage_operation

_SQLITE_COUNTING = "".join(
    f"CREATE TRIGGER {table}_{event.lower()} AFTER {event} ON {table} "
    f"BEGIN INSERT INTO row_writes (tbl) VALUES ('{table}'); END;"
    for table in ("operations", "stages", "steps")
    for event in ("INSERT", "UPDATE", "DELETE")
)
_POSTGRES_COUNTING = """
    CREATE FUNCTION count_row_write() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN INSERT INTO row_writes (tbl) VALUES (TG_TABLE_NAME); RETURN NULL; END $$;
""" + "".join(
    f"CREATE TRIGGER {table}_writes AFTER INSERT OR UPDATE OR DELETE ON {table} "
    "FOR EACH ROW EXECUTE FUNCTION count_row_write();"
    for table in ("operations", "stages", "steps")
)


def _count_row_writes(backend: Backend) -> None:
    """Triggers that add a row to ``row_writes`` for each row written to an operation's tables."""
    backend.execute("CREATE TABLE row_writes (tbl TEXT NOT NULL)")
    backend.execute(_SQLITE_COUNTING if backend.name == "sqlite" else _POSTGRES_COUNTING)


def _row_writes(backend: Backend) -> dict[str, int]:
    """Rows written by table since the last call (which empties ``row_writes``)."""
    sql = "SELECT tbl, count(*) AS n FROM row_writes GROUP BY tbl"
    if backend.name == "sqlite":
        db = sqlite3.connect(backend.url.removeprefix("sqlite:///"))
        try:
            found = dict(db.execute(sql).fetchall())
            db.execute("DELETE FROM row_writes")
            db.commit()
        finally:
            db.close()
    else:
        with psycopg.connect(backend.url, autocommit=True) as pg:
            found = dict(pg.execute(sql).fetchall())
            pg.execute("DELETE FROM row_writes")
    return {str(table): int(count) for table, count in found.items()}


def _wrote_whole(writes: dict[str, int]) -> bool:
    """Whether every stage and step row of :func:`_operation` was written (a store may delete
    and insert them or update them in place)."""
    return writes["stages"] >= 3 and writes["steps"] >= 5


def _stored(backend: Backend, operation_id: str = "op1") -> Operation | None:
    """The operation as a store opened afresh reads it."""
    return backend.open().get(operation_id)


# -- what a save writes --------------------------------------------------------------------------


def test_a_save_after_one_step_changed_writes_that_step_and_the_operation_row(
    backend: Backend,
) -> None:
    store = backend.open()
    _count_row_writes(backend)
    operation = three_stage_operation()
    store.save(operation)
    assert _row_writes(backend) == {"operations": 1, "stages": 3, "steps": 5}

    start_step(operation, 1, 0)
    store.save(operation)

    assert _row_writes(backend) == {"operations": 1, "steps": 1}
    store.save(operation)  # nothing changed: the operation's row alone
    assert _row_writes(backend) == {"operations": 1}
    assert _stored(backend) == operation


def test_the_end_of_a_stage_writes_its_last_step_and_the_stage(backend: Backend) -> None:
    store = backend.open()
    operation = three_stage_operation()
    store.save(operation)
    _count_row_writes(backend)

    stage = operation.stages[1]
    for step in stage.steps:
        step.state, step.finished = StepState.DONE, T0
    stage.done, stage.finished = True, T0
    store.save(operation)

    assert _row_writes(backend) == {"operations": 1, "stages": 1, "steps": 2}
    assert _stored(backend) == operation


def test_an_operation_read_from_the_store_is_saved_by_its_changes(backend: Backend) -> None:
    """A store that read an operation (a resumed one, a replica's takeover) knows its rows."""
    backend.open().save(three_stage_operation())
    store = backend.open()
    loaded = store.get("op1")
    assert loaded is not None
    _count_row_writes(backend)

    start_step(loaded, 2, 0)
    store.save(loaded)

    assert _row_writes(backend) == {"operations": 1, "steps": 1}
    assert _stored(backend) == loaded


def test_stages_and_steps_no_longer_there_are_deleted_and_new_ones_written(
    backend: Backend,
) -> None:
    store = backend.open()
    operation = three_stage_operation()
    store.save(operation)

    operation.stages[2].steps.pop()  # a step gone
    operation.stages.pop(1)  # a whole stage gone: the one after it moves up
    operation.stages.append(StageRecord("finish", [StepRecord("Record_Status")]))
    store.save(operation)

    assert _stored(backend) == operation
    operation.stages = operation.stages[:1]
    store.save(operation)
    assert _stored(backend) == operation


# -- someone else wrote in between ---------------------------------------------------------------


def test_a_save_after_another_stores_save_is_refused_and_writes_nothing(
    backend: Backend,
) -> None:
    """Replica A saved the operation; replica B (another connection) saved it with another step
    changed; A's next save fails its version guard: refused, never written whole over B's rows."""
    mine, theirs = backend.open(), backend.open()
    operation = three_stage_operation()
    mine.save(operation)
    copy = theirs.get("op1")
    assert copy is not None
    start_step(copy, 2, 1, minutes=5)
    copy.stages[1].steps[0].message = "theirs"
    theirs.save(copy)
    _count_row_writes(backend)

    start_step(operation, 1, 0)
    with pytest.raises(LostOwnershipError, match="op1 not saved"):
        mine.save(operation)

    assert _row_writes(backend) == {}
    assert _stored(backend) == copy
    again = mine.get("op1")  # read afresh: its changes only again
    assert again is not None
    again.stages[1].steps[0].message = "mine"
    mine.save(again)
    assert _row_writes(backend) == {"operations": 1, "steps": 1}
    assert _stored(backend) == again


def test_a_claim_in_between_by_another_store_is_seen(backend: Backend) -> None:
    """A store that claims an operation while it knows an older version of it must not take
    the claimed version for the one it knew: its next save writes the whole operation."""
    mine, theirs = backend.open(), backend.open()
    operation = three_stage_operation()
    mine.save(operation)
    copy = theirs.get("op1")  # theirs knows this version
    assert copy is not None
    start_step(operation, 1, 0)
    mine.save(operation)  # a version theirs does not know

    claimed = theirs.claim("op1", "host-b:2", T0, T0 + timedelta(minutes=2), lambda _: False)
    assert claimed is None  # host-a:1 is dead: a takeover
    copy.state, copy.owner = OperationState.IN_PROGRESS, "host-b:2"
    start_step(copy, 2, 0, minutes=3)
    theirs.save(copy)

    assert _stored(backend) == copy


def test_a_claim_of_the_store_itself_keeps_the_rows_it_knows(backend: Backend) -> None:
    store = backend.open()
    operation = replace(three_stage_operation(), state=OperationState.PENDING, owner="")
    store.save(operation)
    _count_row_writes(backend)

    assert store.claim("op1", "host-a:1", T0, T0 + timedelta(minutes=2), lambda _: True) is None
    operation.state, operation.owner = OperationState.IN_PROGRESS, "host-a:1"
    operation.lease_until = T0 + timedelta(minutes=2)
    start_step(operation, 1, 0)
    store.save(operation)

    assert _row_writes(backend) == {"operations": 2, "steps": 1}  # the claim, then the save
    assert _stored(backend) == operation


def test_a_claim_in_between_by_another_store_then_my_save_is_refused(
    backend: Backend,
) -> None:
    mine, theirs = backend.open(), backend.open()
    operation = three_stage_operation()
    mine.save(operation)
    assert theirs.claim("op1", "host-b:2", T0, T0 + timedelta(minutes=2), lambda _: False) is None
    claimed = _stored(backend)
    _count_row_writes(backend)

    start_step(operation, 1, 1)
    with pytest.raises(LostOwnershipError):
        mine.save(operation)
    with pytest.raises(LostOwnershipError):  # forgotten: a whole write, refused by the owner
        mine.save(operation)

    assert _row_writes(backend) == {}
    assert _stored(backend) == claimed


# -- an operation of an older version, many of them, several threads ----------------------------


def test_an_operation_written_before_versions_were_kept_is_saved_by_its_changes(
    backend: Backend,
) -> None:
    backend.create_at_version(4)
    backend.execute(
        "INSERT INTO operations (id, runtime, type, state, created, deadline, owner) "
        "VALUES ('old1', 'rt', 'update', 'in progress', '2026-11-18T12:00:00+00:00', "
        "'2026-11-18T15:00:00+00:00', 'host-a:1');"
        "INSERT INTO stages (operation_id, position, name) VALUES ('old1', 0, 'plan');"
        "INSERT INTO steps (operation_id, stage_position, position, name, state) "
        "VALUES ('old1', 0, 0, 'Plan_Changes', 'pending');"
        "INSERT INTO steps (operation_id, stage_position, position, name, state) "
        "VALUES ('old1', 0, 1, 'Check', 'pending')"
    )
    store = backend.open()
    old = store.get("old1")
    assert old is not None
    _count_row_writes(backend)

    start_step(old, 0, 1)
    store.save(old)

    assert _row_writes(backend) == {"operations": 1, "steps": 1}
    assert _stored(backend, "old1") == old


def test_threads_saving_operations_through_one_store_leave_each_as_saved(
    backend: Backend,
) -> None:
    store = backend.open()
    operations = [three_stage_operation(f"op{n}", runtime=f"rt{n}") for n in range(6)]
    start = threading.Barrier(len(operations))

    def work(operation: Operation) -> None:
        start.wait()
        for round_ in range(5):
            start_step(operation, 1 + round_ % 2, round_ % 2, minutes=round_)
            operation.message = f"round {round_}"
            store.save(operation)

    threads = [threading.Thread(target=work, args=(o,)) for o in operations]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    for operation in operations:
        assert _stored(backend, operation.id) == operation


def test_a_worker_save_during_a_status_read_stands_and_its_next_save_goes_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon's start race: ``/status`` (an HTTP thread) reads the runtime's
    unfinished operation while a worker runs it. SQLite reads the operation's row, then its
    stages and steps, each under the store's lock but not all under one: a worker's save could
    land before the read remembered the version it read, which then took the memo back; the
    worker's next save, checked against that older version, was refused as another owner's
    (LostOwnershipError) though nobody else wrote. Driven in order: the worker's save runs
    right before the read remembers its version."""
    store = SqliteStore(tmp_path / "state.db")
    worker = three_stage_operation()
    store.save(worker)  # version 1
    saved = store._saved  # the seam where the two threads meet
    remember_read = saved.loaded

    def worker_saves_first(operation: Operation, version: int) -> None:
        monkeypatch.setattr(saved, "loaded", remember_read)
        start_step(worker, 1, 0)
        store.save(worker)  # version 2, while the read of version 1 is under way
        remember_read(operation, version)

    monkeypatch.setattr(saved, "loaded", worker_saves_first)
    read = store.unfinished("rt")  # /status

    assert read is not None
    start_step(worker, 1, 1, minutes=2)
    store.save(worker)  # was: LostOwnershipError, "operation op1 not saved"
    assert SqliteStore(tmp_path / "state.db").get("op1") == worker


def test_a_read_of_an_older_version_never_takes_the_known_rows_back() -> None:
    saved = SavedRows()
    operation = three_stage_operation()
    saved.remember(operation, 3, OperationRows.of(operation))
    older = replace(operation, message="as read before the save")

    saved.loaded(older, 2)
    assert saved.seen("op1") == (3, OperationRows.of(operation))
    saved.loaded(older, 4)  # a newer version, written elsewhere: known from now on
    assert saved.seen("op1") == (4, OperationRows.of(older))


def test_finished_operations_are_forgotten_and_the_rest_bounded() -> None:
    saved = SavedRows(limit=2)
    operations = [three_stage_operation(f"op{n}") for n in range(3)]
    for operation in operations:
        saved.remember(operation, 1, OperationRows.of(operation))

    assert len(saved) == 2
    assert saved.seen("op0") is None  # the least recently used went first
    finished = replace(operations[2], state=OperationState.SUCCEEDED, data=OperationData())
    saved.remember(finished, 2, OperationRows.of(finished))
    assert saved.seen("op2") is None
    assert saved.seen("op1") is not None


def test_a_claim_forgets_rows_known_of_an_older_version() -> None:
    saved = SavedRows()
    operation = three_stage_operation()
    saved.remember(operation, 3, OperationRows.of(operation))

    saved.claimed("op1", 4)
    assert saved.seen("op1") == (4, OperationRows.of(operation))
    saved.claimed("op1", 6)  # someone else wrote version 5
    assert saved.seen("op1") is None


def test_the_same_moment_in_another_zone_is_no_change() -> None:
    operation = three_stage_operation()
    before = OperationRows.of(operation)
    operation.stages[0].finished = T0.astimezone(timezone(timedelta(hours=1)))

    assert OperationRows.of(operation).changes(before).stages == []


# -- a run that changes nothing ------------------------------------------------------------------


def test_an_update_that_changes_nothing_writes_its_operation_row_four_times(
    backend: Backend,
) -> None:
    """A resync finding nothing to do writes its operation's row at its creation, its
    Starting step's start, its claim and its end (not at each step's start and end, 23
    times), and every step once more at most; a store opened afresh reads it whole, and the
    runtime's record says when it ran and on which commit."""
    store = backend.open()
    cluster = InMemoryCluster()
    clock = [T0]

    def run(commit: str) -> Operation:
        engine = Engine(store, clock=lambda: clock[0], plugins=[])
        config = repo(ModuleRef("widget"))
        runner = Runner(store, engine, config, lambda a, n: cluster, lambda: clock[0], Head(commit))
        return runner.run(runner.operation_for("rt")).operation

    assert run("c1").state is OperationState.SUCCEEDED
    _count_row_writes(backend)
    clock[0] += timedelta(minutes=5)

    operation = run("c2")

    assert operation.message == "no change"
    writes = _row_writes(backend)
    steps = sum(len(stage.steps) for stage in operation.stages)
    assert writes["operations"] == 4
    assert writes["steps"] <= 2 * steps + 1  # inserted, then each ended (Starting's start too)
    assert _stored(backend, operation.id) == operation
    record = backend.open().runtime("rt")
    assert record is not None
    assert (record.updated, record.commit) == (clock[0], Head("c2"))
