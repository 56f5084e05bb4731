"""A failed upgrade can be rolled back (L15), through whole syncs on the in-memory cluster.

An upgrade of ``widget`` from 1.0.0 to 2.0.0 (2.0.0 drops the ConfigMap ``widget-extra`` and adds
the Service ``widget-metrics``) that fails half-way (its prune refused) or whose operator never
becomes available has
relabelled the operator 2.0.0; git going back to 1.0.0 is then a rollback, not a downgrade: every
object as 1.0.0 ships it, what only 2.0.0 has pruned. The status says which version runs and
which did not make it; the inventory records the version a module became Ready at, without a
write of its own; an inventory written before L15 is read as before."""

from __future__ import annotations

import json

from reconciler.cluster.memory import Fault, InMemoryCluster
from reconciler.core.inventory import DATA_KEY, inventory_from_configmap, inventory_ref
from reconciler.core.model import ANNOTATION_MODULE_VERSION, LABEL_APP_VERSION, ModuleRef
from reconciler.core.objects import Body, ObjectRef
from reconciler.core.plan_values import ModuleAction
from reconciler.core.reasons import Reason
from reconciler.core.status import ModuleStatus
from reconciler.errors import ForbiddenError
from reconciler.lifecycle.executor import ModuleState, SyncResult
from tests.support.lifecycle_helpers import NAMESPACE, repo, sync

DEPLOYMENT = ObjectRef("apps/v1", "Deployment", NAMESPACE, "widget-operator")
EXTRA = ObjectRef("v1", "ConfigMap", NAMESPACE, "widget-extra")
SERVICE = ObjectRef("v1", "Service", NAMESPACE, "widget-metrics")
INVENTORY = inventory_ref("reconciler-system", "widget")


def _sync(cluster: InMemoryCluster, version: str) -> SyncResult:
    return sync(cluster, repo(ModuleRef("widget"), regular={"widget": version}))


def _widget(result: SyncResult) -> ModuleStatus:
    return next(s for s in result.modules if s.module == "widget")


def _label(cluster: InMemoryCluster) -> str:
    body = cluster.get(DEPLOYMENT)
    assert body is not None
    return str(body["metadata"]["labels"][LABEL_APP_VERSION])


def _inventory_data(cluster: InMemoryCluster) -> dict[str, object]:
    body = cluster.get(INVENTORY)
    assert body is not None
    data: dict[str, object] = json.loads(body["data"][DATA_KEY])
    return data


def _ready_1_0_0() -> InMemoryCluster:
    cluster = InMemoryCluster()
    assert _widget(_sync(cluster, "1.0.0")).state is ModuleState.READY
    return cluster


def _assert_1_0_0_whole(cluster: InMemoryCluster) -> None:
    assert _label(cluster) == "1.0.0"
    assert (
        _body(cluster, DEPLOYMENT)["metadata"]["annotations"][ANNOTATION_MODULE_VERSION] == "1.0.0"
    )
    assert cluster.get(EXTRA) is not None
    assert cluster.get(SERVICE) is None
    inventory = inventory_from_configmap(_body(cluster, INVENTORY))
    assert (inventory.version, inventory.ready_version) == ("1.0.0", "1.0.0")
    assert SERVICE not in inventory.objects


def _body(cluster: InMemoryCluster, ref: ObjectRef) -> Body:
    body = cluster.get(ref)
    assert body is not None
    return body


def test_an_upgrade_whose_operator_never_becomes_available_is_rolled_back_whole() -> None:
    cluster = _ready_1_0_0()
    cluster.auto_ready = False  # 2.0.0's operator never becomes available

    upgrading = _widget(_sync(cluster, "2.0.0"))

    assert (upgrading.state, upgrading.reason) == (ModuleState.PROCESSING, "WaitingForOperator")
    assert upgrading.message.startswith("1.0.0 runs; upgrading to 2.0.0: ")
    assert (upgrading.ready_version, upgrading.target_version) == ("1.0.0", "2.0.0")
    assert _label(cluster) == "2.0.0"
    assert cluster.get(SERVICE) is not None
    assert cluster.get(EXTRA) is None
    again = _widget(_sync(cluster, "2.0.0"))  # still not Ready: still upgrading from 1.0.0
    assert (again.ready_version, again.target_version) == ("1.0.0", "2.0.0")

    cluster.auto_ready = True
    back = _sync(cluster, "1.0.0")

    entry = back.plan.module("widget")
    assert entry is not None
    assert (entry.action, entry.reason) == (ModuleAction.RECONFIGURE, Reason.ROLLBACK)
    status = _widget(back)
    assert (status.state, status.version, status.target_version) == (
        ModuleState.READY,
        "1.0.0",
        None,
    )
    _assert_1_0_0_whole(cluster)


