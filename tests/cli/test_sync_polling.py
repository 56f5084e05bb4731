"""How long ``sync`` keeps running a waiting operation without ``--wait``: as long as it waits
for what the server finishes by itself *now* (its CRDs Established), not as long as it ever
did: once only an operator's readiness is left, the command returns."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from reconciler.cli.sync import _run_with_wait
from reconciler.core.reasons import Reason
from reconciler.core.status import ModuleState, ModuleStatus, PassResult
from reconciler.operations.engine import RunOutcome
from reconciler.operations.model import (
    Operation,
    OperationData,
    OperationState,
    OperationType,
)

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def _waiting(reason: Reason) -> Operation:
    status = ModuleStatus("app", ModuleState.PROCESSING, reason, "not yet")
    data = OperationData(applied=PassResult((status,)))
    return Operation(
        "1", "rt", OperationType.UPDATE, OperationState.IN_PROGRESS, NOW, NOW, [], data=data
    )


@dataclass
class _Runs:
    """A runner whose runs wait for the CRDs once, then for the operator for ever."""

    reasons: list[Reason] = field(default_factory=lambda: [Reason.WAITING_FOR_CRD])
    count: int = 0

    def run(self, operation: Operation) -> RunOutcome:
        self.count += 1
        reason = self.reasons.pop(0) if self.reasons else Reason.WAITING_FOR_OPERATOR
        return RunOutcome(_waiting(reason), retry_at=datetime.now(UTC))


def test_once_only_the_operator_is_waited_for_sync_returns() -> None:
    runs = _Runs()

    done = _run_with_wait(cast(Any, runs), _waiting(Reason.INSTALL), 0.0, threading.Event())

    assert runs.count == 2  # the CRDs' run, then the one that waits for the operator: no more
    assert done.data.applied.modules[0].reason is Reason.WAITING_FOR_OPERATOR


def test_while_the_crds_are_waited_for_sync_runs_it_again() -> None:
    runs = _Runs(reasons=[Reason.WAITING_FOR_CRD] * 3)

    _run_with_wait(cast(Any, runs), _waiting(Reason.INSTALL), 0.0, threading.Event())

    assert runs.count == 4
