"""Live bodies with nulls where a field is usually absent: observe, plan and readiness read them
as absent and decide exactly what they decide without the nulls.

`NullAnswers` is the in-memory cluster answering every read and write with ``null`` in each
field a reader might take for a map or a list (``status`` and its conditions and counters,
``metadata.labels``/``annotations``/``finalizers``/``ownerReferences``, ``spec``, ``data``)
wherever the field is absent. Each scenario runs on it and on the plain in-memory cluster, and
both must end the same way. Before reading was null-safe, these crashed with ``TypeError``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from reconciler.cluster.memory import InMemoryCluster
from reconciler.cluster.snapshot import load_snapshot
from reconciler.core.inventory import inventory_from_configmap, inventory_ref
from reconciler.core.live import workload_available
from reconciler.core.model import ModuleRef, Strategy
from reconciler.core.objects import Body, ObjectRef, crd_kind, is_established
from reconciler.lifecycle.executor import ModuleState, SyncResult
from tests.support.lifecycle_helpers import NAMESPACE, repo, sync

NULLED_METADATA = ("labels", "annotations", "finalizers", "ownerReferences")
NULLED_STATUS = (
    "conditions",
    "observedGeneration",
    "replicas",
    "readyReplicas",
    "availableReplicas",
    "updatedReplicas",
    "desiredNumberScheduled",
    "numberAvailable",
    "acceptedNames",
    "storedVersions",
)
NULLED_TOP = ("status", "spec", "data")
DEPLOYMENT = ObjectRef("apps/v1", "Deployment", NAMESPACE, "widget-operator")
CRD = ObjectRef("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets.example.io")


def with_nulls(body: Mapping[str, Any]) -> Body:
    """``body`` with ``null`` in every listed field it lacks."""
    nulled = copy.deepcopy(dict(body))
    for name in NULLED_TOP:
        nulled.setdefault(name, None)
    metadata = nulled.setdefault("metadata", {})
    for name in NULLED_METADATA:
        metadata.setdefault(name, None)
    if isinstance(nulled["status"], dict):
        for name in NULLED_STATUS:
            nulled["status"].setdefault(name, None)
    return nulled


class NullAnswers(InMemoryCluster):
    """The in-memory cluster, answering with nulls where fields are absent."""

    def get(self, ref: ObjectRef) -> Body | None:
        found = super().get(ref)
        return with_nulls(found) if found is not None else None

    def list_objects(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> list[Body]:
        found = super().list_objects(api_version, kind, namespace=namespace, labels=labels)
        return [with_nulls(b) for b in found]

    def apply(
        self,
        body: Mapping[str, Any],
        *,
        field_manager: str,
        force: bool = True,
        dry_run: bool = False,
    ) -> Body:
        answer = super().apply(body, field_manager=field_manager, force=force, dry_run=dry_run)
        return with_nulls(answer)

    def patch(self, ref: ObjectRef, merge_patch: Mapping[str, Any]) -> Body:
        return with_nulls(super().patch(ref, merge_patch))


Scenario = Callable[[InMemoryCluster], list[SyncResult]]


def _outcome(results: list[SyncResult]) -> list[Any]:
    return [
        (r.plan.to_json(), [(m.module, m.state, m.reason, m.version) for m in r.modules])
        for r in results
    ]


def _install_upgrade_and_remove(cluster: InMemoryCluster) -> list[SyncResult]:
    both = (ModuleRef("widget"), ModuleRef("gadget"))
    return [
        sync(cluster, repo(*both)),
        sync(cluster, repo(*both)),
        sync(cluster, repo(*both, regular={"widget": "2.0.0", "gadget": "1.0.0"})),
        sync(cluster, repo(ModuleRef("widget"), regular={"widget": "2.0.0"})),
        sync(cluster, repo()),
    ]


def _removal_blocked_by_a_users_resource(cluster: InMemoryCluster) -> list[SyncResult]:
    first = sync(cluster, repo(ModuleRef("widget")))
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}
    cluster.apply(namespace, field_manager="kubectl")
    mine = {
        "apiVersion": "example.io/v1",
        "kind": "Widget",
        "metadata": {"name": "mine", "namespace": "team-a"},
    }
    cluster.apply(mine, field_manager="kubectl")
    blocked = sync(cluster, repo())
    cluster.delete(ObjectRef.of(mine))
    return [first, blocked, sync(cluster, repo())]


def _ignore_strategy_and_a_lost_inventory(cluster: InMemoryCluster) -> list[SyncResult]:
    ignore = ModuleRef("widget", strategy=Strategy.IGNORE)
    first = sync(cluster, repo(ModuleRef("widget")))
    cluster.delete(inventory_ref("reconciler-system", "widget"))
    rebuilt = sync(cluster, repo(ModuleRef("widget")))
    return [first, rebuilt, sync(cluster, repo(ignore)), sync(cluster, repo())]


def _waiting_for_crds_and_operators(cluster: InMemoryCluster) -> list[SyncResult]:
    cluster.auto_establish = cluster.auto_ready = False
    waiting_for_crd = sync(cluster, repo(ModuleRef("widget")))
    cluster.establish(CRD)
    waiting_for_operator = sync(cluster, repo(ModuleRef("widget")))
    cluster.set_status(DEPLOYMENT, {"observedGeneration": 1, "availableReplicas": 1})
    return [waiting_for_crd, waiting_for_operator, sync(cluster, repo(ModuleRef("widget")))]


SCENARIOS: list[Scenario] = [
    _install_upgrade_and_remove,
    _removal_blocked_by_a_users_resource,
    _ignore_strategy_and_a_lost_inventory,
    _waiting_for_crds_and_operators,
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__.strip("_"))
def test_nulls_change_no_decision(scenario: Scenario) -> None:
    plain = scenario(InMemoryCluster())
    nulled = scenario(NullAnswers())

    assert _outcome(nulled) == _outcome(plain)
    assert all(m.state is not ModuleState.ERROR for r in nulled for m in r.modules)


def test_the_waiting_scenario_waits_where_it_should() -> None:
    results = _waiting_for_crds_and_operators(NullAnswers())

    reasons = [[m.reason for m in r.modules] for r in results]
    assert reasons == [["WaitingForCRD"], ["WaitingForOperator"], ["Ready"]]


def test_readers_take_null_fields_as_absent() -> None:
    crd = with_nulls({"kind": "CustomResourceDefinition", "metadata": {"name": "x"}})
    crd["status"] = {"conditions": None, "acceptedNames": None, "storedVersions": None}
    workload = with_nulls({"kind": "Deployment", "metadata": {"name": "w", "generation": 2}})
    workload["status"] = {"observedGeneration": None, "availableReplicas": None}
    inventory = with_nulls({"kind": "ConfigMap", "metadata": {"name": "inventory-x"}})

    assert is_established(crd) is False
    assert is_established({"status": None}) is False
    assert crd_kind(crd) == ("", "")
    assert workload_available(workload) is False
    assert ObjectRef.of({"metadata": None}) == ObjectRef("", "", "", "")
    with pytest.raises(ValueError, match="not a valid inventory"):
        inventory_from_configmap(inventory)


def test_a_snapshot_list_with_null_items_is_empty(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text("apiVersion: v1\nkind: List\nitems: null\n")

    assert load_snapshot(path).objects() == []
