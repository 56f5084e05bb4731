"""An operation as the store keeps it, for tests of saving and fencing: three stages (two, one
and two steps), the first one finished, and the engine's start of a step (callers: the incremental
save and fencing tests of ``tests/store_contract``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from reconciler.operations.model import (
    Operation,
    OperationState,
    OperationType,
    StageRecord,
    StepRecord,
    StepState,
)

#: The time the operation was created at.
T0 = datetime(2026, 11, 18, 12, 0, tzinfo=UTC)


def three_stage_operation(operation_id: str = "op1", runtime: str = "rt") -> Operation:
    """An operation of three stages (two, one and two steps), one of them finished."""
    return Operation(
        id=operation_id,
        runtime=runtime,
        type=OperationType.UPDATE,
        state=OperationState.IN_PROGRESS,
        created=T0,
        deadline=T0 + timedelta(hours=3),
        stages=[
            StageRecord(
                "starting",
                [StepRecord("Starting", StepState.DONE, 1, T0, T0, T0, None, "in progress")],
                done=True,
                finished=T0,
            ),
            StageRecord("plan", [StepRecord("Resolve_Kubeconfig"), StepRecord("Plan_Changes")]),
            StageRecord("apply", [StepRecord("Apply_Modules"), StepRecord("Check_Ready")]),
        ],
        owner="host-a:1",
        updated=T0,
    )


def start_step(operation: Operation, stage: int, step: int, minutes: int = 1) -> None:
    """The engine's start of a step: one more attempt, RUNNING, a new lease."""
    record = operation.stages[stage].steps[step]
    now = T0 + timedelta(minutes=minutes)
    record.attempts += 1
    record.state, record.started, record.first_started = StepState.RUNNING, now, now
    operation.updated, operation.lease_until = now, now + timedelta(minutes=2)
