"""A failed upgrade is rolled back whole (L15), through whole syncs on the in-memory cluster and
on the real API server: failures a server-side dry-run cannot foresee (the API server failing
half-way through the upgrade, at our own seam: :class:`~tests.support.faults.FaultyCluster`). Each
leaves the operator relabelled 2.0.0 while 1.0.0 is the version last Ready; git going back to
1.0.0 is a rollback, not a downgrade, and brings every object back to 1.0.0, what only 2.0.0 has
pruned. A Job's template the server refuses to change (immutable) is found by the dry-run before
any write (L14): the upgrade fails with 1.0.0 whole, and going back to it finds 1.0.0 Ready."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from reconciler.cluster.api import Cluster
from reconciler.core.model import (
    LABEL_APP_VERSION,
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
from reconciler.core.reasons import Reason
from reconciler.core.status import ModuleState, ModuleStatus
from tests.support.contract_targets import Target
from tests.support.faults import FaultyCluster
from tests.support.kube_control_plane import ControlPlane
from tests.support.kube_workloads import deployments_made_available
from tests.support.lifecycle_helpers import settled_sync

NOW = datetime(2026, 11, 18, 12, 0, tzinfo=UTC)
VERSIONS = ("1.0.0", "2.0.0")


class Fleet:
    """A runtime ``rt`` with module ``app``: its operator, a ConfigMap ``settings`` (1.0.0) or
    ``routes`` (2.0.0) and, with ``job``, a Job whose template names the version."""

    def __init__(self, target: Target, *, job: bool = False) -> None:
        self.target = target
        self.job = job
        self.namespace = target.namespace("app")
        self.system = target.namespace("system")
        #: Why the last sync's first pass planned what it did for ``app`` (a pass never waits:
        #: the statuses are the last pass's, once the operator is available again).
        self.planned: Reason | None = None
        for name in (self.namespace, self.system):
            target.created.append(ObjectRef("v1", "Namespace", "", name))

    def ref(self, kind: str, name: str) -> ObjectRef:
        api = {"Deployment": "apps/v1", "Job": "batch/v1"}.get(kind, "v1")
        return ObjectRef(api, kind, self.namespace, name)

    def objects(self, version: str) -> tuple[dict[str, Any], ...]:
        labels = {"app": "app-operator"}
        operator = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "app-operator", "labels": {LABEL_APP_VERSION: version}},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": _pod(version)},
            },
        }
        name = "settings" if version == "1.0.0" else "routes"
        config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}
        objects: tuple[dict[str, Any], ...] = (operator, {**config, "data": {"v": version}})
        if self.job:
            job = {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "migrate"},
                "spec": {"template": {"spec": {**_pod(version), "restartPolicy": "Never"}}},
            }
            objects += (job,)
        return objects

    def repo(self, version: str) -> ConfigRepo:
        versions = {v: ModuleVersion(v, self.objects(v)) for v in VERSIONS}
        module = Module("app", self.namespace, "Deployment", "app-operator", versions)
        runtime = Runtime("rt", "regular", ClusterAccess(context="c"), (ModuleRef("app"),))
        return ConfigRepo(
            Settings(system_namespace=self.system),
            {"rt": runtime},
            {"app": module},
            {"regular": Channel("regular", {"app": version})},
        )

    def sync(self, version: str, cluster: Cluster | None = None) -> ModuleStatus:
        on = cluster or self.target.cluster
        result = settled_sync(on, self.repo(version), now=NOW)
        planned = result.plan.module("app")
        self.planned = planned.reason if planned is not None else None
        return next(s for s in result.modules if s.module == "app")

    def label(self) -> str:
        body = self.target.cluster.get(self.ref("Deployment", "app-operator"))
        assert body is not None
        return str(body["metadata"]["labels"][LABEL_APP_VERSION])

    def assert_1_0_0_whole(self) -> None:
        cluster = self.target.cluster
        assert self.label() == "1.0.0"
        settings = cluster.get(self.ref("ConfigMap", "settings"))
        assert settings is not None
        assert settings["data"] == {"v": "1.0.0"}
        assert cluster.get(self.ref("ConfigMap", "routes")) is None


def _pod(version: str) -> dict[str, Any]:
    return {"containers": [{"name": "m", "image": f"example.invalid/app:{version}"}]}


@pytest.fixture
def available(target: Target, request: pytest.FixtureRequest) -> Iterator[None]:
    """On the real server, Deployments are made available as they appear (no Pods run there)."""
    with contextlib.ExitStack() as stack:
        if target.real:
            plane: ControlPlane = request.getfixturevalue("kube_control_plane")
            stack.enter_context(deployments_made_available(plane.kubeconfig))
        yield


def test_an_upgrade_the_server_fails_half_way_is_rolled_back(
    target: Target, available: None
) -> None:
    fleet = Fleet(target)
    assert fleet.sync("1.0.0").state is ModuleState.READY
    faulty = FaultyCluster(target.cluster)
    faulty.plan("server", "delete", fleet.ref("ConfigMap", "settings").subject)  # the prune

    failed = fleet.sync("2.0.0", faulty)

    assert (failed.state, failed.reason, failed.version) == (ModuleState.ERROR, "Retrying", "1.0.0")
    assert failed.message.startswith("1.0.0 runs; the upgrade to 2.0.0 failed: ")
    assert (failed.ready_version, failed.target_version) == ("1.0.0", "2.0.0")
    assert fleet.label() == "2.0.0"
    assert target.cluster.get(fleet.ref("ConfigMap", "routes")) is not None

    back = fleet.sync("1.0.0")

    assert (back.state, fleet.planned) == (ModuleState.READY, Reason.ROLLBACK)
    fleet.assert_1_0_0_whole()


def test_an_upgrade_refused_for_an_immutable_field_writes_nothing_and_back_is_1_0_0(
    target: Target, available: None
) -> None:
    fleet = Fleet(target, job=True)
    assert fleet.sync("1.0.0").state is ModuleState.READY

    failed = fleet.sync("2.0.0")

    assert (failed.state, failed.reason, failed.version) == (
        ModuleState.ERROR,
        Reason.FIELD_IMMUTABLE,
        "1.0.0",
    )
    assert failed.message.startswith("1.0.0 runs; the upgrade to 2.0.0 failed: ")
    # L14: the server-side dry-run of the version refused the Job before any write
    assert "nothing of app 2.0.0 was written" in failed.message
    fleet.assert_1_0_0_whole()

    back = fleet.sync("1.0.0")

    assert back.state is ModuleState.READY
    fleet.assert_1_0_0_whole()
    job = target.cluster.get(fleet.ref("Job", "migrate"))
    assert job is not None
    image = job["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == "example.invalid/app:1.0.0"
