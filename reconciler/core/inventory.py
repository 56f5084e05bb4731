"""The inventory: what we applied for one module on one runtime (DESIGN.md §3) (pure).

Kept in the target cluster as a ConfigMap per module in the system namespace, so that it travels
with the cluster: the version, the strategy, the objects applied (in apply order), the kinds whose
instances block deletion, the default configuration (recorded before it is created, with
``default_configuration_done`` false until it exists: "intended", then "created"), the
commit, and the version the module last became Ready at (L15: what the no-downgrade rule L5
judges by while an upgrade to ``version`` is under way or failed). Prune and
removal trust only the inventory (rule S1); the strategy used at removal is the one recorded here
(L9). Callers: the lifecycle executor (reads and writes it through the cluster), the planner.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.core.model import (
    LABEL_MANAGED_BY,
    LABEL_MODULE,
    LABEL_RUNTIME,
    MANAGED_BY_VALUE,
    Strategy,
)
from reconciler.core.objects import Body, ObjectRef

LABEL_INVENTORY = "reconciler.dev/inventory"
#: ``Inventory.ready_version`` of a module that never became Ready (a first install under way).
NEVER_READY = ""
DATA_KEY = "inventory.json"
NAME_PREFIX = "inventory-"


@dataclass(frozen=True, slots=True)
class Inventory:
    """One module's record on one runtime."""

    runtime: str
    module: str
    version: str
    strategy: Strategy
    objects: tuple[ObjectRef, ...]
    managed_kinds: tuple[tuple[str, str], ...] = ()
    default_configuration: ObjectRef | None = None
    default_configuration_done: bool = False
    commit: str = ""
    #: The fields of the default configuration that ``reconciler-config`` enforces (dotted,
    #: ``spec.logLevel``): known here so that one whose override left the repo is released.
    enforced: tuple[str, ...] = ()
    #: L15: the version the module last became Ready at; :data:`NEVER_READY` when it never
    #: did; ``None`` when not recorded (an inventory written before L15, or rebuilt from
    #: labels): ``version`` is then taken as what runs, as it always was.
    ready_version: str | None = None
    #: The chart's ``pre-delete``/``post-delete`` hooks (canonical JSON of their bodies; empty:
    #: none): the module's removal runs them when git no longer renders them, as Helm keeps a
    #: release's hooks in its record (core.hooks).
    delete_hooks: str = ""

    @property
    def upgrading(self) -> bool:
        """Whether ``version`` was applied (or is being) and has not become Ready: an upgrade
        from ``ready_version`` (or a first install) under way or failed (L15)."""
        return self.ready_version is not None and self.ready_version != self.version

    def to_configmap(self, namespace: str) -> Body:
        """The ConfigMap that stores this inventory in ``namespace``."""
        data = {
            "version": self.version,
            "strategy": str(self.strategy),
            "objects": [ref.to_json() for ref in self.objects],
            "managedKinds": [{"group": g, "kind": k} for g, k in self.managed_kinds],
            "defaultConfiguration": (
                self.default_configuration.to_json() if self.default_configuration else None
            ),
            "defaultConfigurationDone": self.default_configuration_done,
            "commit": self.commit,
            **({"enforcedFields": list(self.enforced)} if self.enforced else {}),
            **({"readyVersion": self.ready_version} if self.ready_version is not None else {}),
            **({"deleteHooks": json.loads(self.delete_hooks)} if self.delete_hooks else {}),
        }
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": inventory_name(self.module),
                "namespace": namespace,
                "labels": {
                    LABEL_MANAGED_BY: MANAGED_BY_VALUE,
                    LABEL_RUNTIME: self.runtime,
                    LABEL_MODULE: self.module,
                    LABEL_INVENTORY: "true",
                },
            },
            "data": {DATA_KEY: json.dumps(data, indent=1, sort_keys=True)},
        }


def same_record(inventory: Inventory, current: Inventory | None) -> bool:
    """Whether ``inventory`` is stored as ``current`` is: equal, and each object at the same
    apiVersion (references compare without it, L12; a version that moved an object to another
    apiVersion records the new one)."""
    return (
        current is not None
        and inventory == current
        and _api_versions(inventory) == _api_versions(current)
    )


def _api_versions(inventory: Inventory) -> tuple[str, ...]:
    default = inventory.default_configuration
    return tuple(r.api_version for r in inventory.objects) + (
        (default.api_version,) if default else ()
    )


def inventory_name(module: str) -> str:
    """Name of a module's inventory ConfigMap."""
    return NAME_PREFIX + module


def inventory_ref(namespace: str, module: str) -> ObjectRef:
    """Reference of a module's inventory ConfigMap."""
    return ObjectRef("v1", "ConfigMap", namespace, inventory_name(module))


def inventory_from_configmap(body: Mapping[str, Any]) -> Inventory:
    """Read an inventory back; raises ``ValueError`` when the ConfigMap is not one."""
    labels = (body.get("metadata") or {}).get("labels") or {}
    try:
        data = json.loads((body.get("data") or {})[DATA_KEY])
        default = data.get("defaultConfiguration")
        return Inventory(
            runtime=str(labels[LABEL_RUNTIME]),
            module=str(labels[LABEL_MODULE]),
            version=str(data["version"]),
            strategy=Strategy(data["strategy"]),
            objects=tuple(ObjectRef.from_json(o) for o in data["objects"]),
            managed_kinds=tuple((m["group"], m["kind"]) for m in data.get("managedKinds") or ()),
            default_configuration=ObjectRef.from_json(default) if default else None,
            default_configuration_done=bool(data.get("defaultConfigurationDone", False)),
            commit=str(data.get("commit") or ""),
            enforced=tuple(str(p) for p in data.get("enforcedFields") or ()),
            ready_version=_ready_version(data),
            delete_hooks=json.dumps(data["deleteHooks"], sort_keys=True)
            if data.get("deleteHooks")
            else "",
        )
    except (KeyError, TypeError, json.JSONDecodeError) as error:
        name = (body.get("metadata") or {}).get("name") or "?"
        raise ValueError(f"ConfigMap {name} is not a valid inventory: {error!r}") from error


def _ready_version(data: Mapping[str, Any]) -> str | None:
    """L15's recorded version: absent in an inventory written before it (``None``)."""
    value = data.get("readyVersion")
    return None if value is None else str(value)
