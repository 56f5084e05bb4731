"""User data is never deleted without blocking (L7, L8, S1), on the in-memory cluster.

A CRD an upgrade drops waits for its custom resources; a Namespace in a manifest is deleted only
when it holds nothing but our objects; prune checks the module label; an Ignore module's default
configuration survives removal and deprovision; two modules declaring one object is refused.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.brake import count_deletions
from reconciler.core.model import (
    LABEL_MANAGED_BY,
    LABEL_MODULE,
    ConfigRepo,
    ModuleRef,
    ModuleVersion,
    Strategy,
)
from reconciler.core.objects import ObjectRef
from reconciler.lifecycle.executor import ModuleState, SyncResult
from reconciler.operations.engine import Engine
from reconciler.operations.model import OperationState
from reconciler.operations.runner import Runner
from reconciler.operations.store import SqliteStore
from reconciler.source.loader import load_repo
from tests.support.lifecycle_helpers import NAMESPACE, WIDGET, deployment, repo, simple, sync
from tests.support.repos import API, dump, dump_all, write_files

CRD = ObjectRef("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets.example.io")
DEFAULT = ObjectRef("example.io/v1", "Widget", NAMESPACE, "default")
DEPLOYMENT = ObjectRef("apps/v1", "Deployment", NAMESPACE, "widget-operator")
OWN_NAMESPACE = ObjectRef("v1", "Namespace", "", "widget-data")


def _status(result: SyncResult, module: str) -> tuple[ModuleState | None, str, str]:
    found = next(s for s in result.modules if s.module == module)
    return found.state, found.reason, found.message


def _with_versions(config: ConfigRepo, **versions: ModuleVersion) -> ConfigRepo:
    widget = replace(WIDGET, versions={**WIDGET.versions, **versions})
    return replace(config, modules={**config.modules, "widget": widget})


def _user_widget(cluster: InMemoryCluster, name: str) -> ObjectRef:
    metadata = {"name": name, "namespace": "team-a"}
    body = {"apiVersion": "example.io/v1", "kind": "Widget", "metadata": metadata}
    cluster.apply(body, field_manager="kubectl")
    return ObjectRef.of(body)


@pytest.fixture
def cluster() -> InMemoryCluster:
    made = InMemoryCluster()
    team = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}
    made.apply(team, field_manager="kubectl")
    return made


# -- a CRD dropped by an upgrade -----------------------------------------------------------------


def _without_crd(version: str) -> ModuleVersion:
    base = WIDGET.versions["1.0.0"]
    objects = tuple(o for o in base.objects if o["kind"] != "CustomResourceDefinition")
    objects = tuple(
        deployment("widget-operator", version) if o["kind"] == "Deployment" else o for o in objects
    )
    return ModuleVersion(version, objects, None)


def test_a_crd_dropped_by_an_upgrade_waits_for_its_custom_resources(
    cluster: InMemoryCluster,
) -> None:
    sync(cluster, repo(ModuleRef("widget")))
    mine = [_user_widget(cluster, n) for n in ("a", "b", "c")]
    upgraded = _with_versions(
        repo(ModuleRef("widget", version="3.0.0")), **{"3.0.0": _without_crd("3.0.0")}
    )

    blocked = sync(cluster, upgraded)

    state, reason, message = _status(blocked, "widget")
    assert (state, reason) == (ModuleState.WARNING, "CRDInUse")
    assert (
        "CRD widgets.example.io is kept until its custom resources are gone: 3 object(s)" in message
    )
    assert "Widget/team-a/a" in message
    assert cluster.get(CRD) is not None
    assert all(cluster.get(ref) is not None for ref in mine)
    entry = blocked.plan.module("widget")
    assert entry is not None
    assert CRD in entry.kept
    assert "delete" not in [c.action for c in entry.changes if c.ref == CRD]

    again = sync(cluster, upgraded)  # still kept, still reported: the inventory lists it
    assert _status(again, "widget")[1] == "CRDInUse"

    for ref in mine:
        cluster.delete(ref)
    done = sync(cluster, upgraded)

    assert _status(done, "widget")[0] is ModuleState.READY
    assert cluster.get(CRD) is None


def test_a_dropped_crd_counts_for_the_deletion_brake() -> None:
    upgraded = _with_versions(
        repo(ModuleRef("widget", version="3.0.0")), **{"3.0.0": _without_crd("3.0.0")}
    )

    deletions = count_deletions({"rt": {"widget": "1.0.0"}}, upgraded)

    assert deletions.crds == ("rt/widget/widgets.example.io",)
    assert deletions.count == 1


# -- a Namespace in a manifest -------------------------------------------------------------------


def _with_namespace(config: ConfigRepo) -> ConfigRepo:
    base = WIDGET.versions["1.0.0"]
    namespace = simple("Namespace", OWN_NAMESPACE.name)
    data = simple("ConfigMap", "widget-settings", data={"a": "1"})
    data["metadata"]["namespace"] = OWN_NAMESPACE.name
    version = replace(base, objects=(namespace, *base.objects, data))
    return _with_versions(config, **{"1.0.0": version})


def test_a_namespace_holding_a_users_objects_is_released_not_deleted(
    cluster: InMemoryCluster,
) -> None:
    sync(cluster, _with_namespace(repo(ModuleRef("widget"))))
    user = [
        simple("ConfigMap", "team-config", data={"k": "v"}),
        simple("PersistentVolumeClaim", "team-data", spec={"resources": {}}),
    ]
    for body in user:
        body["metadata"]["namespace"] = OWN_NAMESPACE.name
        cluster.apply(body, field_manager="kubectl")

    removed = sync(cluster, _with_namespace(repo()))

    state, reason, message = _status(removed, "widget")
    assert (state, reason) == (None, "Removed")
    assert "namespace widget-data is released, not deleted: it holds 2 object(s)" in message
    namespace = cluster.get(OWN_NAMESPACE)
    assert namespace is not None
    assert LABEL_MANAGED_BY not in (namespace["metadata"].get("labels") or {})
    assert all(cluster.get(ObjectRef.of(b)) is not None for b in user)
    assert cluster.get(ObjectRef("v1", "ConfigMap", OWN_NAMESPACE.name, "widget-settings")) is None
    assert cluster.get(DEPLOYMENT) is None


def test_a_namespace_holding_only_our_objects_is_deleted(cluster: InMemoryCluster) -> None:
    sync(cluster, _with_namespace(repo(ModuleRef("widget"))))

    removed = sync(cluster, _with_namespace(repo()))

    assert _status(removed, "widget")[:2] == (None, "Removed")
    assert cluster.get(OWN_NAMESPACE) is None


# -- labels and strategies -----------------------------------------------------------------------


def test_prune_skips_an_object_another_module_labelled_as_its_own(cluster: InMemoryCluster) -> None:
    sync(cluster, repo(ModuleRef("widget")))
    extra = ObjectRef("v1", "ConfigMap", NAMESPACE, "widget-extra")
    cluster.patch(extra, {"metadata": {"labels": {LABEL_MODULE: "other"}}})

    upgraded = sync(cluster, repo(ModuleRef("widget", version="2.0.0")))

    assert _status(upgraded, "widget")[0] is ModuleState.READY
    assert cluster.get(extra) is not None


def test_an_ignore_switched_default_configuration_survives_removal(
    cluster: InMemoryCluster,
) -> None:
    sync(cluster, repo(ModuleRef("widget")))
    assert cluster.get(DEFAULT) is not None
    sync(cluster, repo(ModuleRef("widget", strategy=Strategy.IGNORE)))

    removed = sync(cluster, repo())

    assert _status(removed, "widget")[0] is ModuleState.UNMANAGED
    default = cluster.get(DEFAULT)
    assert default is not None
    assert LABEL_MANAGED_BY not in (default["metadata"].get("labels") or {})
    assert cluster.get(DEPLOYMENT) is not None


def test_an_ignore_switched_default_configuration_survives_deprovision(
    cluster: InMemoryCluster, tmp_path: Path
) -> None:
    store = SqliteStore(tmp_path / "state.db")
    clock = lambda: datetime.now(UTC)  # noqa: E731

    def run(config: ConfigRepo) -> OperationState:
        engine = Engine(store, clock=clock, plugins=[])
        runner = Runner(store, engine, config, lambda access, name: cluster, clock)
        return runner.run(runner.operation_for("rt")).operation.state

    assert run(repo(ModuleRef("widget"))) is OperationState.SUCCEEDED
    assert run(repo(ModuleRef("widget", strategy=Strategy.IGNORE))) is OperationState.SUCCEEDED
    gone = replace(repo(), runtimes={})

    assert run(gone) is not OperationState.FAILED
    assert cluster.get(DEFAULT) is not None
    assert cluster.get(DEPLOYMENT) is not None


# -- one owner per object ------------------------------------------------------------------------


def _module_files(name: str, objects: list[dict[str, Any]]) -> dict[str, str]:
    module = {
        "apiVersion": API,
        "kind": "Module",
        "metadata": {"name": name},
        "spec": {
            "namespace": f"{name}-system",
            "operator": {"kind": "Deployment", "name": f"{name}-op"},
        },
    }
    manifest = [*objects, {**deployment(f"{name}-op", "1.0.0")}]
    return {
        f"modules/{name}/module.yaml": dump(module),
        f"modules/{name}/1.0.0/manifest.yaml": dump_all(manifest),
    }


def test_two_modules_declaring_the_same_object_is_a_validation_error(tmp_path: Path) -> None:
    shared = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shared"}}
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "same", "namespace": "x"},
    }
    channel = {"apiVersion": API, "kind": "Channel", "metadata": {"name": "regular"}}
    channel["spec"] = {"modules": {"alpha": "1.0.0", "beta": "1.0.0"}}
    root = write_files(
        tmp_path / "repo",
        {
            **_module_files("alpha", [shared, config]),
            **_module_files("beta", [shared, config]),
            "channels/regular.yaml": dump(channel),
            "runtimes/.keep": "",
        },
    )
    (root / "runtimes" / ".keep").unlink()

    validation = load_repo(root)

    messages = [(d.path.rsplit("repo/", 1)[1], d.rule, d.message) for d in validation.diagnostics]
    assert messages == [
        (
            "modules/beta/1.0.0/manifest.yaml",
            "C4",
            f"Namespace/shared is also declared by module 'alpha' ({root}/modules/alpha/1.0.0/"
            "manifest.yaml); two modules may not declare the same object",
        ),
        (
            "modules/beta/1.0.0/manifest.yaml",
            "C4",
            f"ConfigMap/x/same is also declared by module 'alpha' ({root}/modules/alpha/1.0.0/"
            "manifest.yaml); two modules may not declare the same object",
        ),
    ]
