"""The row-diff cache: what a store last wrote or read of each unfinished operation.

A save writes the operation's row only if it is still at the version the store saw
(optimistic concurrency; every write of an operation, a claim too, moves the version on), and
then only the stage and step rows that differ from those the store saw (:class:`OperationRows`,
:class:`RowChanges`). :class:`SavedRows` remembers both per operation. Pure but for a lock: no
I/O.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime

from reconciler.operations.model import Operation

#: A stage's row as values: name, done, finished (in UTC).
StageRow = tuple[str, bool, datetime | None]
#: A step's row as values: name, state, attempts, first started, started, finished, retry at
#: (times in UTC) and message.
StepRow = tuple[
    str, str, int, datetime | None, datetime | None, datetime | None, datetime | None, str
]

#: How many unfinished operations a store remembers the rows of (a daemon runs one per runtime).
SAVED_LIMIT = 1000


def utc(moment: datetime | None) -> datetime | None:
    """A time as the store keeps it: aware, in UTC (a naive one is taken as local time)."""
    return moment.astimezone(UTC) if moment is not None else None


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
            index: (stage.name, stage.done, utc(stage.finished))
            for index, stage in enumerate(operation.stages)
        }
        steps = {
            (index, position): (
                *(step.name, str(step.state), step.attempts, utc(step.first_started)),
                *(utc(step.started), utc(step.finished), utc(step.retry_at), step.message),
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


class SavedRows:
    """What one store object last wrote or read of each unfinished operation: the version its
    row had then, and its stage and step rows (:class:`OperationRows`).

    When another process or store object wrote in between, the version differs and the store
    writes the whole operation instead. Finished operations are forgotten, and the least
    recently used beyond ``limit``. Thread-safe: a daemon's worker threads share a store."""

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
