"""Modules someone else installed, the maintenance window and letting go, on a real API server
through ``reconciler sync``: a hand-installed module is adopted (L6) unless what runs is newer
(L5, read from the live operator's label); an upgrade that requires downtime waits for the
runtime's window (L10); a module whose recorded strategy is Ignore leaves the runtime with
nothing deleted and our labels released (L7, L9), reported Unmanaged once (L11)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from tests.support.e2e_harness import MANAGED_BY, MODULE_LABEL, RUNTIME_LABEL, TestModule
from tests.support.e2e_world import World

DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def _install_by_hand(world: World, module: TestModule, version: str, label: str) -> None:
    """What a user's ``kubectl apply`` of the module's manifest did: no labels of ours; the
    operator's version label says ``label``."""
    kube = world.kube
    kube.create_namespace(module.namespace)
    for body in module.objects(version):
        if body["kind"] == "CustomResourceDefinition":
            kube.create_crd(body)
        elif body["kind"] == "ConfigMap":
            kube.create_config_map(module.namespace, body)
        else:
            body["metadata"]["labels"]["app.kubernetes.io/version"] = label
            kube.create_deployment(module.namespace, body)


def _ours(body: dict[str, Any] | None) -> bool:
    assert body is not None
    labels = body["metadata"].get("labels") or {}
    return MANAGED_BY in labels or RUNTIME_LABEL in labels or MODULE_LABEL in labels


def _closed_window() -> dict[str, str | list[str]]:
    """A window of one hour, three days from now: closed now whatever the time of day."""
    day = DAYS[(datetime.now(UTC) + timedelta(days=3)).weekday()]
    return {"days": [day], "start": "00:00", "duration": "1h", "timezone": "UTC"}


def test_adoption_downgrade_by_what_runs_maintenance_window_and_ignore_removal(
    world: World,
) -> None:
    fleet, kube = world.fleet, world.kube
    hand = fleet.module("hand", versions=("1.0.0", "2.0.0"), requires_downtime=("2.0.0",))
    newer = fleet.module("newer")
    fleet.channel.update({hand.name: "1.0.0", newer.name: "1.0.0"})
    listed = [{"name": hand.name, "strategy": "Ignore"}, {"name": newer.name}]
    runtime = fleet.runtime("rt", listed, maintenanceWindow=_closed_window())
    _install_by_hand(world, hand, "1.0.0", "1.0.0")
    _install_by_hand(world, newer, "1.0.0", "3.0.0")

    # L6: the hand-installed 1.0.0 is taken over; L5: 3.0.0 runs where git says 1.0.0: refused,
    # from the live operator's label (there is no inventory of it), and nothing of it is touched.
    adopted = world.sync()
    assert adopted.exit_code == 0, adopted.output
    # Our annotation is a new generation of the Deployment: the (simulated) controller rolls it.
    kube.make_available(hand.namespace, hand.operator)
    assert world.sync().exit_code == 0
    states = world.status(runtime)
    assert (states[hand.name]["state"], states[hand.name]["version"]) == ("Ready", "1.0.0")
    assert (states[newer.name]["state"], states[newer.name]["reason"]) == (
        "Warning",
        "DowngradeNotSupported",
    )
    assert "3.0.0" in states[newer.name]["message"]
    assert _ours(kube.deployment(hand.namespace, hand.operator))
    assert _ours(kube.config_map(hand.namespace, hand.config_map("1.0.0")))
    assert kube.config_map(fleet.system_namespace, f"inventory-{hand.name}") is not None
    assert not _ours(kube.deployment(newer.namespace, newer.operator))
    assert kube.config_map(fleet.system_namespace, f"inventory-{newer.name}") is None

    # L10: 2.0.0 requires downtime; the window is closed: nothing changes, and it says so.
    fleet.channel[hand.name] = "2.0.0"
    deferred = world.sync()
    assert deferred.exit_code == 0, deferred.output
    held = world.status(runtime)[hand.name]
    assert held["reason"] == "WaitingForMaintenanceWindow", held
    operator = kube.deployment(hand.namespace, hand.operator)
    assert operator is not None
    assert operator["metadata"]["labels"]["app.kubernetes.io/version"] == "1.0.0"
    # ... and once the window is open, the upgrade runs.
    open_now = {"days": list(DAYS), "start": "00:00", "duration": "24h", "timezone": "UTC"}
    fleet.runtimes[runtime]["maintenanceWindow"] = open_now
    upgraded = world.sync()
    assert upgraded.exit_code == 0, upgraded.output
    operator = kube.deployment(hand.namespace, hand.operator)
    assert operator is not None
    assert operator["metadata"]["labels"]["app.kubernetes.io/version"] == "2.0.0"
    assert kube.config_map(hand.namespace, hand.config_map("1.0.0")) is None, "pruned (L4)"
    kube.make_available(hand.namespace, hand.operator)
    assert world.sync().exit_code == 0
    assert world.status(runtime)[hand.name]["state"] == "Ready"

    # L7, L9: the module leaves the runtime; its strategy, Ignore, is read from the inventory
    # (git no longer names it): nothing is deleted, our labels and the inventory are dropped.
    fleet.runtimes[runtime]["modules"] = [{"name": newer.name}]
    released = world.sync()
    assert released.exit_code == 0, released.output
    assert world.status(runtime)[hand.name]["state"] == "Unmanaged"
    for body in (
        kube.deployment(hand.namespace, hand.operator),
        kube.config_map(hand.namespace, hand.config_map("2.0.0")),
        kube.crd(hand.crd.name),
    ):
        assert body is not None, "nothing deleted"
        assert not _ours(body), body["metadata"]
    assert kube.config_map(fleet.system_namespace, f"inventory-{hand.name}") is None
    # Unmanaged once: the next sync does not report it again.
    again = world.sync()
    assert again.exit_code == 0, again.output
    assert hand.name not in again.output
    assert hand.name not in world.status(runtime) or world.status(runtime)[hand.name]["state"] in (
        None,
        "Unmanaged",
    )
