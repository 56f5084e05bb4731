"""What operations record, as typed values end to end: each pass's module statuses with their
errors kept as types (permanent or transient, with the delay asked for) and the change set per
object; the store reads them back into the same types; one runtime status for ``reconciler
status``, ``/status`` and the metrics. On the in-memory cluster with its injected faults, a fake
clock and a real SQLite store."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.cluster.memory import Fault, InMemoryCluster
from reconciler.core.head import Head
from reconciler.core.model import ConfigRepo, ModuleRef
from reconciler.core.objects import ObjectRef
from reconciler.core.plan import Context, ModuleAction, PlannedModule
from reconciler.core.status import ChangeAction, ModuleError, ModuleState, ModuleStatus
from reconciler.daemon.metrics import Metrics
from reconciler.daemon.service import Daemon
from reconciler.errors import (
    ConflictError,
    ForbiddenError,
    PermanentError,
    ReconcilerError,
    ThrottledError,
    TransientError,
)
from reconciler.operations.engine import Engine
from reconciler.operations.model import (
    Operation,
    OperationState,
    OperationType,
    RuntimeRecord,
    RuntimeStatus,
    StepState,
)
from reconciler.operations.runner import Runner
from reconciler.operations.store import SqliteStore
from tests.core.test_redaction import _Source
from tests.operations.test_operations import Clock
from tests.support.lifecycle_helpers import GADGET, NOW, WIDGET, repo


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    return SqliteStore(tmp_path / "state.db")


def _runner(
    store: SqliteStore, config: ConfigRepo, cluster: InMemoryCluster, clock: Clock
) -> Runner:
    engine = Engine(store, clock=clock, plugins=[])
    return Runner(store, engine, config, lambda access, name: cluster, clock, Head("c0ffee"))


def _fail(cluster: InMemoryCluster, module: str, error: ReconcilerError) -> None:
    """The next apply of ``module``'s operator Deployment fails with ``error``."""
    name = f"{module}-operator"
    cluster.faults.append(
        Fault("apply", error, match=lambda ref: ref is not None and ref.name == name)
    )


def _independent() -> ConfigRepo:
    """widget and gadget, neither depending on the other (both are applied in one pass)."""
    config = repo(ModuleRef("widget"), ModuleRef("gadget"))
    modules = {"widget": WIDGET, "gadget": replace(GADGET, depends_on=())}
    return replace(config, modules=modules)


def _step(operation: Operation, name: str) -> tuple[StepState, int]:
    step = next(t for s in operation.stages for t in s.steps if t.name == name)
    return step.state, step.attempts


# -- errors keep their type to the end --------------------------------------------------------


def test_a_throttled_apply_waits_as_long_as_its_retry_after_asked(store: SqliteStore) -> None:
    cluster, clock = InMemoryCluster(), Clock()
    _fail(cluster, "widget", ThrottledError("429 Too Many Requests", retry_after=42.0))
    runner = _runner(store, repo(ModuleRef("widget")), cluster, clock)

    outcome = runner.run(runner.operation_for("rt"))

    assert outcome.retry_at == clock.now + timedelta(seconds=42)  # not a fixed 10 s
    stored = store.get(outcome.operation.id)
    assert stored is not None
    assert _step(stored, "Apply_Modules") == (StepState.RETRYING, 1)
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
    _fail(cluster, "widget", ConflictError("field owned by kubectl", retry_after=3.0))
    _fail(cluster, "gadget", ThrottledError("429 Too Many Requests", retry_after=42.0))
    runner = _runner(store, _independent(), cluster, clock)

    outcome = runner.run(runner.operation_for("rt"))

    assert outcome.retry_at == clock.now + timedelta(seconds=42)
    causes = {m.module: m.error.cause for m in outcome.operation.data.modules if m.error}
    assert causes == {"widget": ConflictError, "gadget": ThrottledError}


