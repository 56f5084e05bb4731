"""Running versions read from a cluster are parsed defensively (nothing accepted that would then
fail for ever): a leading ``v`` is the same version; anything else that is not a semantic version
(``latest``, ``1.0``, empty, a number) puts the module in Warning with reason
``UnknownRunningVersion`` and changes nothing, in the pure planner and through the lifecycle on the
in-memory cluster."""

from __future__ import annotations

import json

import pytest

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.inventory import DATA_KEY, inventory_ref
from reconciler.core.model import LABEL_APP_VERSION, ModuleRef
from reconciler.core.objects import ObjectRef
from reconciler.core.plan import VERSION_SHOWN, plan_module
from reconciler.core.plan_values import (
    Context,
    DesiredModule,
    LiveModule,
    ModuleAction,
    desired_modules,
)
from reconciler.core.render import Renderer
from reconciler.core.resolve import resolve_runtime
from reconciler.core.versions import parse_running_version
from reconciler.lifecycle.executor import ModuleState, SyncResult
from tests.support.lifecycle_helpers import NAMESPACE, NOW, repo, sync

DEPLOYMENT = ObjectRef("apps/v1", "Deployment", NAMESPACE, "widget-operator")
SOURCE = f"label {LABEL_APP_VERSION} of {DEPLOYMENT.subject}"
UNREADABLE = ["latest", "1.0", "", "12", "1.0.0.0", "V1.0.0", "vv1.0.0", "x" * 200]


@pytest.mark.parametrize(
    ("value", "expected"),
    [("1.2.3", "1.2.3"), ("v1.2.3", "1.2.3"), ("v1.2.3-rc.1", "1.2.3-rc.1")],
)
def test_a_leading_v_is_the_same_version(value: str, expected: str) -> None:
    assert str(parse_running_version(value)) == expected


@pytest.mark.parametrize("value", [*UNREADABLE, 12, 1.0, None, ["1.0.0"]])
def test_anything_else_is_no_version(value: object) -> None:
    assert parse_running_version(value) is None


def _desired(version: str) -> DesiredModule:
    config = repo(ModuleRef("widget"), regular={"widget": version})
    resolution = resolve_runtime(config, config.runtimes["rt"])
    (widget,) = desired_modules(config, resolution, Renderer(config))
    return widget


@pytest.mark.parametrize(
    ("running", "action"),
    [
        ("v1.0.0", ModuleAction.UPGRADE),
        ("v2.0.0", ModuleAction.INSTALL),  # the same version, adopted (no inventory)
        ("v2.1.0", ModuleAction.BLOCKED_DOWNGRADE),
    ],
)
def test_planner_reads_a_v_version_as_the_version(running: str, action: ModuleAction) -> None:
    live = LiveModule(running_version=running, version_source=SOURCE)

    entry = plan_module(Context("rt", NOW), _desired("2.0.0"), live)

    assert entry.action is action


@pytest.mark.parametrize("running", UNREADABLE)
def test_planner_holds_a_module_whose_running_version_is_unreadable(running: str) -> None:
    live = LiveModule(running_version=running, version_source=SOURCE)

    entry = plan_module(Context("rt", NOW), _desired("2.0.0"), live)

    assert entry.action is ModuleAction.BLOCKED_UNKNOWN_VERSION
    assert entry.reason == "UnknownRunningVersion"
    assert entry.changes == ()
    assert not entry.changes_anything
    assert SOURCE in entry.message
    shown = running if len(running) <= VERSION_SHOWN else running[:VERSION_SHOWN] + "..."
    assert f"{SOURCE} is {shown!r}" in entry.message


def _relabel(cluster: InMemoryCluster, value: str | None) -> None:
    cluster.patch(DEPLOYMENT, {"metadata": {"labels": {LABEL_APP_VERSION: value}}})


def _status(result: SyncResult) -> tuple[ModuleState | None, str, str]:
    (status,) = result.modules
    return status.state, status.reason, status.message


@pytest.mark.parametrize("value", ["latest", "1.0", ""])
def test_an_unreadable_label_on_the_live_operator_changes_nothing(value: str) -> None:
    cluster = InMemoryCluster()
    sync(cluster, repo(ModuleRef("widget")))
    _relabel(cluster, value)
    writes = cluster.writes

    result = sync(cluster, repo(ModuleRef("widget"), regular={"widget": "2.0.0"}))

    state, reason, message = _status(result)
    assert (state, reason) == (ModuleState.WARNING, "UnknownRunningVersion")
    assert f"{SOURCE} is {value!r}" in message
    assert cluster.writes == writes
    live = cluster.get(DEPLOYMENT)
    assert live is not None
    assert live["metadata"]["labels"][LABEL_APP_VERSION] == value
    assert result.state is ModuleState.WARNING


def test_a_v_label_on_the_live_operator_is_upgraded_from() -> None:
    cluster = InMemoryCluster()
    sync(cluster, repo(ModuleRef("widget")))
    _relabel(cluster, "v1.0.0")

    result = sync(cluster, repo(ModuleRef("widget"), regular={"widget": "2.0.0"}))

    assert _status(result)[:2] == (ModuleState.READY, "Upgrade")
    live = cluster.get(DEPLOYMENT)
    assert live is not None
    assert live["metadata"]["labels"][LABEL_APP_VERSION] == "2.0.0"


def test_a_v_label_higher_than_git_is_a_downgrade_not_an_error() -> None:
    cluster = InMemoryCluster()
    sync(cluster, repo(ModuleRef("widget")))
    _relabel(cluster, "v2.1.0")

    result = sync(cluster, repo(ModuleRef("widget"), regular={"widget": "2.0.0"}))

    assert _status(result)[:2] == (ModuleState.WARNING, "DowngradeNotSupported")


def test_an_unreadable_inventory_version_changes_nothing() -> None:
    """Without the label, the version comes from the inventory, which is live data too."""
    cluster = InMemoryCluster()
    sync(cluster, repo(ModuleRef("widget")))
    _relabel(cluster, None)
    inventory = inventory_ref("reconciler-system", "widget")
    body = cluster.get(inventory)
    assert body is not None
    data = json.loads(body["data"][DATA_KEY])
    unreadable = {**data, "version": "latest", "readyVersion": "latest"}
    cluster.patch(inventory, {"data": {DATA_KEY: json.dumps(unreadable)}})
    writes = cluster.writes

    result = sync(cluster, repo(ModuleRef("widget"), regular={"widget": "2.0.0"}))

    state, reason, message = _status(result)
    assert (state, reason) == (ModuleState.WARNING, "UnknownRunningVersion")
    assert "inventory widget is 'latest'" in message
    assert cluster.writes == writes