def test_an_upgrade_that_fails_half_way_is_rolled_back() -> None:
    cluster = _ready_1_0_0()
    refusal = ForbiddenError('configmaps "widget-extra" is forbidden: cannot delete')
    cluster.faults.append(Fault("delete", refusal, match=lambda ref: ref == EXTRA))

    failed = _widget(_sync(cluster, "2.0.0"))

    assert (failed.state, failed.reason, failed.version) == (
        ModuleState.ERROR,
        "Failed",
        "1.0.0",
    )
    assert failed.message == f"1.0.0 runs; the upgrade to 2.0.0 failed: {refusal}"
    assert (failed.ready_version, failed.target_version) == ("1.0.0", "2.0.0")
    assert _label(cluster) == "2.0.0", "the operator was relabelled before the failure"
    assert cluster.get(SERVICE) is not None

    back = _widget(_sync(cluster, "1.0.0"))

    assert (back.state, back.reason) == (ModuleState.READY, Reason.ROLLBACK)
    _assert_1_0_0_whole(cluster)


def test_a_version_that_became_ready_is_not_rolled_back() -> None:
    cluster = _ready_1_0_0()
    assert _widget(_sync(cluster, "2.0.0")).state is ModuleState.READY
    assert _inventory_data(cluster)["readyVersion"] == "2.0.0"

    held = _widget(_sync(cluster, "1.0.0"))

    assert (held.state, held.reason) == (ModuleState.WARNING, "DowngradeNotSupported")
    assert _label(cluster) == "2.0.0"


def test_an_inventory_written_before_l15_is_read_as_before_then_records_readiness() -> None:
    cluster = _ready_1_0_0()
    _sync(cluster, "2.0.0")
    data = {k: v for k, v in _inventory_data(cluster).items() if k != "readyVersion"}
    cluster.patch(INVENTORY, {"data": {DATA_KEY: json.dumps(data)}})

    held = _widget(_sync(cluster, "1.0.0"))

    assert held.reason == "DowngradeNotSupported"
    _widget(_sync(cluster, "2.0.0"))
    assert _inventory_data(cluster)["readyVersion"] == "2.0.0", "recorded once Ready"


def test_an_old_inventory_upgraded_by_this_version_can_roll_back() -> None:
    cluster = _ready_1_0_0()
    data = {k: v for k, v in _inventory_data(cluster).items() if k != "readyVersion"}
    cluster.patch(INVENTORY, {"data": {DATA_KEY: json.dumps(data)}})
    cluster.auto_ready = False

    _sync(cluster, "2.0.0")
    cluster.auto_ready = True
    back = _widget(_sync(cluster, "1.0.0"))

    assert back.reason == Reason.ROLLBACK
    _assert_1_0_0_whole(cluster)


def test_becoming_ready_is_recorded_without_a_write_of_its_own() -> None:
    cluster = InMemoryCluster(auto_ready=False)
    _sync(cluster, "1.0.0")
    assert _inventory_data(cluster)["readyVersion"] == ""  # never Ready yet
    cluster.set_status(DEPLOYMENT, _available(_body(cluster, DEPLOYMENT)))
    writes = cluster.writes

    ready = _widget(_sync(cluster, "1.0.0"))
    assert (ready.state, ready.reason) == (ModuleState.READY, "Ready")
    assert _inventory_data(cluster)["readyVersion"] == "1.0.0"
    assert cluster.writes == writes + 1  # the inventory, once
    writes = cluster.writes
    _sync(cluster, "1.0.0")
    assert cluster.writes == writes


def _available(body: Body) -> dict[str, object]:
    generation = body["metadata"]["generation"]
    return {"observedGeneration": generation, "replicas": 1, "availableReplicas": 1}
