"""L13, gone means gone, on the in-memory cluster (which keeps finalizers as the server does,
see tests/contract/test_finalizers.py): a removal deletes the default configuration and waits
until it, and every object it deleted, is gone from the server before the operator and the CRDs
go; until then the module is Deleting and names what holds it and its finalizers. The test acts
as the operator that removes its finalizer."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.inventory import inventory_ref
from reconciler.core.model import ModuleRef
from reconciler.core.objects import ObjectRef
from reconciler.core.plan_values import Context, ModuleAction
from reconciler.lifecycle.executor import Lifecycle, ModuleState, SyncResult
from reconciler.operations.engine import Engine
from reconciler.operations.model import OperationState, OperationType
from reconciler.operations.runner import Runner
from reconciler.operations.store import SqliteStore
from tests.support.lifecycle_helpers import NAMESPACE, NOW, repo, sync
from tests.support.runs import Clock

DEPLOYMENT = ObjectRef("apps/v1", "Deployment", NAMESPACE, "widget-operator")
EXTRA = ObjectRef("v1", "ConfigMap", NAMESPACE, "widget-extra")
DEFAULT = ObjectRef("example.io/v1", "Widget", NAMESPACE, "default")
CRD = ObjectRef("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets.example.io")
INVENTORY = inventory_ref("reconciler-system", "widget")
CLEANUP = "widgets.example.io/cleanup"


def _widget(result: SyncResult) -> tuple[ModuleState | None, str, str]:
    (status,) = [s for s in result.modules if s.module == "widget"]
    return status.state, status.reason, status.message


def _hold(cluster: InMemoryCluster, ref: ObjectRef) -> None:
    """What an operator does to its custom resources: a finalizer of its own."""
    cluster.patch(ref, {"metadata": {"finalizers": [CLEANUP]}})


def _release(cluster: InMemoryCluster, ref: ObjectRef) -> None:
    """The operator's cleanup done: its finalizer removed."""
    cluster.patch(ref, {"metadata": {"finalizers": None}})


def _terminating(cluster: InMemoryCluster, ref: ObjectRef) -> bool:
    found = cluster.get(ref)
    return found is not None and bool(found["metadata"].get("deletionTimestamp"))


def _removed_while_held(ref: ObjectRef) -> tuple[InMemoryCluster, SyncResult, str]:
    """widget installed, ``ref`` held by a finalizer, widget removed from git: the cluster,
    the removal's result and its message (the module Deleting, WaitingForResources)."""
    cluster = InMemoryCluster()
    sync(cluster, repo(ModuleRef("widget")))
    _hold(cluster, ref)
    first = sync(cluster, repo())
    state, reason, message = _widget(first)
    assert (state, reason) == (ModuleState.DELETING, "WaitingForResources")
    return cluster, first, message


def test_a_removal_waits_until_the_default_configuration_its_finalizer_holds_is_gone() -> None:
    cluster, first, message = _removed_while_held(DEFAULT)

    assert f"Widget/{NAMESPACE}/default is being deleted, waiting for finalizers {CLEANUP}" in (
        message
    )
    assert "the operator keeps running until they are gone" in message
    assert _terminating(cluster, DEFAULT)
    for kept in (DEPLOYMENT, CRD, EXTRA, INVENTORY):
        assert cluster.get(kept) is not None, f"{kept.subject} went before the default"
    assert first.plan.modules[0].action is ModuleAction.BLOCKED_DELETION

    again = sync(cluster, repo())
    assert _widget(again)[:2] == (ModuleState.DELETING, "WaitingForResources")
    assert CLEANUP in _widget(again)[2]
    assert cluster.get(DEPLOYMENT) is not None

    _release(cluster, DEFAULT)
    done = sync(cluster, repo())

    assert _widget(done)[:2] == (None, "Removed")
    for gone in (DEPLOYMENT, CRD, EXTRA, INVENTORY):  # the CRD gone, its kind is too
        assert cluster.get(gone) is None


