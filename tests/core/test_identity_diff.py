"""L12 in the pure parts: references compare by group, kind, namespace and name; an inventory
written at other apiVersions is another record; ``diff --base`` (the fleet diff) shows an object
shipped at a new apiVersion as an update and one moved between modules as handed over, never
deleted by the module it left."""

from __future__ import annotations

from typing import Any

from reconciler.core.fleetdiff import FleetDiffer
from reconciler.core.inventory import Inventory, same_record
from reconciler.core.model import Strategy
from reconciler.core.objects import ObjectRef
from tests.support.identity_modules import (
    SHARED,
    mover,
    moving_gizmo,
    repo,
)
from tests.support.lifecycle_helpers import NOW


def test_a_reference_is_its_group_kind_namespace_and_name() -> None:
    v1 = ObjectRef("example.io/v1", "Gizmo", "ns", "main")
    v2 = ObjectRef("example.io/v2", "Gizmo", "ns", "main")

    assert v1 == v2
    assert {v1: "found"}[v2] == "found"
    assert v1 != ObjectRef("other.io/v1", "Gizmo", "ns", "main")
    assert sorted([v2, v1]) == [v1, v2]
    assert v1.at("example.io/v2").api_version == "example.io/v2"


def test_an_inventory_at_other_api_versions_is_written_again() -> None:
    def inventory(version: str) -> Inventory:
        objects = (ObjectRef(f"example.io/{version}", "Gizmo", "ns", "main"),)
        return Inventory("rt", "gizmo", "2.0.0", Strategy.CREATE_AND_DELETE, objects)

    assert inventory("v1") == inventory("v2")
    assert same_record(inventory("v2"), inventory("v2"))
    assert not same_record(inventory("v2"), inventory("v1"))
    assert not same_record(inventory("v2"), None)


def _changes(base: Any, head: Any) -> dict[str, list[tuple[str, str]]]:
    diff = FleetDiffer(base, head, NOW).diff()
    return {
        m.module: [(c.action.value, c.ref.subject) for c in m.plan.changes]
        for r in diff.runtimes
        for m in r.modules
    }


def test_the_fleet_diff_shows_a_new_api_version_as_an_update() -> None:
    gizmo = moving_gizmo()
    modules = {"gizmo": gizmo}

    changes = _changes(
        repo(modules, {"gizmo": "1.0.0"}, ["gizmo"]), repo(modules, {"gizmo": "2.0.0"}, ["gizmo"])
    )

    assert ("update", "Gizmo/gizmo-system/main") in changes["gizmo"]
    assert not [c for c in changes["gizmo"] if c[0] != "update"], changes


def test_the_fleet_diff_hands_a_moved_object_over() -> None:
    modules = {
        "giver": mover("giver", {"1.0.0": True, "2.0.0": False}),
        "taker": mover("taker", {"1.0.0": False, "2.0.0": True}),
    }
    listed = ["giver", "taker"]

    diff = FleetDiffer(
        repo(modules, {"giver": "1.0.0", "taker": "1.0.0"}, listed),
        repo(modules, {"giver": "2.0.0", "taker": "2.0.0"}, listed),
        NOW,
    ).diff()

    plans = {m.module: m.plan for r in diff.runtimes for m in r.modules}
    assert SHARED not in [c.ref for c in plans["giver"].changes]
    assert plans["giver"].notes == (f"{SHARED.subject} is handed over to module taker",)
    assert SHARED in [c.ref for c in plans["taker"].changes]
