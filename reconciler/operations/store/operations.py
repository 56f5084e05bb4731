"""Operations in SQL, once for both databases: saving an operation with its stages and steps,
reading them back, claiming a runtime for one (O3) and pruning the finished ones.

Saving writes the operation's row and only the stage and step rows that changed since the store
last wrote or read it, guarded by the version of the operation's row that every write moves on
(:class:`~reconciler.operations.store.rows.SavedRows`): a store that finds it moved by someone
else (another replica, a claim) refuses the save
(:class:`~reconciler.errors.LostOwnershipError`); it never writes the whole operation over the
other's. A dialect may write an operation its own way (:meth:`OperationTables.write_operation`:
PostgreSQL in one statement).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from reconciler.core.head import Head, head_text
from reconciler.errors import LostOwnershipError, NotFoundError
from reconciler.operations.model import (
    NO_CHANGE,
    FenceToken,
    Operation,
    OperationState,
    OperationType,
    Retention,
    StageRecord,
    StepRecord,
    StepState,
)
from reconciler.operations.store.base import (
    CLAIM_LOCK,
    FENCE_GUARD,
    SqlBase,
    Statements,
    fence_values,
    fenced,
    marks,
    refused,
)
from reconciler.operations.store.codec import data_text, decode_data
from reconciler.operations.store.rows import OperationRows, RowChanges

#: The whole operation, inserted or replacing the stored one if that one has the same owner
#: (a claim by another owner in between is never overwritten), under the fence.
UPSERT_OPERATION = f"""
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
#: The operation's row, if it is still at the version this store saw and its owner's, under
#: the fence.
UPDATE_SEEN_OPERATION = f"""
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
#: Operations :meth:`OperationTables.prune` removes first: one that succeeded and changed
#: nothing when the next of its runtime did too (a run of resyncs without drift is kept as its
#: newest). ``{order}``: the dialect's insertion order (ties of ``created``).
MERGED_OPERATIONS = """
    SELECT id FROM (
        SELECT id, state, message,
               LEAD(state) OVER (PARTITION BY runtime ORDER BY created, {order}) AS next_state,
               LEAD(message) OVER (PARTITION BY runtime ORDER BY created, {order}) AS next_message
        FROM operations
    ) paired
    WHERE state = ? AND message = ? AND next_state = ? AND next_message = ?
    LIMIT ?
"""
#: Then the finished ones beyond the newest ``keep_per_runtime`` of their runtime, but for a
#: failure younger than ``keep_failures_for``.
EXPIRED_OPERATIONS = """
    SELECT id FROM (
        SELECT id, state, created,
               ROW_NUMBER() OVER (PARTITION BY runtime ORDER BY created DESC, {order} DESC)
                   AS newer
        FROM operations
    ) ranked
    WHERE newer > ? AND state IN (?, ?) AND (state <> ? OR created < ?)
    LIMIT ?
"""
#: What :meth:`OperationTables.prune` would remove, counted by runtime in one read: those
#: :data:`MERGED_OPERATIONS` selects, then those :data:`EXPIRED_OPERATIONS` selects of the rest
#: (removing some of either set never changes which others it holds, so the batches of a prune
#: remove exactly these).
PRUNABLE_BY_RUNTIME = """
    WITH paired AS (
        SELECT id, runtime, state, message, created, {order} AS inserted,
               LEAD(state) OVER (PARTITION BY runtime ORDER BY created, {order}) AS next_state,
               LEAD(message) OVER (PARTITION BY runtime ORDER BY created, {order}) AS next_message
        FROM operations
    ), flagged AS (
        SELECT runtime, state, created, inserted,
               CASE WHEN state = ? AND message = ? AND next_state = ? AND next_message = ?
                    THEN 1 ELSE 0 END AS merged
        FROM paired
    ), ranked AS (
        SELECT runtime, state, created,
               ROW_NUMBER() OVER (PARTITION BY runtime ORDER BY created DESC, inserted DESC)
                   AS newer
        FROM flagged WHERE merged = 0
    )
    SELECT runtime, count(*) AS operations FROM (
        SELECT runtime FROM flagged WHERE merged = 1
        UNION ALL
        SELECT runtime FROM ranked
        WHERE newer > ? AND state IN (?, ?) AND (state <> ? OR created < ?)
    ) gone
    GROUP BY runtime ORDER BY runtime
