"""Module lifecycle on the in-memory cluster: the acceptance points of the lifecycle issue.

Each test drives `sync_runtime` against an `InMemoryCluster`, changing git (the ConfigRepo) or
the cluster (as a user would) between syncs, and checks the cluster and the reported states.
"""

from __future__ import annotations

import pytest

from reconciler.cluster.memory import Fault, InMemoryCluster
from reconciler.core.inventory import inventory_ref
from reconciler.core.model import (
    LABEL_MANAGED_BY,
    LABEL_MODULE,
    LABEL_RUNTIME,
    MaintenanceWindow,
    ModuleRef,
    Strategy,
)
from reconciler.core.objects import ObjectRef
from reconciler.core.plan_values import ModuleAction, Plan
from reconciler.errors import ServerError
from reconciler.lifecycle.executor import ModuleState, SyncResult
from tests.support.lifecycle_helpers import NAMESPACE, NOW, repo, sync

DEPLOYMENT = ObjectRef("apps/v1", "Deployment", NAMESPACE, "widget-operator")
EXTRA = ObjectRef("v1", "ConfigMap", NAMESPACE, "widget-extra")
SERVICE = ObjectRef("v1", "Service", NAMESPACE, "widget-metrics")
DEFAULT = ObjectRef("example.io/v1", "Widget", NAMESPACE, "default")
CRD = ObjectRef("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets.example.io")
INVENTORY = inventory_ref("reconciler-system", "widget")


def _status(result: SyncResult, module: str) -> tuple[ModuleState | None, str]:
    statuses = {s.module: s for s in result.modules}
    return statuses[module].state, statuses[module].reason


@pytest.fixture
def cluster() -> InMemoryCluster:
    return InMemoryCluster()


def test_install_then_a_second_sync_writes_nothing(cluster: InMemoryCluster) -> None:
    first = sync(cluster, repo(ModuleRef("widget")))

    assert _status(first, "widget") == (ModuleState.READY, "Install")
    assert cluster.get(CRD) is not None
    live = cluster.get(DEPLOYMENT)
    assert live is not None
    assert live["metadata"]["labels"][LABEL_MANAGED_BY] == "reconciler"
    assert cluster.get(DEFAULT) is not None
    assert cluster.get(INVENTORY) is not None

    writes, calls = cluster.writes, dict(cluster.calls)
    second = sync(cluster, repo(ModuleRef("widget")))

    assert cluster.writes == writes
    assert cluster.calls.get("apply", 0) == calls.get("apply", 0)
    entry = second.plan.module("widget")
    assert entry is not None
    assert entry.action is ModuleAction.UNCHANGED
    assert not second.plan.has_changes


def test_channel_bump_upgrades_and_prunes_exactly_what_the_new_version_lacks(
    cluster: InMemoryCluster,
) -> None:
    sync(cluster, repo(ModuleRef("widget")))
    user_config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "mine", "namespace": NAMESPACE},
    }
    cluster.apply(user_config, field_manager="kubectl")
    before = {ObjectRef.of(o) for o in cluster.objects()}

    result = sync(cluster, repo(ModuleRef("widget"), regular={"widget": "2.0.0"}))

    after = {ObjectRef.of(o) for o in cluster.objects()}
    assert _status(result, "widget") == (ModuleState.READY, "Upgrade")
    assert before - after == {EXTRA}
    assert after - before == {SERVICE}
    live = cluster.get(DEPLOYMENT)
    assert live is not None
    assert live["metadata"]["labels"]["app.kubernetes.io/version"] == "2.0.0"


