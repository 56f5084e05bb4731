"""How often the engine saves an operation (each save is a write to the state store, a round
trip on PostgreSQL): once at its creation, once at each step's start (attempts, RUNNING and the
lease, for crash counting) and once at each step's end, the end of a stage and of the operation
saved with its last step. Only the store boundary is watched: a real SQLite store, wrapped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.head import Head
from reconciler.core.model import ModuleRef
from reconciler.operations.engine import LEASE_SECONDS, Engine
from reconciler.operations.model import (
    Operation,
    OperationState,
    OperationType,
    StepResult,
    StepState,
)
from reconciler.operations.runner import Runner
from reconciler.operations.steps import Step, StepContext
from reconciler.operations.store import SqliteStore
from tests.support.counting_store import CountingStore
from tests.support.lifecycle_helpers import repo


class Clock:
    """A clock tests move by hand."""

    def __init__(self) -> None:
        self.now = datetime(2026, 11, 18, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


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


def _update(
    store: CountingStore, cluster: InMemoryCluster, clock: Clock, **channel: str
) -> Operation:
    """One more run of ``rt`` (an update) on ``cluster``, its channel mapping ``channel``."""
    limits = {OperationType.UPDATE: timedelta(days=365)}  # a clock that races on
    engine = Engine(store, clock=clock, plugins=[], limits=limits)
    regular = {"widget": "1.0.0", "gadget": "1.0.0", **channel}
    config = repo(ModuleRef("widget"), regular=regular)
    commit = Head(f"c{len(store.saved)}")
    runner = Runner(store, engine, config, lambda a, n: cluster, clock, commit)
    return runner.run(runner.operation_for("rt")).operation


def _provisioned(tmp_path: Path) -> tuple[CountingStore, InMemoryCluster, Clock]:
    clock = Clock()
    store = CountingStore(SqliteStore(tmp_path / "state.db"))
    cluster = InMemoryCluster()
    engine = Engine(store, clock=clock, plugins=[])
    runner = Runner(store, engine, repo(ModuleRef("widget")), lambda a, n: cluster, clock)
    assert runner.run(runner.operation_for("rt")).operation.state is OperationState.SUCCEEDED
    return store, cluster, clock


def test_an_update_that_changes_nothing_is_saved_at_its_claim_and_its_end(tmp_path: Path) -> None:
    """A resync that finds nothing to do is saved when created, when its Starting step
    starts (the claim follows) and at its end: three saves, not two a step; what the store
    then shows is the whole operation (every step done, "no change") and a runtime record
    of this run's time and commit."""
    store, cluster, clock = _provisioned(tmp_path)
    store.saved.clear()
    clock.now += timedelta(minutes=5)

    operation = _update(store, cluster, clock)

    assert operation.state is OperationState.SUCCEEDED, operation.message
    assert operation.message == "no change"
    assert [s.state for s in store.saved] == [
        OperationState.PENDING,
        OperationState.PENDING,
        OperationState.SUCCEEDED,
    ]
    assert store.store.get(operation.id) == operation
    record = store.store.runtime("rt")
    assert record is not None
    assert (record.updated, record.commit) == (clock.now, operation.commit)


def test_an_update_that_changes_something_is_saved_from_its_change_on(tmp_path: Path) -> None:
    """An upgrade's plan changes a module: from the plan's end on, every step's start and
    end is saved again (a crash resumes after the last stage recorded)."""
    store, cluster, clock = _provisioned(tmp_path)
    store.saved.clear()

    operation = _update(store, cluster, clock, widget="2.0.0")

    assert operation.state is OperationState.SUCCEEDED, operation.message
    assert operation.message.startswith("1 upgraded")
    plan_done = [s for s in store.saved if s.stages[1][0]]
    steps_after_plan = sum(len(stage.steps) for stage in operation.stages[2:])
    assert len(plan_done) == 2 * steps_after_plan + 1  # the plan's end, then each step twice
    assert store.store.get(operation.id) == operation


def test_an_update_whose_lease_runs_low_saves_as_before(tmp_path: Path) -> None:
    """Saves wait only while the claim's lease has half its length to run: an update whose
    steps take longer than that (here each look at the clock, a lease's length) saves each
    step's start and end (its lease renewed), changing nothing or not."""
    store, cluster, clock = _provisioned(tmp_path)
    store.saved.clear()
    slow = Ticking(clock.now)

    operation = _update(store, cluster, slow)  # type: ignore[arg-type]

    assert operation.state is OperationState.SUCCEEDED, operation.message
    assert operation.message == "no change"
    steps = sum(len(stage.steps) for stage in operation.stages)
    assert len(store.saved) == 1 + 2 * steps


class Ticking:
    """A clock a lease's length later at each look."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=LEASE_SECONDS)
        return self.now
