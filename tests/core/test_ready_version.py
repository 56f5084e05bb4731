"""L15 in the pure core: the running version the no-downgrade rule (L5) judges by is the version
a module last became Ready at, kept in its inventory (``readyVersion``). A failed upgrade to X
from Y (the operator relabelled X) is "upgrading from Y to X": going back to Y is a rollback,
not a downgrade; a version below Y, or below what someone else installed, is still refused. An
inventory written before L15 is read as before (its version, or the operator's label)."""

from __future__ import annotations

import json

import pytest

from reconciler.core.fleetdiff import FleetDiffer, Outcome
from reconciler.core.intent import ready_before
from reconciler.core.inventory import (
    DATA_KEY,
    NEVER_READY,
    Inventory,
    inventory_from_configmap,
)
from reconciler.core.live import judged_version
from reconciler.core.model import MaintenanceWindow, ModuleRef, Strategy
from reconciler.core.plan import plan_module
from reconciler.core.plan_values import (
    Context,
    DesiredModule,
    LiveModule,
    ModuleAction,
    desired_modules,
)
from reconciler.core.reasons import Reason
from reconciler.core.render import Renderer
from reconciler.core.resolve import resolve_runtime
from reconciler.core.status import ModuleState, ModuleStatus
from tests.support.lifecycle_helpers import NOW, repo

LABEL = "label app.kubernetes.io/version of Deployment/ns/widget-operator"


def _inventory(version: str, ready: str | None) -> Inventory:
    return Inventory("rt", "widget", version, Strategy.CREATE_AND_DELETE, (), ready_version=ready)


def test_the_inventory_keeps_the_version_last_ready_and_reads_an_old_one_without_it() -> None:
    for ready in ("1.0.0", NEVER_READY):
        stored = _inventory("2.0.0", ready).to_configmap("sys")
        assert inventory_from_configmap(stored).ready_version == ready
    old = _inventory("2.0.0", None).to_configmap("sys")
    assert "readyVersion" not in json.loads(old["data"][DATA_KEY])
    assert inventory_from_configmap(old).ready_version is None
    assert _inventory("2.0.0", "1.0.0").upgrading
    assert not _inventory("2.0.0", "2.0.0").upgrading
    assert not _inventory("2.0.0", None).upgrading


@pytest.mark.parametrize(
    ("inventory", "label", "judged"),
    [
        (None, "1.5.0", "1.5.0"),  # installed by hand (L6): what runs
        (None, None, None),
        (_inventory("2.0.0", None), "2.0.0", "2.0.0"),  # before L15: the label, as always
        (_inventory("2.0.0", None), None, "2.0.0"),  # ... else the inventory's version
        (_inventory("2.0.0", "1.0.0"), "2.0.0", "1.0.0"),  # our failed upgrade relabelled it
        (_inventory("2.0.0", "1.0.0"), "v1.0.0", "1.0.0"),
        (_inventory("2.0.0", "1.0.0"), None, "1.0.0"),
        (_inventory("2.0.0", "2.0.0"), "2.0.0", "2.0.0"),  # Ready at 2.0.0
        (_inventory("2.0.0", "1.0.0"), "3.0.0", "3.0.0"),  # someone else's: what runs
        (_inventory("2.0.0", "1.0.0"), "latest", "latest"),  # unreadable: held, as before
        (_inventory("2.0.0", NEVER_READY), "2.0.0", None),  # a first install under way
    ],
)
def test_the_judged_version(inventory: Inventory | None, label: str | None, judged: str) -> None:
    assert judged_version(inventory, label, LABEL)[0] == judged


@pytest.mark.parametrize(
    ("current", "running", "kept"),
    [
        (None, None, NEVER_READY),  # a first install
        (None, "1.5.0", "1.5.0"),  # adopted (L6): it ran at its label
        (_inventory("1.0.0", "1.0.0"), None, "1.0.0"),  # an upgrade keeps it until Ready
        (_inventory("2.0.0", "1.0.0"), None, "1.0.0"),
        (_inventory("1.0.0", None), None, "1.0.0"),  # an old inventory moving on: its version
        (_inventory("2.0.0", None), None, None),  # ... staying: still not recorded
    ],
)
def test_the_intent_keeps_the_version_last_ready(
    current: Inventory | None, running: str | None, kept: str | None
) -> None:
    assert ready_before("2.0.0", current, running) == kept


def _desired(version: str, *, window: MaintenanceWindow | None = None) -> DesiredModule:
    config = repo(ModuleRef("widget"), regular={"widget": version}, window=window)
    resolution = resolve_runtime(config, config.runtimes["rt"])
    (widget,) = desired_modules(config, resolution, Renderer(config))
    return widget


