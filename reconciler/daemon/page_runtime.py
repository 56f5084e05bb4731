"""What the status page shows of one runtime (``/runtimes/NAME``), as frozen values built from
plain data (pure, as :mod:`reconciler.daemon.page_model`; import-linter keeps it so): its
modules (version, state, reason, the replica that owns it), what blocks a deletion, and its
operations as the tree of ``reconciler operations show`` (stages, steps, attempts, what a step
waits for).

Callers: :mod:`reconciler.daemon.page`, tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from reconciler.core.head import head_text
from reconciler.core.status import ModuleState
from reconciler.daemon.page_model import (
    FleetRuntime,
    RolloutHold,
    SourceView,
    short_commit,
    time_text,
)
from reconciler.operations.model import Operation, StepRecord
from reconciler.operations.report import STEP_MARKS

#: The operations a runtime's page shows, newest first.
OPERATIONS_SHOWN = 5


@dataclass(frozen=True, slots=True)
class ModuleRow:
    """One module of a runtime."""

    module: str
    version: str
    state: str
    reason: str
    message: str
    owner: str


@dataclass(frozen=True, slots=True)
class StepView:
    """A step of the operation tree."""

    name: str
    state: str
    mark: str
    attempts: int
    started: str
    finished: str
    retry_at: str
    message: str


@dataclass(frozen=True, slots=True)
class StageView:
    """A stage of the operation tree."""

    name: str
    done: bool
    finished: str
    steps: tuple[StepView, ...]


@dataclass(frozen=True, slots=True)
class OperationView:
    """An operation as ``reconciler operations show`` shows it."""

    id: str
    type: str
    state: str
    message: str
    created: str
    deadline: str
    commit: str
    owner: str
    retrigger_of: str
    stages: tuple[StageView, ...]
    #: What a deprovision waits for (the objects that block it).
    blocking: str
    #: The step under way or waiting: ``stage/step: message`` ("" when none).
    waiting: str


@dataclass(frozen=True, slots=True)
class Blocked:
    """A module whose deletion waits (L8) and the objects it waits for."""

    module: str
    message: str


@dataclass(frozen=True, slots=True)
class RuntimeView:
    """``/runtimes/NAME``."""

    name: str
    state: str
    reason: str
    message: str
    channel: str
    labels: tuple[str, ...]
    owner: str
    in_git: bool
    source: str
    commit: str
    updated: str
    access: str
    modules: tuple[ModuleRow, ...]
    blocked: tuple[Blocked, ...]
    operations: tuple[OperationView, ...]
    #: The last finished result while an operation is under way: state, reason, message.
    last_finished: tuple[str, str, str] | None
    daemon: SourceView
    generated: str
    #: A word on the commit shown (in sync at the commit in force, held back by a rollout).
    commit_note: str = ""
    #: The rollout that holds it back, its wave and why (``None``: none does).
    hold: RolloutHold | None = None


def runtime_view(
    runtime: FleetRuntime,
    operations: Sequence[Operation],
    source: SourceView,
    now: datetime,
) -> RuntimeView:
    """The page of ``runtime`` with its newest ``operations`` (newest first)."""
    status = runtime.status
    shown = tuple(operation_view(o) for o in operations[:OPERATIONS_SHOWN])
    labels = tuple(f"{key}={value}" for key, value in sorted(runtime.labels.items()))
    if status is None:
        return RuntimeView(
            runtime.name, runtime.state, "", "no operation has run yet", runtime.channel,
            labels, runtime.owner, runtime.in_git, runtime.source, "-", "-", "", (), (), shown,
            None, source, time_text(now),
        )  # fmt: skip
    current = status.current
    modules = tuple(
        ModuleRow(
            m.module,
            m.version or "-",
            str(m.state) if m.state is not None else "Removed",
            str(m.reason),
            m.message,
            runtime.owner,
        )
        for m in current.modules
    )
    blocked = tuple(
        Blocked(m.module, m.message) for m in current.modules if m.state is ModuleState.DELETING
    )
    last = status.last
    commit, note = runtime.commit_shown(source.commit)
    return RuntimeView(
        name=runtime.name,
        state=status.state,
        reason=status.reason,
        message=status.message,
        channel=runtime.channel,
        labels=labels,
        owner=runtime.owner,
        in_git=runtime.in_git,
        source=runtime.source,
        commit=commit,
        updated=time_text(current.updated),
        access=current.access.describe(),
        modules=modules,
        blocked=blocked,
        operations=shown,
        last_finished=(str(last.state), str(last.reason), last.message) if last else None,
        daemon=source,
        generated=time_text(now),
        commit_note=note,
        hold=runtime.hold,
    )


def operation_view(operation: Operation) -> OperationView:
    """``operation`` as the tree of ``reconciler operations show``."""
    stages = tuple(
        StageView(
            stage.name,
            stage.done,
            time_text(stage.finished) if stage.done else "",
            tuple(_step_view(step) for step in stage.steps),
        )
        for stage in operation.stages
    )
    return OperationView(
        id=operation.id,
        type=str(operation.type),
        state=str(operation.state),
        message=operation.message,
        created=time_text(operation.created),
        deadline=time_text(operation.deadline),
        commit=short_commit(head_text(operation.commit)),
        owner=operation.owner,
        retrigger_of=operation.retrigger_of,
        stages=stages,
        blocking=operation.data.blocking,
        waiting="" if operation.finished else _waiting(operation),
    )


def _step_view(step: StepRecord) -> StepView:
    return StepView(
        step.name,
        str(step.state),
        STEP_MARKS.get(str(step.state), "?"),
        step.attempts,
        time_text(step.started) if step.started else "",
        time_text(step.finished) if step.finished else "",
        time_text(step.retry_at) if step.retry_at else "",
        step.message,
    )


def _waiting(operation: Operation) -> str:
    """What an unfinished operation waits on: the step running, retrying or failed (else the
    first one pending), as ``stage/step (next attempt ...): message``."""
    steps = [(stage.name, step) for stage in operation.stages for step in stage.steps]
    active = [s for s in steps if str(s[1].state) in ("running", "retrying", "failed")]
    pending = [s for s in steps if str(s[1].state) == "pending"]
    if not (active or pending):
        return ""
    stage, step = (active or pending)[0]
    text = f"{stage}/{step.name}"
    if step.retry_at is not None:
        text += f" (next attempt {time_text(step.retry_at)})"
    return f"{text}: {step.message}" if step.message else text
