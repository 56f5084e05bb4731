"""Enforcement of configuration overrides with a field manager of their own (pure).

The fields a ``config`` override names (:class:`~reconciler.core.overrides.ConfigOverride`) are
applied to the module's default configuration CR by :data:`CONFIG_FIELD_MANAGER` on every sync,
with force: that manager owns exactly those fields, so a user's change to one is taken back and
every other field stays the user's (L3). The inventory records the enforced fields, so a field
whose override left the repo is known and released: first handed to the ``reconciler`` manager
at its live value (server-side apply removes a field whose only manager stops applying it), then
dropped from the config manager's object. This module decides what to apply and reports what
drifted; the lifecycle (``reconciler.lifecycle.enforce``) does the I/O. Rules in
docs/configuration.md, "Who owns which field".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.core.fielddiff import FieldChange, applied_fields
from reconciler.core.inventory import Inventory
from reconciler.core.model import FIELD_MANAGER
from reconciler.core.objects import Body, ObjectRef
from reconciler.core.overrides import ConfigOverride

#: The field manager that owns the enforced fields of configuration CRs.
CONFIG_FIELD_MANAGER = "reconciler-config"
#: A field of an object, as its keys from the top (``("spec", "logLevel")``).
Path = tuple[str, ...]


def enforcing(override: ConfigOverride | None, inventory: Inventory | None) -> bool:
    """Whether a default configuration has fields enforced now (``override``) or recorded as
    enforced: then it is read on every pass, though L3 made it the user's."""
    return override is not None or (inventory is not None and bool(inventory.enforced))


def enforced_paths(override: ConfigOverride | None) -> tuple[str, ...]:
    """The dotted paths (``spec.logLevel``) ``override`` enforces, sorted; none for ``None``."""
    if override is None:
        return ()
    return tuple(sorted(f.dotted for f in override.fields))


def split_path(dotted: str) -> Path:
    """``spec.a.b`` as ``("spec", "a", "b")``."""
    return tuple(dotted.split("."))


def identity(ref: ObjectRef) -> Body:
    """The part of an applied object that names it: apiVersion, kind, name, namespace."""
    metadata: dict[str, Any] = {"name": ref.name}
    if ref.namespace:
        metadata["namespace"] = ref.namespace
    return {"apiVersion": ref.api_version, "kind": ref.kind, "metadata": metadata}


def enforcement_body(ref: ObjectRef, override: ConfigOverride | None) -> Body:
    """What :data:`CONFIG_FIELD_MANAGER` applies: the CR's identity and the enforced ``spec``
    (the identity alone when nothing is enforced: the manager then owns no field)."""
    body = identity(ref)
    if override is not None and override.spec:
        body["spec"] = _copy(override.spec)
    return body


def drifted(override: ConfigOverride | None, live: Mapping[str, Any]) -> tuple[FieldChange, ...]:
    """The enforced fields whose live value differs from the enforced one: (path, live value or
    ``None`` when absent, enforced value)."""
    if override is None:
        return ()
    changes = []
    for enforced in override.fields:
        path = ("spec", *enforced.path)
        wanted = value_at(override.spec, enforced.path)
        found = value_at(live, path)
        if found != wanted:
            old = None if found is _ABSENT else found
            changes.append(FieldChange(enforced.dotted, old, wanted))
    return tuple(changes)


def owned_paths(live: Mapping[str, Any], manager: str) -> set[Path]:
    """The fields ``manager`` owns on ``live`` by apply (``metadata.managedFields``); a list is
    one field (its items' ``k:``, ``v:`` and ``i:`` entries count as the whole list)."""
    owned: set[Path] = set()
    for fields in applied_fields(live, manager):
        owned |= _paths(fields, ())
    return owned


def handover_body(
    live: Mapping[str, Any], released: Iterable[str], manager: str = FIELD_MANAGER
) -> Body:
    """What ``manager`` (``reconciler``) applies to keep the ``released`` fields (dotted) at
    their live values: every field it owns already, and those, each at its live value (nothing
    changes; it only co-owns them, so the config manager may drop them)."""
    ref = ObjectRef.of(live)
    body = identity(ref)
    for path in sorted(owned_paths(live, manager) | {split_path(p) for p in released}):
        value = value_at(live, path)
        if value is not _ABSENT and path[0] not in ("apiVersion", "kind"):
            _put(body, path, value)
    return body