def _live(version: str, ready: str | None, label: str) -> LiveModule:
    """What observing shows: the running version judged from the inventory and the label."""
    inventory = _inventory(version, ready)
    running, source = judged_version(inventory, label, LABEL)
    return LiveModule(inventory, {}, running, version_source=source)


def test_going_back_from_a_failed_upgrade_is_a_rollback_not_a_downgrade() -> None:
    entry = plan_module(Context("rt", NOW), _desired("1.0.0"), _live("2.0.0", "1.0.0", "2.0.0"))

    assert (entry.action, entry.reason) == (ModuleAction.RECONFIGURE, Reason.ROLLBACK)
    assert entry.from_version == entry.to_version == "1.0.0"
    assert "the upgrade to 2.0.0 did not become Ready" in entry.message
    assert entry.changes, "every object as 1.0.0 ships it"


def test_below_the_version_last_ready_is_still_a_downgrade() -> None:
    live = _live("2.1.0", "2.0.0", "2.1.0")  # the upgrade 2.0.0 -> 2.1.0 failed
    entry = plan_module(Context("rt", NOW), _desired("1.0.0"), live)

    assert (entry.action, entry.reason) == (
        ModuleAction.BLOCKED_DOWNGRADE,
        Reason.DOWNGRADE_NOT_SUPPORTED,
    )
    assert "widget 2.0.0 runs (the upgrade to 2.1.0 did not become Ready)" in entry.message
    assert not entry.changes_anything


@pytest.mark.parametrize(
    ("version", "ready", "label"),
    [
        ("2.0.0", "2.0.0", "2.0.0"),  # 2.0.0 became Ready: 1.0.0 is a downgrade (L5)
        ("2.0.0", "1.0.0", "2.1.0"),  # someone else runs 2.1.0
        ("2.0.0", None, "2.0.0"),  # an inventory from before L15: read as before
    ],
)
def test_what_became_ready_or_runs_by_hand_is_not_rolled_back(
    version: str, ready: str | None, label: str
) -> None:
    entry = plan_module(Context("rt", NOW), _desired("1.0.0"), _live(version, ready, label))

    assert entry.action is ModuleAction.BLOCKED_DOWNGRADE


def test_a_begun_upgrade_is_carried_on_outside_the_maintenance_window() -> None:
    closed = MaintenanceWindow(("Sat",), "02:00", 120, "UTC")  # NOW: a Wednesday
    fresh = plan_module(
        Context("rt", NOW, closed), _desired("2.1.0"), _live("2.0.0", "2.0.0", "2.0.0")
    )
    begun = plan_module(
        Context("rt", NOW, closed), _desired("2.1.0"), _live("2.1.0", "2.0.0", "2.1.0")
    )

    assert fresh.action is ModuleAction.DEFERRED_WINDOW
    assert (begun.action, begun.from_version, begun.to_version) == (
        ModuleAction.UPGRADE,
        "2.0.0",
        "2.1.0",
    )


def test_the_status_json_names_the_version_that_runs_and_the_one_that_did_not_make_it() -> None:
    plain = ModuleStatus("widget", ModuleState.READY, Reason.READY, "ok", "1.0.0")
    failed = ModuleStatus(
        "widget", ModuleState.ERROR, Reason.FAILED, "1.0.0 runs; ...", "1.0.0", None, "1.0.0",
        "2.0.0",
    )  # fmt: skip

    assert set(plain.to_json()) == {"module", "state", "reason", "message", "version"}
    assert (failed.to_json()["readyVersion"], failed.to_json()["targetVersion"]) == (
        "1.0.0",
        "2.0.0",
    )


def test_the_fleet_diff_judges_a_live_cluster_the_same_way() -> None:
    base = repo(ModuleRef("widget"), regular={"widget": "2.0.0"})
    head = repo(ModuleRef("widget"), regular={"widget": "1.0.0"})
    failed = {"rt": {"widget": _live("2.0.0", "1.0.0", "2.0.0")}}

    (runtime,) = FleetDiffer(base, head, NOW, live=failed).diff().runtimes
    (assumed,) = FleetDiffer(base, head, NOW).diff().runtimes  # the base taken as Ready

    (change,) = runtime.modules
    assert (change.plan.reason, change.outcome) == (Reason.ROLLBACK, Outcome.NOW)
    assert assumed.modules[0].outcome is Outcome.HELD_DOWNGRADE
