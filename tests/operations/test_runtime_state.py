"""The state a runtime shows, written once (:func:`reconciler.core.status.runtime_state`, and
:meth:`RuntimeStatus.state_of` for a runtime listed from git and the store): ``reconciler
status`` and ``get runtimes``, the status page and the metrics all ask it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from reconciler.core.status import (
    NOT_SYNCED,
    RUNTIME_STATES,
    ModuleState,
    Reason,
    runtime_state,
)
from reconciler.operations.model import RuntimeRecord, RuntimeStatus, Suspension

NOW = datetime(2026, 12, 8, tzinfo=UTC)


def _record(state: ModuleState, reason: Reason = Reason.READY) -> RuntimeRecord:
    return RuntimeRecord("rt", state, reason, "", None, NOW)


@pytest.mark.parametrize(
    ("recorded", "suspended", "shown"),
    [
        (ModuleState.ERROR, False, "Error"),
        (ModuleState.READY, True, "Suspended"),  # suspended wins over any record
        (None, False, NOT_SYNCED),  # in git, no operation yet
        (None, True, "Suspended"),  # git suspends it before its first operation
    ],
)
def test_the_one_rule_of_a_runtime_state(
    recorded: ModuleState | None, suspended: bool, shown: str
) -> None:
    assert runtime_state(recorded, suspended) == shown
    assert shown in RUNTIME_STATES


def test_every_state_a_runtime_shows_worst_first() -> None:
    assert RUNTIME_STATES[0] == "Error"
    assert RUNTIME_STATES[-2:] == ("Suspended", NOT_SYNCED)
    assert set(RUNTIME_STATES) == {*(str(s) for s in ModuleState), "Suspended", NOT_SYNCED}


def test_a_listed_runtime_shows_its_status_else_what_git_says() -> None:
    ready = RuntimeStatus.of(_record(ModuleState.READY), None)
    held = RuntimeStatus.of(_record(ModuleState.READY), None, Suspension("rt", NOW))
    assert RuntimeStatus.state_of(ready, suspended_in_git=False) == "Ready"
    assert RuntimeStatus.state_of(held, suspended_in_git=False) == "Suspended"
    assert RuntimeStatus.state_of(None, suspended_in_git=False) == NOT_SYNCED
    assert RuntimeStatus.state_of(None, suspended_in_git=True) == "Suspended"
    assert held.state == runtime_state(ModuleState.READY, True)
