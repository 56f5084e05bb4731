"""A stopping process starts no further step (the daemon's shutdown): the operation stays as
its last saved step left it, nothing failed, and a later run resumes it to the end (O2)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.model import ModuleRef
from reconciler.operations.engine import Engine
from reconciler.operations.model import OperationState, OperationType, StepResult, StepState
from reconciler.operations.runner import Runner
from reconciler.operations.steps import Step, StepContext
from reconciler.operations.store import SqliteStore
from tests.support.lifecycle_helpers import repo
from tests.support.stopping import steps_of

#: Set by :class:`StopHere` (the daemon's stopping event, set while a step runs).
STOPPING = threading.Event()


class StopHere(Step):
    """A plugin step during which the process is told to stop."""

    name = "Stop_Here"
    domain = "test"
    description = "the process stops while this step runs"
    operations = (OperationType.PROVISION,)
    stage = "apply"
    after = "Apply_Modules"

    def run(self, operation: object, context: StepContext) -> StepResult:
        STOPPING.set()
        return StepResult("stopping now")


def test_no_step_starts_once_stopping_and_a_later_run_finishes(tmp_path: Path) -> None:
    STOPPING.clear()
    store = SqliteStore(tmp_path / "state.db")
    cluster = InMemoryCluster()

    def now() -> datetime:
        return datetime.now(UTC)

    def runner(engine: Engine) -> Runner:
        return Runner(store, engine, repo(ModuleRef("widget")), lambda a, n: cluster, now)

    stopping = Engine(store, clock=now, plugins=[StopHere], stopping=STOPPING.is_set)
    first = runner(stopping)
    outcome = first.run(first.operation_for("rt"))

    operation = outcome.operation
    assert outcome.retry_at is None
    assert operation.state is OperationState.IN_PROGRESS
    steps = steps_of(operation)
    assert steps["Stop_Here"] is StepState.DONE  # the step under way finished
    assert steps["Check_Modules_Ready"] is StepState.PENDING  # the next one never started
    assert StepState.FAILED not in steps.values()
    saved = store.get(operation.id)
    assert saved is not None
    assert steps_of(saved)["Check_Modules_Ready"] is StepState.PENDING

    again = runner(Engine(store, clock=now, plugins=[StopHere]))
    finished = again.run(again.operation_for("rt")).operation
    assert finished.id == operation.id
    assert finished.state is OperationState.SUCCEEDED, finished.message
