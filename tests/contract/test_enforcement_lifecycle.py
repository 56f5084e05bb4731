"""Configuration enforcement through whole syncs, on the in-memory cluster and on the real API
server: an override reaches the default configuration CR; a user's
edit of another field survives any number of syncs; a user's edit of the enforced field is
reverted and reported; removing the override releases the field with its value; a deleted
default configuration comes back only while fields of it are enforced. The module's CRD has a
closed schema, as a real module's has, in the test's throwaway group."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from reconciler.core.enforce import CONFIG_FIELD_MANAGER, owned_paths
from reconciler.core.model import (
    Channel,
    ClusterAccess,
    ConfigRepo,
    Module,
    ModuleRef,
    ModuleVersion,
    Runtime,
    Settings,
)
from reconciler.core.objects import ObjectRef
from reconciler.core.status import ChangeAction
from reconciler.lifecycle.executor import SyncResult
from tests.support.contract_targets import Target
from tests.support.crds import namespaced_crd
from tests.support.kube_control_plane import ControlPlane
from tests.support.kube_workloads import deployments_made_available
from tests.support.lifecycle_helpers import settled_sync

NOW = datetime(2026, 11, 18, 12, 0, tzinfo=UTC)


class Fleet:
    """A runtime ``rt`` with module ``knob`` (a CRD ``Knob``, its operator, a default ``Knob``
    with ``size: 3``), in the target's throwaway names."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.namespace = target.namespace("knob")
        self.system = target.namespace("system")
        self.crd = _crd(target.group)
        self.cr = ObjectRef(f"{target.group}/v1", "Knob", self.namespace, "default")
        for ref in (
            ObjectRef.of(self.crd),
            ObjectRef("v1", "Namespace", "", self.namespace),
            ObjectRef("v1", "Namespace", "", self.system),
        ):
            target.created.append(ref)

    def repo(self, config: dict[str, Any] | None) -> ConfigRepo:
        labels = {"app": "knob"}
        pod = {"containers": [{"name": "m", "image": "knob:1"}]}
        operator = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "knob-operator"},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": pod},
            },
        }
        default = {
            "apiVersion": self.cr.api_version,
            "kind": "Knob",
            "metadata": {"name": "default"},
            "spec": {"size": 3},
        }
        version = ModuleVersion("1.0.0", (self.crd, operator), default)
        module = Module("knob", self.namespace, "Deployment", "knob-operator", {"1.0.0": version})
        runtime = Runtime(
            "rt", "regular", ClusterAccess(context="c"), (ModuleRef("knob", config=config),)
        )
        return ConfigRepo(
            Settings(system_namespace=self.system),
            {"rt": runtime},
            {"knob": module},
            {"regular": Channel("regular", {"knob": "1.0.0"})},
        )

    def sync(self, config: dict[str, Any] | None) -> SyncResult:
        return settled_sync(self.target.cluster, self.repo(config), now=NOW)

    def spec(self) -> dict[str, Any]:
        body = self.target.cluster.get(self.cr)
        assert body is not None
        return dict(body["spec"])

    def user_applies(self, **spec: Any) -> None:
        body = {
            "apiVersion": self.cr.api_version,
            "kind": "Knob",
            "metadata": {"name": "default", "namespace": self.namespace},
            "spec": spec,
        }
        self.target.cluster.apply(body, field_manager="kubectl", force=True)


@pytest.fixture
def fleet(target: Target, request: pytest.FixtureRequest) -> Iterator[Fleet]:
    """The fleet; on the real server its operator Deployment is made available as it appears
    (no Pods run there), so that a sync does not wait for it."""
    with contextlib.ExitStack() as stack:
        if target.real:
            plane: ControlPlane = request.getfixturevalue("kube_control_plane")
            stack.enter_context(deployments_made_available(plane.kubeconfig))
        yield Fleet(target)


def _crd(group: str) -> dict[str, Any]:
    spec_schema = {
        "type": "object",
        "properties": {"size": {"type": "integer"}, "logLevel": {"type": "string"}},
    }
    return namespaced_crd(group, "Knob", {"type": "object", "properties": {"spec": spec_schema}})


def _message(result: SyncResult) -> str:
    return next(s.message for s in result.modules if s.module == "knob")


def test_enforced_fields_are_reasserted_reported_and_released(fleet: Fleet) -> None:
    target = fleet.target
    enforced = {"logLevel": "debug"}
    fleet.sync(enforced)
    assert fleet.spec() == {"size": 3, "logLevel": "debug"}
    fleet.target.cluster.patch(fleet.cr, {"spec": {"size": 7}})  # a user's kubectl edit
    for _ in range(2):
        fleet.sync(enforced)
    assert fleet.spec() == {"size": 7, "logLevel": "debug"}
    fleet.user_applies(logLevel="error")
    result = fleet.sync(enforced)
    assert fleet.spec() == {"size": 7, "logLevel": "debug"}
    assert "enforced spec.logLevel" in _message(result)
    assert (fleet.cr, ChangeAction.CONFIGURED) in [
        (c.ref, c.action) for c in result.outcome.changes
    ]
    result = fleet.sync(None)
    assert "released spec.logLevel" in _message(result)
    assert fleet.spec() == {"size": 7, "logLevel": "debug"}
    live = target.cluster.get(fleet.cr)
    assert live is not None
    assert not owned_paths(live, CONFIG_FIELD_MANAGER)
    fleet.user_applies(logLevel="info")
    fleet.sync(None)
    assert fleet.spec()["logLevel"] == "info"


def test_a_deleted_default_configuration_comes_back_only_while_enforced(fleet: Fleet) -> None:
    target = fleet.target
    fleet.sync({"logLevel": "debug"})
    target.cluster.delete(fleet.cr)
    _gone(target, fleet.cr)
    result = fleet.sync({"logLevel": "debug"})
    assert fleet.spec() == {"size": 3, "logLevel": "debug"}
    assert (fleet.cr, ChangeAction.CREATED) in [(c.ref, c.action) for c in result.outcome.changes]
    target.cluster.delete(fleet.cr)
    _gone(target, fleet.cr)
    fleet.sync(None)
    fleet.sync(None)
    assert target.cluster.get(fleet.cr) is None


def _gone(target: Target, ref: ObjectRef) -> None:
    """A custom resource without finalizers is gone when its DELETE returns, on both."""
    assert target.cluster.get(ref) is None