"""
#: Operations removed per transaction, so that a first prune of a big store never holds the
#: write lock for long.
PRUNE_BATCH = 500
_UNFINISHED = (str(OperationState.PENDING), str(OperationState.IN_PROGRESS))


@dataclass(frozen=True, slots=True)
class Save:
    """A save of ``operation`` whose rows are now ``rows``: ``seen``, the version and rows this
    store last wrote or read of it (``None``: nothing known, every row is written), under
    ``fence``."""

    operation: Operation
    rows: OperationRows
    seen: tuple[int, OperationRows] | None
    fence: FenceToken | None

    def changes(self) -> RowChanges:
        """The rows to write: those changed since the rows seen, or all of them."""
        return self.rows.changes(self.seen[1]) if self.seen is not None else self.rows.everything()


class OperationTables(SqlBase):
    """:class:`~reconciler.operations.store.contract.OperationLedger`, the operations part of
    :class:`~reconciler.operations.store.contract.StateStore`."""

    def save(self, operation: Operation, fence: FenceToken | None = None) -> None:
        """See :class:`StateStore`: only the rows that changed since this store last wrote or
        read the operation, while nobody else wrote it in between; all of them when this store
        knows nothing of it. Refused when someone else wrote it since, or ``fence`` no longer
        holds: nothing is written."""
        rows = OperationRows.of(operation)
        with self._lock:
            seen = self._saved.seen(operation.id)
            try:
                version = self.write_operation(Save(operation, rows, seen, fence))
            except BaseException:
                self._saved.forget(operation.id)
                raise
            if version is None:
                self._saved.forget(operation.id)
                raise refused(operation, fence)
            self._saved.remember(operation, version, rows)

    def write_operation(self, save: Save) -> int | None:
        """Write the operation's row and, if that was written, its rows: the changes since
        the rows seen (only if its row is still at that version), or all of them; under the
        fence. The new version of its row, or ``None`` (nothing written)."""
        values = self.operation_values(save.operation) | fence_values(save.fence)
        operation_id = save.operation.id
        with self.transaction() as statements:
            if save.seen is not None:
                seen = {"seen": save.seen[0]}
                if statements.run(UPDATE_SEEN_OPERATION, values | seen).rowcount == 0:
                    return None
                version = save.seen[0] + 1
            else:
                if statements.run(UPSERT_OPERATION, values).rowcount == 0:
                    return None
                for table in ("steps", "stages"):
                    sql = f"DELETE FROM {table} WHERE operation_id = ?"  # noqa: S608 (a constant)
                    statements.run(sql, (operation_id,))
                sql = "SELECT version FROM operations WHERE id = ?"
                version = int(statements.run(sql, (operation_id,)).fetchone()["version"])
            self._write_rows(statements, operation_id, save.changes())
            return version

    def operation_values(self, operation: Operation) -> dict[str, object]:
        """The operation's own row, by column."""
        return {
            "id": operation.id,
            "runtime": operation.runtime,
            "type": str(operation.type),
            "state": str(operation.state),
            "created": self.time(operation.created),
            "updated": self.time(operation.updated),
            "deadline": self.time(operation.deadline),
            "commit_id": head_text(operation.commit),
            "message": operation.message,
            "owner": operation.owner,
            "lease_until": self.time(operation.lease_until),
            "retrigger_of": operation.retrigger_of,
            "data": data_text(operation),
        }

    def _write_rows(self, statements: Statements, operation_id: str, changes: RowChanges) -> None:
        """Delete the stage and step rows gone, upsert those new or different."""
        statements.run_many(
            "DELETE FROM steps WHERE operation_id = ? AND stage_position = ? AND position = ?",
            [(operation_id, *key) for key in changes.gone_steps],
        )
        statements.run_many(
            "DELETE FROM stages WHERE operation_id = ? AND position = ?",
            [(operation_id, key) for key in changes.gone_stages],
        )
        statements.run_many(
            _UPSERT_STAGE,
            [
                (operation_id, key, name, done, self.time(finished))
                for key, (name, done, finished) in changes.stages
            ],
        )
        statements.run_many(
            _UPSERT_STEP,
            [
                (operation_id, *key, name, state, attempts, *map(self.time, times), message)
                for key, (name, state, attempts, *times, message) in changes.steps
            ],
        )

    def get(self, operation_id: str) -> Operation | None:
        """See :class:`StateStore`."""
        with self.snapshot() as statements:
            rows = statements.run(  # a prefix compared as text: % and _ are no wildcards here
                "SELECT * FROM operations WHERE substr(id, 1, CAST(? AS INTEGER)) = ? "
                "ORDER BY created, {order} LIMIT 2",
                (len(operation_id), operation_id.lower()),  # ids are lower-case hex
            ).fetchall()
            return self._loaded(statements, rows)[0] if len(rows) == 1 else None

    def operations(self, runtime: str | None = None, limit: int = 50) -> list[Operation]:
        """See :class:`StateStore`."""
        with self.snapshot() as statements:
            if runtime is None:
                rows = statements.run(
                    "SELECT * FROM operations ORDER BY created DESC, {order} DESC LIMIT ?",
                    (limit,),
                ).fetchall()
            else:
                rows = statements.run(
                    "SELECT * FROM operations WHERE runtime = ? "
                    "ORDER BY created DESC, {order} DESC LIMIT ?",
                    (runtime, limit),
                ).fetchall()
            return self._loaded(statements, rows)

    def unfinished(self, runtime: str) -> Operation | None:
        """See :class:`StateStore`."""
        with self.snapshot() as statements:
            rows = statements.run(
                "SELECT * FROM operations WHERE runtime = ? AND state IN (?, ?) "
                "ORDER BY created, {order} LIMIT 1",
                (runtime, *_UNFINISHED),
            ).fetchall()
            return self._loaded(statements, rows)[0] if rows else None

    def unfinished_all(self) -> dict[str, Operation]:
        """See :class:`StateStore`."""
        with self.snapshot() as statements:
            rows = statements.run(
                "SELECT * FROM operations WHERE state IN (?, ?) ORDER BY created, {order}",
                _UNFINISHED,
            ).fetchall()
            found: dict[str, Operation] = {}
            for operation in self._loaded(statements, rows):
                found.setdefault(operation.runtime, operation)
            return found

    def _loaded(self, statements: Statements, rows: list[Any]) -> list[Operation]:
        """The operations of ``rows`` with their stages and steps (two more statements for all
        of them), remembered with the version read: rows read later at a newer version fail the
        check at the next save (versions only grow), never taken for the version read."""
        ids = [row["id"] for row in rows]
        if not ids:
            return []
        steps: dict[tuple[str, int], list[StepRecord]] = defaultdict(list)
        for step in statements.run(
            f"SELECT * FROM steps WHERE operation_id IN ({marks(len(ids))}) "  # noqa: S608
            "ORDER BY operation_id, stage_position, position",
            ids,
        ).fetchall():
            steps[(step["operation_id"], step["stage_position"])].append(self._step(step))
        stages: dict[str, list[StageRecord]] = defaultdict(list)
        for stage in statements.run(
            f"SELECT * FROM stages WHERE operation_id IN ({marks(len(ids))}) "  # noqa: S608
            "ORDER BY operation_id, position",
            ids,
        ).fetchall():
            key = (stage["operation_id"], stage["position"])
            done, finished = bool(stage["done"]), self.read_time(stage["finished"])
            stages[stage["operation_id"]].append(
                StageRecord(stage["name"], steps[key], done, finished)
            )
        operations = [self._operation(row, stages[row["id"]]) for row in rows]
        for row, operation in zip(rows, operations, strict=True):
            self._saved.loaded(operation, int(row["version"]))
        return operations

    def _operation(self, row: Any, stages: list[StageRecord]) -> Operation:
        return Operation(
            id=row["id"],
            runtime=row["runtime"],
            type=OperationType(row["type"]),
            state=OperationState(row["state"]),
            created=self.read_stored_time(row["created"]),
            deadline=self.read_stored_time(row["deadline"]),
            stages=stages,
            commit=Head.parse(row["commit_id"]),
            message=row["message"],
            updated=self.read_time(row["updated"]),
            owner=row["owner"],
            lease_until=self.read_time(row["lease_until"]),
            retrigger_of=row["retrigger_of"],
            data=decode_data(row["data"]),
        )

    def _step(self, row: Any) -> StepRecord:
        return StepRecord(
            name=row["name"],
            state=StepState(row["state"]),
            attempts=row["attempts"],
            first_started=self.read_time(row["first_started"]),
            started=self.read_time(row["started"]),
            finished=self.read_time(row["finished"]),
            retry_at=self.read_time(row["retry_at"]),
            message=row["message"],
        )

    def claim(
        self,
        operation_id: str,
        owner: str,
        now: datetime,
        lease_until: datetime,
        alive: Callable[[str], bool],
        fence: FenceToken | None = None,
    ) -> str | None:
        """See :class:`StateStore`: in one transaction, holding the runtime's lock so that a
        second claimer reads the first one's result. The claim moves the operation's version
        on, remembered once it is committed."""
        with self._lock:
            with self.transaction() as statements:
                holder = self._live_holder(statements, operation_id, owner, now, alive)
                if holder is not None:
                    return holder
                claimed = statements.run(
                    "UPDATE operations SET state = :state, owner = :owner, lease_until = :lease, "  # noqa: S608 (a constant)
                    f"updated = :now, version = version + 1 WHERE id = :id AND {FENCE_GUARD} "
                    "RETURNING version",
                    {
                        "state": str(OperationState.IN_PROGRESS),
                        **{"owner": owner, "id": operation_id},
                        **{"lease": self.time(lease_until), "now": self.time(now)},
                        **fence_values(fence),
                    },
                ).fetchall()
            if not claimed:  # its row was read: the fence refused it
                raise LostOwnershipError(f"operation {operation_id} not claimed: {fenced(fence)}")
            self._saved.claimed(operation_id, int(claimed[0]["version"]))
        return None

    def _live_holder(
        self,
        statements: Statements,
        operation_id: str,
        owner: str,
        now: datetime,
        alive: Callable[[str], bool],
    ) -> str | None:
        """Who else holds the runtime of the operation in progress, alive and within its lease
        (in words), with the runtime's lock held from here to the end of the transaction."""
        row = statements.run("SELECT runtime FROM operations WHERE id = ?", (operation_id,))
        found = row.fetchone()
        if found is None:
            raise NotFoundError(f"no operation {operation_id} in the state store")
        self.serialise(statements, CLAIM_LOCK, found["runtime"])
        holders = statements.run(
            "SELECT id, owner, lease_until FROM operations WHERE runtime = ? AND state = ? "
            "ORDER BY created, {order}",
            (found["runtime"], str(OperationState.IN_PROGRESS)),
        ).fetchall()
        for holder in holders:
            lease = self.read_time(holder["lease_until"])
            if holder["owner"] in (owner, ""):
                continue
            if lease is not None and lease > now and alive(holder["owner"]):
                return f"operation {holder['id']} of {holder['owner']}"
        return None

    def prune(
        self,
        retention: Retention,
        now: datetime,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """See :class:`StateStore`: in batches of :data:`PRUNE_BATCH`, one transaction each
        (``progress`` is told the count so far after each)."""
        removed, cutoff = 0, self.time(now - retention.keep_failures_for)
        for sql, parameters in _prune_passes(retention, cutoff):
            while batch := self._remove(sql, parameters):
                removed += batch
                if progress is not None:
                    progress(removed)
        return removed

    def prunable(self, retention: Retention, now: datetime) -> dict[str, int]:
        """See :class:`StateStore`: one read, nothing removed."""
        passes = _prune_passes(retention, self.time(now - retention.keep_failures_for))
        merged, expired = (parameters[:-1] for _, parameters in passes)  # without the batch
        rows = self.query(PRUNABLE_BY_RUNTIME, merged + expired)
        return {row["runtime"]: int(row["operations"]) for row in rows}

    def _remove(self, sql: str, parameters: tuple[object, ...]) -> int:
        """Remove the operations ``sql`` selects, with their stages and steps; how many."""
        with self._lock:
            with self.transaction() as statements:
                ids = [row["id"] for row in statements.run(sql, parameters).fetchall()]
                if ids:
                    for table, column in (
                        ("steps", "operation_id"),
                        ("stages", "operation_id"),
                        ("operations", "id"),
                    ):
                        statements.run(
                            f"DELETE FROM {table} WHERE {column} IN ({marks(len(ids))})",  # noqa: S608
                            ids,
                        )
            for operation_id in ids:
                self._saved.forget(operation_id)
        return len(ids)


def _prune_passes(
    retention: Retention, cutoff: object
) -> tuple[tuple[str, tuple[object, ...]], ...]:
    """The statements of a prune's two passes, in order, with their parameters: the merged
    operations, then the expired ones (failures created before ``cutoff``)."""
    done, failed = str(OperationState.SUCCEEDED), str(OperationState.FAILED)
    return (
        (MERGED_OPERATIONS, (done, NO_CHANGE, done, NO_CHANGE, PRUNE_BATCH)),
        (
            EXPIRED_OPERATIONS,
            (retention.keep_per_runtime, done, failed, failed, cutoff, PRUNE_BATCH),
        ),
    )
