"""Operations, stages and steps as records, and the results steps return (pure).

An operation (provision, update, deprovision) of one runtime is a list of stages; a stage is a
list of steps. These records are what the state store keeps and what ``reconciler operations``
shows. No secret is ever part of them (S4). Callers: the engine, the store, the CLI.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any


class OperationType(StrEnum):
    """What an operation does to a runtime."""

    PROVISION = "provision"
    UPDATE = "update"
    DEPROVISION = "deprovision"


class OperationState(StrEnum):
    """Where an operation stands."""

    PENDING = "pending"
    IN_PROGRESS = "in progress"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class StepState(StrEnum):
    """Where a step stands."""

    PENDING = "pending"
    RUNNING = "running"
    RETRYING = "retrying"
    DONE = "done"
    SKIPPED = "skipped"
    FAILED = "failed"


@dataclass(slots=True)
class StepRecord:
    """One step of a stage, with its attempts and times."""

    name: str
    state: StepState = StepState.PENDING
    attempts: int = 0
    first_started: datetime | None = None
    started: datetime | None = None
    finished: datetime | None = None
    retry_at: datetime | None = None
    message: str = ""


@dataclass(slots=True)
class StageRecord:
    """One stage: its steps and whether it is finished (never repeated then, O2)."""

    name: str
    steps: list[StepRecord]
    done: bool = False
    finished: datetime | None = None


@dataclass(slots=True)
class Operation:
    """One operation of one runtime, as stored."""

    id: str
    runtime: str
    type: OperationType
    state: OperationState
    created: datetime
    deadline: datetime
    stages: list[StageRecord]
    commit: str = ""
    message: str = ""
    updated: datetime | None = None
    owner: str = ""
    lease_until: datetime | None = None
    retrigger_of: str = ""
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        """Succeeded or failed."""
        return self.state in (OperationState.SUCCEEDED, OperationState.FAILED)

    def stage(self, name: str) -> StageRecord:
        """The stage called ``name``."""
        return next(s for s in self.stages if s.name == name)

    def skipped_steps(self) -> list[tuple[str, StepRecord]]:
        """Steps skipped past their own time limit (O5), with their stage."""
        return [(s.name, t) for s in self.stages for t in s.steps if t.state is StepState.SKIPPED]


@dataclass(frozen=True, slots=True)
class StepResult:
    """What a step asks for (O1): go on (default), try the stage again after ``retry_after``
    seconds, or fail the operation with ``error``. ``message`` is recorded either way."""

    message: str = ""
    retry_after: float | None = None
    error: str | None = None


@dataclass(slots=True)
class RuntimeRecord:
    """A runtime's last known state, as reported by ``reconciler status``."""

    runtime: str
    state: str
    reason: str
    message: str
    commit: str
    updated: datetime
    modules: list[dict[str, Any]] = field(default_factory=list)
    #: Where the runtime was last synced (``snapshot PATH`` or ``server URL``): an operation
    #: never deprovisions it through another access (rehearsal and reality never mix).
    access: str = ""

    def deployed(self) -> dict[str, str]:
        """Module -> version of the modules this record says the runtime runs."""
        return {
            str(m["module"]): str(m.get("version") or "")
            for m in self.modules
            if m.get("state") and m.get("state") != "Unmanaged"
        }


class CommitVerdict(StrEnum):
    """What the daemon decided about a commit; kept so that a restart decides the same."""

    READING = "reading"
    ACCEPTED = "accepted"
    REFUSED = "refused"
    HELD = "held"


@dataclass(slots=True)
class CommitRecord:
    """A commit the daemon judged: its verdict, when, why, and the details shown in /status."""

    commit: str
    verdict: CommitVerdict
    decided: datetime
    message: str = ""
    detail: dict[str, Any] = field(default_factory=dict)
    attempts: int = 0
