"""The inventory's ConfigMap form and snapshots of the in-memory cluster (the orders of removal
and deletion are the planner's: tests/core/test_plan.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reconciler.cluster.memory import InMemoryCluster
from reconciler.cluster.snapshot import load_snapshot, save_snapshot
from reconciler.core.inventory import Inventory, inventory_from_configmap
from reconciler.core.model import Strategy
from reconciler.core.objects import ObjectRef
from reconciler.errors import SourceError

CRD = ObjectRef("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets.example.io")
DEPLOYMENT = ObjectRef("apps/v1", "Deployment", "ns", "op")
ROLE = ObjectRef("rbac.authorization.k8s.io/v1", "ClusterRole", "", "op")


def test_inventory_reads_back_what_was_written() -> None:
    inventory = Inventory(
        "rt",
        "widget",
        "1.2.0",
        Strategy.IGNORE,
        (CRD, ROLE, DEPLOYMENT),
        (("example.io", "Widget"),),
        ObjectRef("example.io/v1", "Widget", "ns", "default"),
        True,
        "abc123",
    )

    body = inventory.to_configmap("reconciler-system")

    assert body["metadata"]["namespace"] == "reconciler-system"
    assert body["metadata"]["name"] == "inventory-widget"
    assert inventory_from_configmap(body) == inventory


def test_a_broken_inventory_is_an_error_not_an_empty_one() -> None:
    body = {"metadata": {"name": "inventory-x", "labels": {}}, "data": {"inventory.json": "{"}}

    with pytest.raises(ValueError, match="not a valid inventory"):
        inventory_from_configmap(body)


def test_snapshot_round_trip_keeps_objects_and_field_owners(tmp_path: Path) -> None:
    cluster = InMemoryCluster()
    cluster.apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}}, field_manager="m"
    )
    config: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "ns"},
        "data": {"a": "1", "b": "2"},
    }
    cluster.apply(config, field_manager="m")
    path = tmp_path / "snap.yaml"

    save_snapshot(cluster, path)
    loaded = load_snapshot(path)

    assert [ObjectRef.of(o) for o in loaded.objects()] == [
        ObjectRef.of(o) for o in cluster.objects()
    ]
    del config["data"]["b"]
    result = loaded.apply(config, field_manager="m")  # m owned b: it is removed after the reload
    assert result["data"] == {"a": "1"}


def test_snapshot_accepts_a_kubectl_list_and_refuses_garbage(tmp_path: Path) -> None:
    listing = tmp_path / "list.yaml"
    listing.write_text(
        "apiVersion: v1\nkind: List\nitems:\n"
        "- {apiVersion: v1, kind: Namespace, metadata: {name: ns}}\n"
        "- {apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: ns}}\n"
    )
    assert len(load_snapshot(listing).objects()) == 2
    assert load_snapshot(tmp_path / "missing.yaml").objects() == []

    garbage = tmp_path / "garbage.yaml"
    garbage.write_text("{apiVersion: v1, kind: Nope, metadata: {name: x}}\n")
    with pytest.raises(SourceError):
        load_snapshot(garbage)