def test_a_finalizer_put_after_the_plan_still_holds_the_operator_back() -> None:
    """The plan saw no finalizer; the operator put one before the deletion: the removal reads
    the default configuration back and deletes nothing else while it is there."""
    cluster = InMemoryCluster()
    sync(cluster, repo(ModuleRef("widget")))
    config = repo()
    lifecycle = Lifecycle(cluster, system_namespace="reconciler-system")
    context = Context.of(config, "rt", NOW, leaving=True)
    planned = lifecycle.sync(context, [], dry_run=True).plan
    assert planned.modules[0].action is ModuleAction.REMOVE_DELETE
    _hold(cluster, DEFAULT)

    outcome = lifecycle.execute("rt", planned, [], lifecycle.observe("rt", []))

    (status,) = outcome.modules
    assert (status.state, status.reason) == (ModuleState.DELETING, "WaitingForResources")
    assert CLEANUP in status.message
    assert cluster.get(DEPLOYMENT) is not None
    assert cluster.get(CRD) is not None
    _release(cluster, DEFAULT)
    assert _widget(sync(cluster, config))[:2] == (None, "Removed")


def test_an_object_of_the_module_held_by_a_finalizer_keeps_the_module_deleting() -> None:
    cluster, _, message = _removed_while_held(EXTRA)

    assert f"ConfigMap/{NAMESPACE}/widget-extra is being deleted, waiting for finalizers" in message
    assert "the removal finishes once they are gone" in message
    assert cluster.get(INVENTORY) is not None, "kept until what it deleted is gone"
    assert cluster.get(DEPLOYMENT) is None
    again = sync(cluster, repo())
    assert _widget(again)[:2] == (ModuleState.DELETING, "WaitingForResources")
    assert "widget-extra is being deleted" in _widget(again)[2]

    _release(cluster, EXTRA)
    done = sync(cluster, repo())

    assert _widget(done)[:2] == (None, "Removed")
    assert cluster.get(INVENTORY) is None
    assert sync(cluster, repo()).modules == ()


def test_an_upgrade_keeps_a_crd_while_a_custom_resource_of_it_is_terminating() -> None:
    """A CRD the new version drops waits for its custom resources, the default configuration
    included once it is being deleted (finalizers hold it)."""
    cluster = InMemoryCluster()
    widget = repo(ModuleRef("widget"))
    sync(cluster, widget)
    _hold(cluster, DEFAULT)
    cluster.delete(DEFAULT)
    version = widget.modules["widget"].versions["2.0.0"]
    without_crd = tuple(o for o in version.objects if o["kind"] != "CustomResourceDefinition")
    module = widget.modules["widget"]
    versions = {**module.versions, "2.0.0": replace(version, objects=without_crd)}
    bumped = replace(
        repo(ModuleRef("widget"), regular={"widget": "2.0.0"}),
        modules={**widget.modules, "widget": replace(module, versions=versions)},
    )

    upgraded = sync(cluster, bumped)

    assert cluster.get(CRD) is not None
    entry = upgraded.plan.modules[0]
    assert CRD in entry.kept
    assert any(f"Widget/{NAMESPACE}/default" in note for note in entry.notes)
    _release(cluster, DEFAULT)
    sync(cluster, bumped)
    assert cluster.get(CRD) is None


def test_a_deprovision_waits_for_the_default_configuration_its_finalizer_holds(
    tmp_path: Path,
) -> None:
    cluster, clock = InMemoryCluster(), Clock()
    config = repo(ModuleRef("widget"))
    store = SqliteStore(tmp_path / "state.db")
    setup = Runner(store, Engine(store, clock=clock), config, lambda a, n: cluster, clock)
    setup.run(setup.operation_for("rt"))
    _hold(cluster, DEFAULT)
    gone = replace(config, runtimes={})
    runner = Runner(store, Engine(store, clock=clock), gone, lambda a, n: cluster, clock)

    outcome = runner.run(runner.operation_for("rt"))
    while outcome.retry_at is not None:
        clock.now = outcome.retry_at
        outcome = runner.run(outcome.operation)

    operation = outcome.operation
    assert operation.state is OperationState.FAILED, "never succeeded with the default left"
    held = f"Widget/{NAMESPACE}/default is being deleted, waiting for finalizers {CLEANUP}"
    assert held in operation.message
    ((_, skipped),) = operation.skipped_steps()
    assert held in skipped.message
    assert cluster.get(DEPLOYMENT) is not None, "the operator stays to remove its finalizer"
    assert cluster.get(CRD) is not None
    (record,) = store.runtimes()
    assert (record.state, record.reason) == ("Deleting", "WaitingForResources")
    assert held in record.message

    _release(cluster, DEFAULT)
    again = runner.operation_for("rt")
    assert again.type is OperationType.DEPROVISION
    assert runner.run(again).operation.state is OperationState.SUCCEEDED
    assert store.runtimes() == []
    for gone_ref in (DEPLOYMENT, CRD, INVENTORY):
        assert cluster.get(gone_ref) is None
