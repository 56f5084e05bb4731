"""A step that fails the operation returns its error as a
:class:`~reconciler.errors.ReconcilerError`, not as text: its kind (permanent or transient) and
the delay a transient one asked for reach the operation's failure, are kept by the store and
read back the same from a store opened anew."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.model import ModuleRef
from reconciler.core.status import ModuleError
from reconciler.errors import (
    ForbiddenError,
    PermanentError,
    ReconcilerError,
    RenderError,
    ThrottledError,
)
from reconciler.operations.engine import Engine
from reconciler.operations.model import (
    OperationState,
    OperationType,
    StepResult,
    StepState,
)
from reconciler.operations.runner import Runner
from reconciler.operations.steps import Step, StepContext
from reconciler.operations.store import SqliteStore
from tests.support.lifecycle_helpers import repo


def _clock() -> datetime:
    return datetime(2026, 11, 18, 12, 0, tzinfo=UTC)


def _failing_with(error: ReconcilerError) -> type[Step]:
    class FailsWith(Step):
        name = "Fails_With"
        domain = "test"
        description = "returns its error"
        operations = (OperationType.PROVISION,)
        stage = "finish"
        after = "Record_Status"

        def run(self, operation: object, context: StepContext) -> StepResult:
            return StepResult(error=error)

    return FailsWith


@pytest.mark.parametrize(
    ("error", "kept"),
    [
        (
            ThrottledError("429 Too Many Requests", 42.0),
            ModuleError(ThrottledError, "429 Too Many Requests", 42.0),
        ),
        (
            ForbiddenError("deployments.apps is forbidden"),
            ModuleError(ForbiddenError, "deployments.apps is forbidden"),
        ),
    ],
)
def test_a_step_error_keeps_its_type_through_the_store(
    tmp_path: Path, error: ReconcilerError, kept: ModuleError
) -> None:
    store = SqliteStore(tmp_path / "state.db")
    engine = Engine(store, clock=_clock, plugins=[_failing_with(error)])
    cluster = InMemoryCluster()
    runner = Runner(store, engine, repo(ModuleRef("widget")), lambda a, n: cluster, _clock)

    failed = runner.run(runner.operation_for("rt")).operation

    assert failed.state is OperationState.FAILED
    step = next(t for s in failed.stages for t in s.steps if t.name == "Fails_With")
    assert (step.state, step.message) == (StepState.FAILED, str(error))
    read = SqliteStore(tmp_path / "state.db").get(failed.id)
    assert read is not None
    failure = read.data.failure
    assert failure is not None
    assert (failure.step, failure.error) == ("Fails_With", kept)


def test_an_error_given_as_text_by_an_older_plugin_is_a_permanent_error() -> None:
    text: object = "the announcement file is read-only"

    result = StepResult(error=text)  # type: ignore[arg-type]

    assert isinstance(result.error, PermanentError)
    assert (str(result.error), result.recorded) == (str(text), str(text))


def _unprepared(error: ReconcilerError) -> StepContext:
    raise error


@pytest.mark.parametrize(
    ("error", "step_state"),
    [
        (RenderError("chart requires kubeVersion: >=1.99.0-0"), "failed"),
        (ThrottledError("429 Too Many Requests", 7.0), "retrying"),
    ],
)
def test_a_stage_whose_context_cannot_be_made_fails_or_waits_at_its_next_step(
    tmp_path: Path, error: ReconcilerError, step_state: str
) -> None:
    store = SqliteStore(tmp_path / "state.db")
    engine = Engine(store, clock=_clock, plugins=[])
    cluster = InMemoryCluster()
    runner = Runner(store, engine, repo(ModuleRef("widget")), lambda a, n: cluster, _clock)

    outcome = engine.run(runner.operation_for("rt"), lambda: _unprepared(error))

    stored = store.get(outcome.operation.id)
    assert stored is not None
    failed = isinstance(error, PermanentError)
    assert (stored.state is OperationState.FAILED) == failed
    first = stored.stages[0].steps[0]
    assert (str(first.state), first.attempts) == (step_state, 1)
    failure = stored.data.failure
    assert failure is not None
    assert (failure.step, failure.error.message) == (first.name, str(error))
    if failed:
        assert stored.message == f"step {first.name} failed: {error}"
        record = store.runtime("rt")
        assert record is not None
        assert record.state.value == "Error"
    else:
        assert outcome.retry_at is not None