@pytest.mark.parametrize("by_hand", [False, True])
def test_lower_version_leaves_the_running_one(cluster: InMemoryCluster, by_hand: bool) -> None:
    if by_hand:  # someone installed 2.0.0 without us: no inventory, no labels
        for body in repo().modules["widget"].versions["2.0.0"].objects:
            ns = body["kind"] in ("Deployment", "ServiceAccount", "Service")
            meta = {**body["metadata"], **({"namespace": NAMESPACE} if ns else {})}
            if ns and cluster.get(ObjectRef("v1", "Namespace", "", NAMESPACE)) is None:
                cluster.apply(
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
                    field_manager="kubectl",
                )
            cluster.apply({**body, "metadata": meta}, field_manager="kubectl")
    else:
        sync(cluster, repo(ModuleRef("widget"), regular={"widget": "2.0.0"}))
    writes = cluster.writes

    result = sync(cluster, repo(ModuleRef("widget"), regular={"widget": "1.0.0"}))

    assert _status(result, "widget") == (ModuleState.WARNING, "DowngradeNotSupported")
    assert cluster.writes == writes
    live = cluster.get(DEPLOYMENT)
    assert live is not None
    assert live["metadata"]["labels"]["app.kubernetes.io/version"] == "2.0.0"
    assert result.state is ModuleState.WARNING


def test_default_configuration_is_created_once(cluster: InMemoryCluster) -> None:
    sync(cluster, repo(ModuleRef("widget")))
    cluster.patch(DEFAULT, {"spec": {"size": 7}})

    sync(cluster, repo(ModuleRef("widget")))
    live = cluster.get(DEFAULT)
    assert live is not None
    assert live["spec"]["size"] == 7  # not reverted

    cluster.delete(DEFAULT)
    sync(cluster, repo(ModuleRef("widget")))
    sync(cluster, repo(ModuleRef("widget"), regular={"widget": "2.0.0"}))
    assert cluster.get(DEFAULT) is None  # not re-created, also not on upgrade


def test_removing_an_ignore_module_deletes_nothing_and_unlabels(cluster: InMemoryCluster) -> None:
    sync(cluster, repo(ModuleRef("widget", strategy=Strategy.IGNORE)))
    assert cluster.get(DEFAULT) is None  # Ignore never creates the default configuration
    before = {ObjectRef.of(o) for o in cluster.objects()}

    result = sync(cluster, repo())

    assert _status(result, "widget") == (ModuleState.UNMANAGED, "StrategyIgnore")
    after = {ObjectRef.of(o) for o in cluster.objects()}
    assert before - after == {INVENTORY}
    for body in cluster.objects():
        labels = body["metadata"].get("labels", {})
        assert LABEL_MODULE not in labels
        assert LABEL_RUNTIME not in labels
        assert LABEL_MANAGED_BY not in labels
    assert sync(cluster, repo()).modules == ()  # reported once, then forgotten


def test_removing_a_create_and_delete_module_waits_for_user_resources(
    cluster: InMemoryCluster,
) -> None:
    sync(cluster, repo(ModuleRef("widget")))
    mine = {
        "apiVersion": "example.io/v1",
        "kind": "Widget",
        "metadata": {"name": "mine", "namespace": "team-a"},
    }
    cluster.apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}},
        field_manager="kubectl",
    )
    cluster.apply(mine, field_manager="kubectl")

    blocked = sync(cluster, repo())

    state, reason = _status(blocked, "widget")
    assert (state, reason) == (ModuleState.DELETING, "WaitingForResources")
    message = next(s.message for s in blocked.modules if s.module == "widget")
    assert "Widget/team-a/mine" in message
    assert cluster.get(DEFAULT) is None  # the default configuration we created goes first
    assert cluster.get(DEPLOYMENT) is not None  # the operator keeps running
    assert cluster.get(CRD) is not None

    still = sync(cluster, repo())
    assert _status(still, "widget") == (ModuleState.DELETING, "WaitingForResources")

    cluster.delete(ObjectRef.of(mine))
    done = sync(cluster, repo())

    assert _status(done, "widget") == (None, "Removed")
    assert cluster.get(DEPLOYMENT) is None
    assert cluster.get(CRD) is None
    assert cluster.get(INVENTORY) is None
    assert cluster.get(ObjectRef("v1", "Namespace", "", NAMESPACE)) is not None  # never ours


def test_strategy_at_removal_comes_from_the_inventory(cluster: InMemoryCluster) -> None:
    sync(cluster, repo(ModuleRef("widget", strategy=Strategy.IGNORE)))

    result = sync(cluster, repo())  # the entry (and its strategy) is gone from git

    assert _status(result, "widget") == (ModuleState.UNMANAGED, "StrategyIgnore")
    assert cluster.get(DEPLOYMENT) is not None