def present(body: Mapping[str, Any], dotted: str) -> bool:
    """Whether ``body`` has a value at ``dotted``."""
    return has_value_at(body, split_path(dotted))


def has_value_at(body: Any, path: Path) -> bool:
    """Whether ``body`` has a value at ``path``."""
    return value_at(body, path) is not _ABSENT


def value_at(body: Any, path: Path) -> Any:
    """The value at ``path`` in ``body``, or the module's absent marker."""
    for step in path:
        if not isinstance(body, Mapping) or step not in body:
            return _ABSENT
        body = body[step]
    return body


@dataclass(frozen=True, slots=True)
class Enforcement:
    """What one sync did to a module's configuration CR: the fields it took back (a user's
    change reverted, or a field removed) and the fields it released. (A re-created CR is the
    plan's: a create of the default configuration.)"""

    module: str
    ref: ObjectRef
    reverted: tuple[FieldChange, ...] = ()
    released: tuple[str, ...] = ()
    #: Who changed each reverted field (dotted path -> field managers other than ours, by
    #: ``managedFields``); a field no one else holds changed in git (its value was ours).
    changed_by: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def in_cluster(self) -> tuple[FieldChange, ...]:
        """The reverted fields someone changed in the cluster (drift), not git."""
        others = dict(self.changed_by)
        return tuple(c for c in self.reverted if others.get(c.path, ("?",)))

    @property
    def message(self) -> str:
        """For people: ``enforced spec.logLevel of KIND/NS/NAME (changed in the cluster by
        kubectl-edit); enforced spec.x of KIND/NS/NAME (changed in git); released spec.y of
        KIND/NS/NAME``."""
        parts = []
        others = dict(self.changed_by)
        drifted_fields = self.in_cluster
        if drifted_fields:
            fields = ", ".join(c.path for c in drifted_fields)
            managers = sorted({m for c in drifted_fields for m in others.get(c.path, ())})
            who = f" by {', '.join(managers)}" if managers and managers != ["?"] else ""
            parts.append(f"enforced {fields} of {self.ref.subject} (changed in the cluster{who})")
        from_git = [c.path for c in self.reverted if c not in drifted_fields]
        if from_git:
            parts.append(f"enforced {', '.join(from_git)} of {self.ref.subject} (changed in git)")
        if self.released:
            parts.append(f"released {', '.join(self.released)} of {self.ref.subject}")
        return "; ".join(parts)


def managers_of(live: Mapping[str, Any], dotted: str) -> tuple[str, ...]:
    """The field managers of ``live`` (any operation: apply, or an update such as ``kubectl
    edit``) that hold the field ``dotted`` or a part of it."""
    path = split_path(dotted)
    found: list[str] = []
    for entry in (live.get("metadata") or {}).get("managedFields") or ():
        if not isinstance(entry, Mapping):
            continue
        held = _paths(entry.get("fieldsV1") or {}, ())
        if any(p[: len(path)] == path or path[: len(p)] == p for p in held):
            found.append(str(entry.get("manager") or "?"))
    return tuple(dict.fromkeys(found))


def _paths(fields: Mapping[str, Any], prefix: Path) -> set[Path]:
    found: set[Path] = set()
    for key, child in fields.items():
        if key == ".":
            continue
        kind, _, name = key.partition(":")
        if kind != "f":
            return {prefix} if prefix else set()  # a list's items: the list is one field
        path = (*prefix, name)
        inner = _paths(child, path) if isinstance(child, Mapping) and child else set()
        found |= inner or {path}
    return found


def _put(body: dict[str, Any], path: Path, value: Any) -> None:
    node = body
    for step in path[:-1]:
        node = node.setdefault(step, {})
    node[path[-1]] = _copy(value)


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


_ABSENT = object()