def test_a_permanent_error_fails_the_operation_at_once(store: SqliteStore) -> None:
    cluster, clock = InMemoryCluster(), Clock()
    _fail(cluster, "widget", ForbiddenError("deployments.apps is forbidden"))
    runner = _runner(store, repo(ModuleRef("widget")), cluster, clock)

    outcome = runner.run(runner.operation_for("rt"))

    assert outcome.retry_at is None
    stored = store.get(outcome.operation.id)
    assert stored is not None
    assert stored.state is OperationState.FAILED
    assert _step(stored, "Apply_Modules") == (StepState.FAILED, 1)
    assert "deployments.apps is forbidden" in stored.message
    (widget,) = stored.data.applied.modules
    assert widget.reason == "Failed"
    assert widget.error == ModuleError(ForbiddenError, "deployments.apps is forbidden")
    assert widget.error.permanent


def test_the_daemon_logs_the_real_cause_of_a_module_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cluster, clock = InMemoryCluster(), Clock()
    _fail(cluster, "widget", ThrottledError("429 Too Many Requests", retry_after=42.0))
    daemon = Daemon(_Source(), SqliteStore(tmp_path / "state.db"), lambda a, n: cluster, clock)
    daemon.state.repo = repo(ModuleRef("widget"))
    try:
        daemon.reconcile("rt")
    finally:
        daemon.close()

    logged = [r.getMessage() for r in caplog.records if "module widget" in r.getMessage()]
    assert logged == [
        "runtime rt: module widget: ThrottledError (transient, retry after 42s): "
        "429 Too Many Requests"
    ]


class _Refusing(_Source):
    def check(self) -> str:
        raise PermanentError("git://127.0.0.1/remote.git: no branch or tag 'mian'")


def test_the_daemon_does_not_call_a_permanent_source_error_unreachable(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    daemon = Daemon(_Refusing(), SqliteStore(tmp_path / "state.db"), None, Clock())  # type: ignore[arg-type]
    try:
        assert not daemon.poll()
    finally:
        daemon.close()

    (record,) = [r for r in caplog.records if r.name == "reconciler.daemon"]
    assert record.levelname == "ERROR"
    assert record.getMessage() == (
        "source failed (PermanentError, permanent: needs a fix), keeping commit nothing: "
        "git://127.0.0.1/remote.git: no branch or tag 'mian'"
    )


# -- the change set and the store ------------------------------------------------------------


def test_an_upgrade_records_what_it_did_to_each_object(store: SqliteStore) -> None:
    cluster, clock = InMemoryCluster(), Clock()
    runner = _runner(store, repo(ModuleRef("widget")), cluster, clock)
    runner.run(runner.operation_for("rt"))
    upgraded = repo(ModuleRef("widget"), regular={"widget": "2.0.0"})
    runner = _runner(store, upgraded, cluster, clock)

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
        PlannedModule("widget", ModuleAction.UPGRADE, "Upgrade", "1.0.0", "2.0.0"),
    )
    stored = store.get(operation.id)
    assert stored is not None
    assert stored.data == operation.data  # read back into the same types
    assert stored.commit == Head("c0ffee")


def test_a_removal_records_its_deletions(store: SqliteStore) -> None:
    cluster, clock = InMemoryCluster(), Clock()
    runner = _runner(store, repo(ModuleRef("widget")), cluster, clock)
    runner.run(runner.operation_for("rt"))
    runner = _runner(store, repo(), cluster, clock)

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
    runner = _runner(store, repo(ModuleRef("widget")), cluster, clock)
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
    assert data.plan == (PlannedModule("widget", ModuleAction.INSTALL, "Install", None, "1.0.0"),)
    (widget,) = data.applied.modules
    assert widget.error == ModuleError(TransientError, "the server is busy")
    assert data.removals.modules[0].state is None
    assert data.inventories_left == ("widget",)


# -- one runtime status ------------------------------------------------------------------------


