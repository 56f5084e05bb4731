"""Operations run for tests: a clock moved by hand, a runner on an in-memory cluster and a real
state store, a fault on a module's next apply, and a step's state read back."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from reconciler.cluster.memory import Fault, InMemoryCluster
from reconciler.core.head import Head
from reconciler.core.model import ConfigRepo
from reconciler.errors import ReconcilerError
from reconciler.operations.engine import Engine
from reconciler.operations.model import Operation, StepState
from reconciler.operations.runner import Runner
from reconciler.operations.store import SqliteStore

#: The commit every run of :func:`runner_on` works for.
COMMIT = Head("c0ffee")


class Clock:
    """A clock tests move by hand."""

    def __init__(self) -> None:
        self.now = datetime(2026, 11, 18, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def runner_on(
    store: SqliteStore, config: ConfigRepo, cluster: InMemoryCluster, clock: Callable[[], datetime]
) -> Runner:
    """A runner of ``config`` on ``cluster`` (every runtime's), no plugins, at :data:`COMMIT`."""
    engine = Engine(store, clock=clock, plugins=[])
    return Runner(store, engine, config, lambda access, name: cluster, clock, COMMIT)


def fail_next_apply(cluster: InMemoryCluster, module: str, error: ReconcilerError) -> None:
    """The next apply of ``module``'s operator Deployment fails with ``error``."""
    name = f"{module}-operator"
    cluster.faults.append(
        Fault("apply", error, match=lambda ref: ref is not None and ref.name == name)
    )


def step_of(operation: Operation, name: str) -> tuple[StepState, int]:
    """The state and attempts of the step ``name`` of ``operation``."""
    step = next(t for s in operation.stages for t in s.steps if t.name == name)
    return step.state, step.attempts