def test_copied_labels_and_unlisted_objects_are_never_deleted(cluster: InMemoryCluster) -> None:
    sync(cluster, repo(ModuleRef("widget")))
    labels = {LABEL_MANAGED_BY: "reconciler", LABEL_RUNTIME: "rt", LABEL_MODULE: "widget"}
    copycat = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "copycat", "namespace": NAMESPACE, "labels": labels},
    }
    cluster.apply(copycat, field_manager="kubectl")
    cluster.delete(INVENTORY)  # rebuilt from labels, but only for the manifest's objects

    sync(cluster, repo(ModuleRef("widget"), regular={"widget": "2.0.0"}))
    sync(cluster, repo())

    assert cluster.get(ObjectRef.of(copycat)) is not None
    assert cluster.get(DEPLOYMENT) is None


def test_unlabelled_object_in_the_inventory_is_not_deleted(cluster: InMemoryCluster) -> None:
    sync(cluster, repo(ModuleRef("widget")))
    cluster.patch(EXTRA, {"metadata": {"labels": {LABEL_MANAGED_BY: None}}})  # a user took it

    sync(cluster, repo(ModuleRef("widget"), regular={"widget": "2.0.0"}))

    assert cluster.get(EXTRA) is not None


def test_failing_list_changes_nothing_and_the_next_sync_completes(cluster: InMemoryCluster) -> None:
    sync(cluster, repo(ModuleRef("widget")))
    writes = cluster.writes
    cluster.faults.append(
        Fault(
            "list",
            ServerError("etcd timeout"),
            times=2,
        )
    )

    with pytest.raises(ServerError):
        sync(cluster, repo())
    assert cluster.writes == writes
    assert cluster.get(DEPLOYMENT) is not None

    cluster.faults.clear()
    done = sync(cluster, repo())
    assert _status(done, "widget") == (None, "Removed")
    assert cluster.get(DEPLOYMENT) is None


def test_failing_apply_mid_install_is_completed_by_the_next_sync(cluster: InMemoryCluster) -> None:
    cluster.faults.append(
        Fault("apply", ServerError("connection reset"), match=lambda ref: ref == DEPLOYMENT)
    )

    first = sync(cluster, repo(ModuleRef("widget")))

    assert _status(first, "widget") == (ModuleState.ERROR, "Retrying")
    assert cluster.get(DEPLOYMENT) is None
    assert cluster.get(INVENTORY) is not None  # intent recorded before the objects

    second = sync(cluster, repo(ModuleRef("widget")))
    # the rest is applied: still an install, since it never became Ready (L15)
    assert _status(second, "widget") == (ModuleState.READY, "Install")
    assert cluster.get(DEPLOYMENT) is not None
    assert cluster.get(DEFAULT) is not None


def test_failing_delete_mid_removal_is_completed_by_the_next_sync(cluster: InMemoryCluster) -> None:
    sync(cluster, repo(ModuleRef("widget")))
    cluster.faults.append(Fault("delete", ServerError("timeout"), match=lambda ref: ref == CRD))

    first = sync(cluster, repo())

    assert _status(first, "widget")[0] is ModuleState.ERROR
    assert cluster.get(INVENTORY) is not None
    second = sync(cluster, repo())
    assert _status(second, "widget") == (None, "Removed")
    assert cluster.get(CRD) is None


def test_dependencies_are_applied_first_and_wait_for_ready() -> None:
    cluster = InMemoryCluster(auto_ready=False)

    first = sync(cluster, repo(ModuleRef("gadget")))

    assert _status(first, "widget") == (ModuleState.PROCESSING, "WaitingForOperator")
    assert _status(first, "gadget") == (ModuleState.PROCESSING, "WaitingForDependency")
    assert cluster.get(ObjectRef("apps/v1", "Deployment", NAMESPACE, "gadget-operator")) is None

    cluster.set_status(DEPLOYMENT, {"observedGeneration": 1, "availableReplicas": 1})
    second = sync(cluster, repo(ModuleRef("gadget")))
    assert _status(second, "widget")[0] is ModuleState.READY
    assert _status(second, "gadget") == (ModuleState.PROCESSING, "WaitingForOperator")


