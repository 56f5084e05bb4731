"""Opt-in health on the in-memory cluster: the objects a version names in ``healthChecks``
count toward the module's readiness (here widget's default configuration, a custom resource
judged by its conditions as kstatus judges it); unnamed, the default configuration's status does
not count (seed decision 1). The real API server's side, with Jobs: tests/e2e/test_health_checks.py.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.inventory import inventory_from_configmap, inventory_ref
from reconciler.core.model import ConfigRepo, HealthCheck, ModuleRef
from reconciler.core.objects import ObjectRef
from reconciler.core.status import ModuleState, Reason
from reconciler.lifecycle.executor import SyncResult
from tests.support.lifecycle_helpers import NAMESPACE, repo, sync

DEFAULT = ObjectRef("example.io/v1", "Widget", NAMESPACE, "default")
STALLED = {
    "conditions": [
        {"type": "Ready", "status": "False", "reason": "InvalidSpec", "message": "size"},
        {"type": "Stalled", "status": "True", "reason": "InvalidSpec", "message": "size odd"},
    ]
}
READY = {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready"}]}


def _repo(*checks: HealthCheck) -> ConfigRepo:
    config = repo(ModuleRef("widget"))
    widget = config.modules["widget"]
    version = replace(widget.versions["1.0.0"], health_checks=checks)
    versions = {**widget.versions, "1.0.0": version}
    return replace(config, modules={**config.modules, "widget": replace(widget, versions=versions)})


def _widget(result: SyncResult) -> tuple[ModuleState | None, str, str]:
    status = next(s for s in result.modules if s.module == "widget")
    return status.state, status.reason, status.message


def _ready_version(cluster: InMemoryCluster) -> Any:
    body = cluster.get(inventory_ref("reconciler-system", "widget"))
    assert body is not None
    return inventory_from_configmap(body).ready_version


def test_a_named_default_configuration_counts_until_it_recovers() -> None:
    cluster = InMemoryCluster()
    config = _repo(HealthCheck("Widget", "default"))
    assert _widget(sync(cluster, config))[0] is ModuleState.READY  # no conditions: current
    cluster.set_status(DEFAULT, STALLED)

    stalled = _widget(sync(cluster, config))

    assert stalled[:2] == (ModuleState.ERROR, Reason.HEALTH_CHECK_FAILED)
    assert "Widget default: Stalled=True (InvalidSpec): size odd" in stalled[2]

    cluster.set_status(DEFAULT, READY)
    assert _widget(sync(cluster, config))[0] is ModuleState.READY


def test_a_named_object_on_its_way_keeps_the_module_processing() -> None:
    cluster = InMemoryCluster()
    config = _repo(HealthCheck("Widget", "default"))
    sync(cluster, config)
    cluster.set_status(DEFAULT, {"conditions": [{"type": "Reconciling", "status": "True"}]})

    waiting = _widget(sync(cluster, config))

    assert waiting[:2] == (ModuleState.PROCESSING, Reason.WAITING_FOR_HEALTH_CHECKS)
    assert waiting[2].startswith("waiting for Widget default: Reconciling=True")


def test_an_unnamed_default_configuration_does_not_count() -> None:
    cluster = InMemoryCluster()
    config = _repo()
    sync(cluster, config)
    cluster.set_status(DEFAULT, STALLED)

    assert _widget(sync(cluster, config))[:2] == (ModuleState.READY, Reason.READY)


def test_a_check_that_names_no_object_of_the_version_fails_the_module() -> None:
    cluster = InMemoryCluster()

    failed = _widget(sync(cluster, _repo(HealthCheck("Job", "migrate"))))

    assert failed[:2] == (ModuleState.ERROR, Reason.HEALTH_CHECK_FAILED)
    assert "Job/migrate: names no object of version 1.0.0" in failed[2]
    assert _ready_version(cluster) != "1.0.0"  # never Ready: not the version to judge by (L15)
