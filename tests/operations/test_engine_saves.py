"""How often the engine saves an operation (each save is a write to the state store, a round
trip on PostgreSQL): once at its creation, once at each step's start (attempts, RUNNING and the
lease, for crash counting) and once at each step's end, the end of a stage and of the operation
saved with its last step. Only the store boundary is watched: a real SQLite store, wrapped."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.model import ModuleRef
from reconciler.operations.engine import Engine
from reconciler.operations.model import (
    FenceToken,
    Operation,
    OperationState,
    OperationType,
    StepResult,
    StepState,
)
from reconciler.operations.runner import Runner
from reconciler.operations.steps import Step, StepContext
from reconciler.operations.store import SqliteStore
from tests.support.lifecycle_helpers import repo


class Clock:
    """A clock tests move by hand."""

    def __init__(self) -> None:
        self.now = datetime(2026, 11, 18, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@dataclass(frozen=True)
class Saved:
    """What one save wrote: the operation's state, each stage's done flag and step states."""

    state: OperationState
    stages: tuple[tuple[bool, tuple[StepState, ...]], ...]


class CountingStore:
    """A real SQLite store whose saves are counted and recorded as they were written."""

    def __init__(self, store: SqliteStore) -> None:
        self.store = store
        self.saved: list[Saved] = []

    def save(self, operation: Operation, fence: FenceToken | None = None) -> None:
        """Record what is written, then write it."""
        stages = tuple((s.done, tuple(t.state for t in s.steps)) for s in operation.stages)
        self.saved.append(Saved(operation.state, stages))
        self.store.save(operation, fence)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


class SkippedAfterOneTry(Step):
    """A plugin step that asks to retry but may be skipped at once (its own limit is 0s)."""

    name = "Skipped_After_One_Try"
    domain = "test"
    description = "asks to retry; skipped past its own limit"
    operations = (OperationType.PROVISION,)
    stage = "finish"
    after = "Record_Status"
    retry_without_fail = 0.0

    def run(self, operation: object, context: StepContext) -> StepResult:
        return StepResult("not yet", retry_after=60)


def _provision(tmp_path: Path, plugins: list[type[Step]]) -> tuple[CountingStore, Operation]:
    clock = Clock()
    store = CountingStore(SqliteStore(tmp_path / "state.db"))
    engine = Engine(store, clock=clock, plugins=plugins)
    cluster = InMemoryCluster()
    runner = Runner(store, engine, repo(ModuleRef("widget")), lambda a, n: cluster, clock)
    operation = runner.run(runner.operation_for("rt")).operation
    return store, operation


def test_a_successful_operation_is_saved_at_creation_and_at_each_step_start_and_end(
    tmp_path: Path,
) -> None:
    store, operation = _provision(tmp_path, [])

    assert operation.state is OperationState.SUCCEEDED, operation.message
    steps = sum(len(stage.steps) for stage in operation.stages)
    stages = len(operation.stages)
    assert (steps, stages) == (9, 4)
    assert (
        len(store.saved) == 1 + 2 * steps
    )  # 19; before: also one per stage and one at the end (24)
    assert store.store.get(operation.id) == operation


def test_a_stage_is_saved_done_with_its_last_step_and_the_operation_with_the_last_stage(
    tmp_path: Path,
) -> None:
    store, operation = _provision(tmp_path, [])

    assert operation.state is OperationState.SUCCEEDED, operation.message
    for saved in store.saved:  # never a stage whose steps all ended, saved as not done
        for done, states in saved.stages:
            assert done == all(s in (StepState.DONE, StepState.SKIPPED) for s in states)
    last = store.saved[-1]
    assert last.state is OperationState.SUCCEEDED
    assert all(done for done, _ in last.stages)
    assert [s.state for s in store.saved].count(OperationState.SUCCEEDED) == 1


def test_a_step_skipped_last_ends_its_stage_and_the_operation_in_its_own_save(
    tmp_path: Path,
) -> None:
    store, operation = _provision(tmp_path, [SkippedAfterOneTry])

    assert operation.state is OperationState.SUCCEEDED, operation.message
    assert operation.message == "1 installed; skipped: Skipped_After_One_Try"
    steps = sum(len(stage.steps) for stage in operation.stages)
    assert len(store.saved) == 1 + 2 * steps
    assert store.saved[-1].stages[-1] == (True, (StepState.DONE, StepState.SKIPPED))
    loaded = store.store.get(operation.id)
    assert loaded == operation


def test_an_operation_whose_stages_were_all_done_is_saved_succeeded_once(tmp_path: Path) -> None:
    """A run that finds every stage done (a process that stopped before saving the end, as
    earlier versions saved it apart) saves only the operation's end."""
    clock = Clock()
    store = CountingStore(SqliteStore(tmp_path / "state.db"))
    engine = Engine(store, clock=clock, plugins=[])
    operation = engine.create("rt", OperationType.PROVISION)
    for stage in operation.stages:
        stage.done, stage.finished = True, clock.now
    operation.state = OperationState.IN_PROGRESS
    clock.now += timedelta(seconds=1)

    outcome = engine.run(operation, lambda: None)  # type: ignore[arg-type,return-value]

    assert outcome.operation.state is OperationState.SUCCEEDED
    assert [s.state for s in store.saved] == [OperationState.PENDING, OperationState.SUCCEEDED]