def test_crds_must_be_established_before_the_rest() -> None:
    cluster = InMemoryCluster(auto_establish=False)

    result = sync(cluster, repo(ModuleRef("widget")))

    assert _status(result, "widget") == (ModuleState.PROCESSING, "WaitingForCRD")
    assert cluster.get(CRD) is not None
    assert cluster.get(DEPLOYMENT) is None  # the pass ended "not yet": no wait, no CR
    cluster.establish(CRD)
    again = sync(cluster, repo(ModuleRef("widget")))  # the next pass goes on from there
    assert _status(again, "widget")[0] is ModuleState.READY
    assert cluster.get(DEPLOYMENT) is not None


def test_upgrade_needing_downtime_waits_for_the_window(cluster: InMemoryCluster) -> None:
    window = MaintenanceWindow(("Sat",), "02:00", 240, "UTC")
    sync(cluster, repo(ModuleRef("widget"), regular={"widget": "2.0.0"}, window=window))
    bumped = repo(ModuleRef("widget"), regular={"widget": "2.1.0"}, window=window)

    waiting = sync(cluster, bumped)

    assert _status(waiting, "widget") == (ModuleState.READY, "WaitingForMaintenanceWindow")
    message = next(s.message for s in waiting.modules)
    assert "next: Sat 2026-11-21 02:00 UTC" in message
    saturday = NOW.replace(day=21, hour=3)
    upgraded = sync(cluster, bumped, now=saturday)
    assert _status(upgraded, "widget") == (ModuleState.READY, "Upgrade")


def test_adoption_of_a_module_installed_by_hand(cluster: InMemoryCluster) -> None:
    cluster.apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        field_manager="kubectl",
    )
    body = repo().modules["widget"].versions["1.0.0"].objects[3]
    cluster.apply(
        {**body, "metadata": {**body["metadata"], "namespace": NAMESPACE}}, field_manager="kubectl"
    )

    result = sync(cluster, repo(ModuleRef("widget")))

    assert _status(result, "widget") == (ModuleState.READY, "Adopted")
    live = cluster.get(DEPLOYMENT)
    assert live is not None
    assert live["metadata"]["labels"][LABEL_MODULE] == "widget"


def test_suspended_runtime_changes_nothing(cluster: InMemoryCluster) -> None:
    from dataclasses import replace

    config = repo(ModuleRef("widget"))
    config = replace(config, runtimes={"rt": replace(config.runtimes["rt"], suspend=True)})

    result = sync(cluster, config)

    assert result.plan.suspended
    assert cluster.writes == 0


def test_a_dependency_is_removed_after_its_dependents(cluster: InMemoryCluster) -> None:
    sync(cluster, repo(ModuleRef("gadget")))
    mine = {
        "apiVersion": "example.io/v1",
        "kind": "Gadget",
        "metadata": {"name": "mine", "namespace": NAMESPACE},
    }
    cluster.apply(mine, field_manager="kubectl")

    blocked = sync(cluster, repo())

    assert [m.module for m in blocked.plan.modules] == ["gadget", "widget"]
    assert _status(blocked, "gadget") == (ModuleState.DELETING, "WaitingForResources")
    assert _status(blocked, "widget") == (ModuleState.DELETING, "WaitingForDependents")
    assert cluster.get(DEPLOYMENT) is not None

    cluster.delete(ObjectRef.of(mine))
    done = sync(cluster, repo())
    assert _status(done, "gadget") == (None, "Removed")
    assert _status(done, "widget") == (None, "Removed")
    assert cluster.get(DEPLOYMENT) is None


def test_plans_are_comparable_serialisable_data(cluster: InMemoryCluster) -> None:
    import json

    first = sync_dry(cluster)
    second = sync_dry(cluster)

    assert first == second
    assert json.dumps(first.to_json(), sort_keys=True) == json.dumps(
        second.to_json(), sort_keys=True
    )
    widget = next(m for m in first.to_json()["modules"] if m["module"] == "widget")
    assert widget["action"] == "install"
    assert {c["action"] for c in widget["changes"]} == {"create"}


def sync_dry(cluster: InMemoryCluster) -> Plan:
    from reconciler.lifecycle.executor import sync_runtime

    return sync_runtime(cluster, repo(ModuleRef("widget")), "rt", now=NOW, dry_run=True).plan
