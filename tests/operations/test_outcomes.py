"""What operations record, as typed values end to end: each pass's module statuses with their
errors kept as types (permanent or transient, with the delay asked for) and the change set per
object; the store reads them back into the same types, the commit head included; a runtime's
record is its worst module's state. On the in-memory cluster with its injected faults, a fake
clock and a real SQLite store."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.head import Head
from reconciler.core.model import ConfigRepo, ModuleRef
from reconciler.core.objects import ObjectRef
from reconciler.core.plan_values import ModuleAction, PlannedModule
from reconciler.core.reasons import Reason
from reconciler.core.status import (
    ChangeAction,
    ModuleError,
    ModuleState,
    ModuleStatus,
    PassResult,
)
from reconciler.errors import (
    ConflictError,
    ForbiddenError,
    ThrottledError,
    TransientError,
)
from reconciler.operations.engine import Engine
from reconciler.operations.model import (
    Operation,
    OperationData,
    OperationState,
    OperationType,
    RuntimeRecord,
    StepState,
)
from reconciler.operations.store import SqliteStore
from tests.support.lifecycle_helpers import GADGET, NOW, WIDGET, repo
from tests.support.runs import Clock, fail_next_apply, runner_on, step_of


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    return SqliteStore(tmp_path / "state.db")


def _independent() -> ConfigRepo:
    """widget and gadget, neither depending on the other (both are applied in one pass)."""
    config = repo(ModuleRef("widget"), ModuleRef("gadget"))
    modules = {"widget": WIDGET, "gadget": replace(GADGET, depends_on=())}
    return replace(config, modules=modules)


# -- errors keep their type to the end --------------------------------------------------------


def test_a_throttled_apply_waits_as_long_as_its_retry_after_asked(store: SqliteStore) -> None:
    cluster, clock = InMemoryCluster(), Clock()
    fail_next_apply(cluster, "widget", ThrottledError("429 Too Many Requests", retry_after=42.0))
    runner = runner_on(store, repo(ModuleRef("widget")), cluster, clock)

    outcome = runner.run(runner.operation_for("rt"))

    assert outcome.retry_at == clock.now + timedelta(seconds=42)  # not a fixed 10 s
    stored = store.get(outcome.operation.id)
    assert stored is not None
    assert step_of(stored, "Apply_Modules") == (StepState.RETRYING, 1)
    (widget,) = stored.data.applied.modules
    assert (widget.state, widget.reason) == (ModuleState.ERROR, "Retrying")
    assert widget.error == ModuleError(ThrottledError, "429 Too Many Requests", 42.0)
    assert not widget.error.permanent

    clock.advance(42)
    finished = runner.run(stored).operation
    assert finished.state is OperationState.SUCCEEDED
    assert finished.data.applied.modules[0].error is None


def test_the_stage_waits_for_the_longest_delay_its_modules_asked_for(store: SqliteStore) -> None:
    cluster, clock = InMemoryCluster(), Clock()
    fail_next_apply(cluster, "widget", ConflictError("field owned by kubectl", retry_after=3.0))
    fail_next_apply(cluster, "gadget", ThrottledError("429 Too Many Requests", retry_after=42.0))
    runner = runner_on(store, _independent(), cluster, clock)

    outcome = runner.run(runner.operation_for("rt"))

    assert outcome.retry_at == clock.now + timedelta(seconds=42)
    causes = {m.module: m.error.cause for m in outcome.operation.data.modules if m.error}
    assert causes == {"widget": ConflictError, "gadget": ThrottledError}


def test_a_permanent_error_fails_the_operation_at_once(store: SqliteStore) -> None:
    cluster, clock = InMemoryCluster(), Clock()
    fail_next_apply(cluster, "widget", ForbiddenError("deployments.apps is forbidden"))
    runner = runner_on(store, repo(ModuleRef("widget")), cluster, clock)

    outcome = runner.run(runner.operation_for("rt"))

    assert outcome.retry_at is None
    stored = store.get(outcome.operation.id)
    assert stored is not None
    assert stored.state is OperationState.FAILED
    assert step_of(stored, "Apply_Modules") == (StepState.FAILED, 1)
    assert "deployments.apps is forbidden" in stored.message
    (widget,) = stored.data.applied.modules
    assert widget.reason == "Failed"
    assert widget.error == ModuleError(ForbiddenError, "deployments.apps is forbidden")
    assert widget.error.permanent


# -- the change set and the store ------------------------------------------------------------


def test_an_upgrade_records_what_it_did_to_each_object(store: SqliteStore) -> None:
    cluster, clock = InMemoryCluster(), Clock()
    runner = runner_on(store, repo(ModuleRef("widget")), cluster, clock)
    runner.run(runner.operation_for("rt"))
    upgraded = repo(ModuleRef("widget"), regular={"widget": "2.0.0"})
    runner = runner_on(store, upgraded, cluster, clock)

    operation = runner.run(runner.operation_for("rt")).operation

    changes = {(c.ref.kind, c.ref.name): c.action for c in operation.data.applied.changes}
    assert changes == {
        ("CustomResourceDefinition", "widgets.example.io"): ChangeAction.CONFIGURED,
        ("ServiceAccount", "widget-operator"): ChangeAction.CONFIGURED,
        ("ClusterRole", "widget-operator"): ChangeAction.CONFIGURED,
        ("Deployment", "widget-operator"): ChangeAction.CONFIGURED,
        ("Service", "widget-metrics"): ChangeAction.CREATED,
        ("ConfigMap", "widget-extra"): ChangeAction.PRUNED,
    }  # the default configuration, created once (L3), is not read again: not in the set
    assert operation.data.plan == (
        PlannedModule("widget", ModuleAction.UPGRADE, Reason.UPGRADE, "1.0.0", "2.0.0"),
    )
    stored = store.get(operation.id)
    assert stored is not None
    assert stored.data == operation.data  # read back into the same types
    assert stored.commit == Head("c0ffee")


def test_a_removal_records_its_deletions(store: SqliteStore) -> None:
    cluster, clock = InMemoryCluster(), Clock()
    runner = runner_on(store, repo(ModuleRef("widget")), cluster, clock)
    runner.run(runner.operation_for("rt"))
    runner = runner_on(store, repo(), cluster, clock)

    operation = runner.run(runner.operation_for("rt")).operation

    (removal,) = operation.data.removals.modules
    assert (removal.module, removal.state, removal.reason) == ("widget", None, "Removed")
    actions = {c.action for c in operation.data.removals.changes}
    assert actions == {ChangeAction.DELETED}
    deleted = [c.ref for c in operation.data.removals.changes]
    assert deleted[0] == ObjectRef("example.io/v1", "Widget", "widget-system", "default")
    assert deleted[-1].kind == "CustomResourceDefinition"  # CRDs last
    stored = store.get(operation.id)
    assert stored is not None
    assert stored.data == operation.data


def test_rows_written_before_errors_were_kept_read_back_typed(
    store: SqliteStore, tmp_path: Path
) -> None:
    cluster, clock = InMemoryCluster(), Clock()
    runner = runner_on(store, repo(ModuleRef("widget")), cluster, clock)
    operation = runner.operation_for("rt")
    first_version = {
        "cluster": {"context": "c", "in_cluster": False, "kubeconfig_file": None,
                    "kubeconfig_secret": None, "kubeconfig_secret_key": "config"},
        "plan": [{"module": "widget", "action": "install", "reason": "Install", "from": None,
                  "to": "1.0.0"}],
        "modules": [{"module": "widget", "state": "Error", "reason": "Retrying",
                     "message": "the server is busy", "version": None}],
        "removals": [{"module": "gadget", "state": None, "reason": "Removed",
                      "message": "delete gadget 1.0.0", "version": "1.0.0"}],
        "inventoriesLeft": ["widget"],
    }  # fmt: skip
    with sqlite3.connect(tmp_path / "state.db") as db:
        db.execute(
            "UPDATE operations SET data = ? WHERE id = ?",
            (json.dumps(first_version), operation.id),
        )

    stored = store.get(operation.id)

    assert stored is not None
    data = stored.data
    assert data.access == repo().runtimes["rt"].cluster
    assert data.plan == (
        PlannedModule("widget", ModuleAction.INSTALL, Reason.INSTALL, None, "1.0.0"),
    )
    (widget,) = data.applied.modules
    assert widget.error == ModuleError(TransientError, "the server is busy")
    assert data.removals.modules[0].state is None
    assert data.inventories_left == ("widget",)


def test_a_store_keeps_the_head_as_text_and_reads_it_back(store: SqliteStore) -> None:
    operation = Engine(store, clock=lambda: datetime.now(UTC), plugins=[]).create(
        "rt", OperationType.UPDATE, commit=Head("a" * 40, "b" * 40)
    )

    stored = store.get(operation.id)

    assert stored is not None
    assert stored.commit == Head("a" * 40, "b" * 40)


# -- the runtime record --------------------------------------------------------------------------


def test_the_runtime_state_is_its_worst_module_s() -> None:
    statuses = {
        "a": ModuleStatus("a", ModuleState.READY, Reason.READY, ""),
        "b": ModuleStatus("b", ModuleState.WARNING, Reason.DOWNGRADE_NOT_SUPPORTED, ""),
        "c": ModuleStatus("c", ModuleState.DELETING, Reason.WAITING_FOR_RESOURCES, ""),
        "d": ModuleStatus("d", None, Reason.REMOVED, ""),
    }
    operation = Operation("1", "rt", OperationType.UPDATE, OperationState.IN_PROGRESS, NOW, NOW, [])
    operation.data = replace(
        operation.data,
        applied=replace(operation.data.applied, modules=(statuses["a"], statuses["b"])),
        removals=replace(operation.data.removals, modules=(statuses["c"], statuses["d"])),
    )

    record = RuntimeRecord.of(operation, NOW)

    assert (record.state, record.reason, record.message) == (
        ModuleState.WARNING,
        "DowngradeNotSupported",
        "3 modules",
    )
    assert [m.module for m in record.modules] == ["a", "b", "c"]


# -- the message says what happened, not what was planned before a wait ------------------------


def test_a_removal_held_by_users_resources_then_done_says_removed_not_held(
    store: SqliteStore,
) -> None:
    cluster, clock = InMemoryCluster(), Clock()
    runner = runner_on(store, repo(ModuleRef("widget")), cluster, clock)
    runner.run(runner.operation_for("rt"))
    users = {
        "apiVersion": "example.io/v1",
        "kind": "Widget",
        "metadata": {"name": "mine", "namespace": "widget-system"},
    }
    cluster.apply(users, field_manager="kubectl")
    runner = runner_on(store, repo(), cluster, clock)
    waiting = runner.run(runner.operation_for("rt"))
    assert waiting.operation.data.plan[0].action is ModuleAction.BLOCKED_DELETION
    assert waiting.retry_at is not None
    cluster.delete(ObjectRef.of(users))
    clock.now = waiting.retry_at

    operation = runner.run(waiting.operation).operation

    assert operation.state is OperationState.SUCCEEDED
    assert operation.message == "1 removed"  # the plan said "held": the outcome is what counts
    stored = store.get(operation.id)
    assert stored is not None
    assert stored.message == "1 removed"


def test_each_module_s_word_comes_from_its_state_at_the_end() -> None:
    def outcome(planned: PlannedModule, final: ModuleStatus) -> str:
        data = OperationData(plan=(planned,), applied=PassResult((final,)))
        return data.outcome_text()

    deferred = PlannedModule(
        "widget",
        ModuleAction.DEFERRED_WINDOW,
        Reason.WAITING_FOR_MAINTENANCE_WINDOW,
        "1.0.0",
        "2.0.0",
    )
    opened = ModuleStatus("widget", ModuleState.READY, Reason.READY, "", "2.0.0")
    still = ModuleStatus(
        "widget", ModuleState.READY, Reason.WAITING_FOR_MAINTENANCE_WINDOW, "", "1.0.0"
    )
    assert outcome(deferred, opened) == "1 upgraded"  # the window opened during a wait
    assert outcome(deferred, still) == "1 held"
    released = ModuleStatus("widget", ModuleState.UNMANAGED, Reason.STRATEGY_IGNORE, "", "1.0.0")
    assert outcome(
        PlannedModule("widget", ModuleAction.REMOVE_IGNORE, Reason.STRATEGY_IGNORE), released
    ) == ("1 released")
    same = ModuleStatus("widget", ModuleState.READY, Reason.READY, "", "1.0.0")
    assert (
        outcome(PlannedModule("widget", ModuleAction.UNCHANGED, Reason.UP_TO_DATE), same)
        == "no change"
    )
