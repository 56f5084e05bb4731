"""Objects marked to be kept (``reconciler.dev/prune: disabled``, Helm's
``helm.sh/resource-policy: keep``) are never deleted by an upgrade that drops them or by their
module's removal: they are released (our labels and annotation removed, out of the inventory)
and reported ``kept``; a kept CRD is no deletion for the brake. On the in-memory cluster (the
same through whole syncs on the real API server: tests/contract/test_keep_on_prune.py)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from reconciler.cli.report import plan_text
from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.brake import count_deletions
from reconciler.core.inventory import inventory_ref
from reconciler.core.model import (
    LABEL_MANAGED_BY,
    LABEL_MODULE,
    ConfigRepo,
    ModuleRef,
    ModuleVersion,
    Settings,
)
from reconciler.core.objects import ObjectRef
from reconciler.core.plan_values import ObjectAction
from reconciler.core.status import ChangeAction, ModuleState
from reconciler.lifecycle.executor import SyncResult
from tests.support.lifecycle_helpers import NAMESPACE, WIDGET, deployment, repo, simple, sync

PRUNE_DISABLED = {"reconciler.dev/prune": "disabled"}
HELM_KEEP = {"helm.sh/resource-policy": "keep"}
KEPT = ObjectRef("v1", "ConfigMap", NAMESPACE, "widget-kept")
PLAIN = ObjectRef("v1", "ConfigMap", NAMESPACE, "widget-plain")
CRD = ObjectRef("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets.example.io")
OPERATOR = ObjectRef("apps/v1", "Deployment", NAMESPACE, "widget-operator")


def _marked(name: str, annotations: dict[str, str]) -> dict[str, Any]:
    body = simple("ConfigMap", name, data={"keep": "me"})
    body["metadata"]["annotations"] = dict(annotations)
    return body


def _repo(version: str, *objects: dict[str, Any], keep_crd: bool = False) -> ConfigRepo:
    """Widget at ``version``: its 1.0.0 objects (the CRD marked to be kept when ``keep_crd``)
    and ``objects``; no default configuration."""
    base = WIDGET.versions["1.0.0"]
    shipped = []
    for body in base.objects:
        if body["kind"] == "Deployment":
            body = deployment("widget-operator", version)
        if body["kind"] == "CustomResourceDefinition" and keep_crd:
            body = {**body, "metadata": {**body["metadata"], "annotations": PRUNE_DISABLED}}
        shipped.append(body)
    widget = replace(WIDGET, versions={version: ModuleVersion(version, (*shipped, *objects))})
    config = repo(ModuleRef("widget", version=version))
    return replace(config, modules={**config.modules, "widget": widget})


def _labels(cluster: InMemoryCluster, ref: ObjectRef) -> dict[str, str]:
    body = cluster.get(ref)
    assert body is not None, f"{ref.subject} is gone"
    return dict(body["metadata"].get("labels") or {})


def _done(result: SyncResult, ref: ObjectRef) -> list[ChangeAction]:
    return [c.action for c in result.outcome.changes if c.ref == ref]


def _inventory(cluster: InMemoryCluster) -> str:
    body = cluster.get(inventory_ref(Settings().system_namespace, "widget"))
    assert body is not None
    return str(body["data"])


def test_an_object_marked_to_be_kept_that_an_upgrade_drops_is_released_not_deleted() -> None:
    cluster = InMemoryCluster()
    sync(
        cluster, _repo("1.0.0", _marked("widget-kept", PRUNE_DISABLED), _marked("widget-plain", {}))
    )
    assert _labels(cluster, KEPT)[LABEL_MODULE] == "widget"

    result = sync(cluster, _repo("2.0.0"))

    entry = result.plan.module("widget")  # the plan: what diff shows
    assert entry is not None
    actions = {c.ref: c.action for c in entry.changes}
    assert (actions[KEPT], actions[PLAIN]) == (ObjectAction.KEEP, ObjectAction.DELETE)
    text = plan_text(result.plan)
    assert f"= {KEPT.subject} (kept: released, not deleted)" in text
    assert f"- {PLAIN.subject}" in text
    assert cluster.get(PLAIN) is None
    labels = _labels(cluster, KEPT)
    assert LABEL_MANAGED_BY not in labels
    assert LABEL_MODULE not in labels
    assert "widget-kept" not in _inventory(cluster)


def test_the_sync_reports_the_object_kept_and_why() -> None:
    cluster = InMemoryCluster()
    sync(cluster, _repo("1.0.0", _marked("widget-kept", PRUNE_DISABLED)))

    result = sync(cluster, _repo("2.0.0"))

    assert _done(result, KEPT) == [ChangeAction.KEPT]
    status = next(s for s in result.modules if s.module == "widget")
    assert status.state is ModuleState.READY
    assert (
        f"{KEPT.subject} is kept (reconciler.dev/prune: disabled): released, not deleted"
        in status.message
    )
    again = sync(cluster, _repo("2.0.0"))  # released once: no longer ours, nothing more to do
    assert _done(again, KEPT) == []
    assert cluster.get(KEPT) is not None


def test_a_module_removed_leaves_what_helm_keeps_and_deletes_the_rest() -> None:
    cluster = InMemoryCluster()
    sync(cluster, _repo("1.0.0", _marked("widget-kept", HELM_KEEP)))

    removed = sync(cluster, repo())

    assert _done(removed, KEPT) == [ChangeAction.KEPT]
    assert _done(removed, OPERATOR) == [ChangeAction.DELETED]
    assert cluster.get(OPERATOR) is None
    assert LABEL_MODULE not in _labels(cluster, KEPT)
    assert cluster.get(inventory_ref(Settings().system_namespace, "widget")) is None
    status = next(s for s in removed.modules if s.module == "widget")
    assert "is kept (helm.sh/resource-policy: keep)" in status.message


def test_a_kept_crd_with_custom_resources_left_is_released_at_once() -> None:
    cluster = InMemoryCluster()
    sync(cluster, _repo("1.0.0", keep_crd=True))
    metadata = {"name": "w", "namespace": NAMESPACE}
    mine = {"apiVersion": "example.io/v1", "kind": "Widget", "metadata": metadata}
    cluster.apply(mine, field_manager="kubectl")
    without_crd = _repo("2.0.0", keep_crd=True)
    widget = without_crd.modules["widget"]
    version = widget.versions["2.0.0"]
    objects = tuple(o for o in version.objects if o["kind"] != "CustomResourceDefinition")
    dropped = replace(widget, versions={"2.0.0": replace(version, objects=objects)})
    dropped_repo = replace(without_crd, modules={**without_crd.modules, "widget": dropped})

    assert count_deletions({"rt": {"widget": "1.0.0"}}, _with_old(dropped_repo)).count == 0
    result = sync(cluster, dropped_repo)

    assert _done(result, CRD) == [ChangeAction.KEPT]
    assert cluster.get(CRD) is not None
    assert LABEL_MODULE not in _labels(cluster, CRD)
    assert cluster.get(ObjectRef.of(mine)) is not None
    status = next(s for s in result.modules if s.module == "widget")
    assert status.state is ModuleState.READY  # not waiting on its custom resources


def _with_old(config: ConfigRepo) -> ConfigRepo:
    """``config`` whose widget also has its 1.0.0 (CRD marked to be kept), for the brake."""
    old = _repo("1.0.0", keep_crd=True).modules["widget"].versions["1.0.0"]
    widget = config.modules["widget"]
    merged = replace(widget, versions={**widget.versions, "1.0.0": old})
    return replace(config, modules={**config.modules, "widget": merged})


def test_a_dropped_crd_not_marked_still_counts_for_the_brake() -> None:
    config = _repo("2.0.0")
    widget = config.modules["widget"]
    version = widget.versions["2.0.0"]
    objects = tuple(o for o in version.objects if o["kind"] != "CustomResourceDefinition")
    old = _repo("1.0.0").modules["widget"].versions["1.0.0"]
    versions = {"1.0.0": old, "2.0.0": replace(version, objects=objects)}
    config = replace(config, modules={"widget": replace(widget, versions=versions)})

    assert count_deletions({"rt": {"widget": "1.0.0"}}, config).crds == (
        "rt/widget/widgets.example.io",
    )