def test_status_json_is_one_value_for_the_cli_and_the_daemon(tmp_path: Path) -> None:
    cluster, clock = InMemoryCluster(), Clock()
    store = SqliteStore(tmp_path / "state.db")
    runner = _runner(store, repo(ModuleRef("widget"), ModuleRef("gadget")), cluster, clock)
    runner.run(runner.operation_for("rt"))
    daemon = Daemon(_Source(), store, None, clock)  # type: ignore[arg-type]
    try:
        served = daemon.status()["runtimes"]
    finally:
        daemon.close()

    printed = CliRunner().invoke(
        cli, ["status", "--state", f"sqlite:///{tmp_path / 'state.db'}", "--format", "json"]
    )

    assert printed.exit_code == 0, printed.output
    daemon_only = {"error": "", "owner": ""}  # what only a daemon knows (it never beat here)
    assert [r | daemon_only for r in json.loads(printed.output)["items"]] == served
    assert served[0] | {"updated": "-"} == {
        "runtime": "rt",
        "state": "Ready",
        "reason": "Install",
        "message": "2 modules",
        "commit": "c0ffee",
        "updated": "-",
        "operation": None,
        "lastFinished": None,
        "modules": [
            {
                "module": m,
                "state": "Ready",
                "reason": "Install",
                "message": f"{m} 1.0.0 is Ready",
                "version": "1.0.0",
            }
            for m in ("widget", "gadget")
        ],
        "suspension": None,
        "suspended": False,
        "error": "",
        "owner": "",
    }


def test_the_runtime_state_is_its_worst_module_s() -> None:
    statuses = {
        "a": ModuleStatus("a", ModuleState.READY, "Ready", ""),
        "b": ModuleStatus("b", ModuleState.WARNING, "DowngradeNotSupported", ""),
        "c": ModuleStatus("c", ModuleState.DELETING, "WaitingForResources", ""),
        "d": ModuleStatus("d", None, "Removed", ""),
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


def test_metrics_keep_one_series_per_runtime_and_count_modules_by_state() -> None:
    metrics = Metrics()
    widget = ModuleStatus("widget", ModuleState.PROCESSING, "WaitingForOperator", "")
    gadget = ModuleStatus("gadget", ModuleState.READY, "Ready", "")
    record = RuntimeRecord("rt", ModuleState.PROCESSING, "", "", None, NOW, (widget, gadget))
    other = replace(record, runtime="two", modules=(gadget,), state=ModuleState.READY)

    metrics.runtime_status(RuntimeStatus(record))
    metrics.runtime_status(RuntimeStatus(other))
    metrics.runtime_status(
        RuntimeStatus(replace(record, state=ModuleState.READY, modules=(gadget,)))
    )

    text = metrics.exposition().decode()
    runtime_series = [line for line in text.splitlines() if line.startswith("reconciler_runtime_")]
    assert sorted(runtime_series) == [
        'reconciler_runtime_state{runtime="rt",state="Ready"} 1.0',
        'reconciler_runtime_state{runtime="two",state="Ready"} 1.0',
    ]  # the former state's series is gone
    assert 'reconciler_modules{module="gadget",state="Ready"} 2.0' in text
    assert 'reconciler_modules{module="widget",state="Processing"} 0.0' in text


# -- one way to build the planner's context ------------------------------------------------


def test_every_caller_gets_the_runtime_s_window_suspension_and_dependencies() -> None:
    config = repo(ModuleRef("widget"), ModuleRef("gadget"))
    context = Context.of(config, "rt", NOW)
    runtime = config.runtimes["rt"]

    assert context == Context(
        "rt",
        NOW,
        runtime.maintenance_window,
        runtime.suspend,
        {"widget": (), "gadget": ("widget",)},
    )
    left = Context.of(config, "gone", NOW)
    assert (left.window, left.suspended, left.dependencies) == (
        None,
        False,
        context.dependencies,
    )
    assert Context.of(config, "rt", NOW, leaving=True) == replace(context, window=None)


def test_a_head_keeps_both_commits_and_its_text_form() -> None:
    head = Head("a" * 40, "b" * 40)

    assert Head.parse(head.text) == head
    assert head.text == "a" * 40 + "+" + "b" * 40
    assert head.shown == "a" * 12
    assert Head.parse("c" * 40) == Head("c" * 40)
    assert Head.parse("") is None


def test_a_store_keeps_the_head_as_text_and_reads_it_back(store: SqliteStore) -> None:
    operation = Engine(store, clock=lambda: datetime.now(UTC), plugins=[]).create(
        "rt", OperationType.UPDATE, commit=Head("a" * 40, "b" * 40)
    )

    stored = store.get(operation.id)

    assert stored is not None
    assert stored.commit == Head("a" * 40, "b" * 40)
