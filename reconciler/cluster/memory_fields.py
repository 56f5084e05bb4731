"""Stored objects and the fields each manager owns, as server-side apply tracks them (pure).

The in-memory API server (:mod:`reconciler.cluster.memory`) keeps each object as a
:class:`Stored`: its body and, per field manager, the leaf paths it owns (lists are atomic).
:func:`applied` is a server-side apply over a stored object: the manager's fields become its own,
another manager's fields it changes are taken (force) or refused (a conflict), a field set to the
same value is owned by both, and a field a manager stopped applying is removed unless another
manager owns it. Bodies are answered with ``metadata.managedFields`` in the server's ``fieldsV1``
form, and read back from it when a snapshot is loaded; an owner that wrote by ``Update`` (a
create or a patch: ``kubectl apply`` client-side) is answered so, and a patch that sets
``managedFields`` replaces the owners as a server does (:func:`patched`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from reconciler.core.enforce import has_value_at, value_at
from reconciler.core.objects import Body, ObjectRef
from reconciler.errors import ConflictError

FieldPath = tuple[str, ...]

_T = TypeVar("_T")


@dataclass(slots=True)
class Stored:
    body: Body
    owners: dict[str, set[FieldPath]] = field(default_factory=dict)
    #: Owners whose fields came from an ``Update`` (a create, an update or a patch: what
    #: ``kubectl apply`` client-side writes), not an ``Apply``; one manager has one entry here.
    updaters: set[str] = field(default_factory=set)


def applied(
    existing: Stored | None, config: Body, manager: str, force: bool, written: Body | None = None
) -> Stored:
    """A server-side apply of ``config`` by ``manager`` over ``existing``: the fields it
    sets become its own, fields of other managers it changes are taken (``force``) or refused
    (a conflict), fields it stopped applying are removed unless another manager owns them.
    ``written``: the apply as sent, when ``config`` is it in the server's words; its fields are
    the ones the manager owns (a Secret's ``stringData``: the server stores it in ``data`` but
    records the manager as the owner of ``stringData``, so a key dropped from it stays)."""
    paths = leaf_paths(written or config) - IDENTITY  # the server records no owner of those
    if existing is None:
        drop_empty_metadata(config["metadata"])
        return Stored(config, {manager: paths})
    updaters = existing.updaters - {manager}
    owners = {m: set(p) for m, p in existing.owners.items()}
    body = copied(existing.body)
    for other, owned in owners.items():
        if other == manager:
            continue
        contested = {p for p in owned & paths if value_at(body, p) != value_at(config, p)}
        if contested and not force:
            fields = ", ".join(".".join(p) for p in sorted(contested)[:3])
            raise ConflictError(f"{ObjectRef.of(body).subject}: {fields} owned by {other}")
        owned -= contested  # the same value: owned by both, as the server shares it
    for path in owners.get(manager, set()) - paths:
        if not any(path in owned for m, owned in owners.items() if m != manager):
            delete_field(body, path)
    merge_into(body, config)
    drop_empty_metadata(body["metadata"])
    owners[manager] = paths
    return Stored(body, {m: p for m, p in owners.items() if p}, updaters)


def patched(existing: Stored, merge_patch: Mapping[str, Any]) -> Stored:
    """A merge patch over ``existing`` as the server records it: ``metadata.managedFields`` in
    the patch replace the owners (as a server takes them from a request that sets them), and a
    field the patch removes is no manager's any more."""
    body = json_merge_patch(copied(existing.body), merge_patch)
    metadata = body.setdefault("metadata", {})
    entries = metadata.pop("managedFields", None)
    drop_empty_metadata(metadata)
    owners, updaters = existing.owners, existing.updaters
    if entries:
        owners, updaters = owners_of(entries)
    kept = {m: {p for p in paths if has_value_at(body, p)} for m, paths in owners.items()}
    kept = {m: p for m, p in kept.items() if p}
    return Stored(body, kept, {m for m in updaters if m in kept})


def owners_of(entries: Sequence[Mapping[str, Any]]) -> tuple[dict[str, set[FieldPath]], set[str]]:
    """The owners ``metadata.managedFields`` entries name, and which of them updated."""
    owners: dict[str, set[FieldPath]] = {}
    updaters: set[str] = set()
    for entry in entries:
        if not entry.get("manager"):
            continue
        manager = str(entry["manager"])
        owners[manager] = owners.get(manager, set()) | paths_of_fields(entry.get("fieldsV1") or {})
        if entry.get("operation") == "Update":
            updaters.add(manager)
    return owners, updaters


OMITTED_WHEN_EMPTY = ("labels", "annotations", "finalizers", "ownerReferences")


def drop_empty_metadata(metadata: Body) -> None:
    """A server leaves empty maps and lists of ``metadata`` out (``omitempty``)."""
    for name in OMITTED_WHEN_EMPTY:
        if name in metadata and not metadata[name]:
            del metadata[name]


def leaf_paths(value: Any, prefix: FieldPath = ()) -> set[FieldPath]:
    """Paths of every leaf of a JSON value; lists are atomic (one leaf)."""
    if isinstance(value, dict) and value:
        paths: set[FieldPath] = set()
        for key, child in value.items():
            paths |= leaf_paths(child, (*prefix, str(key)))
        return paths
    return {prefix} if prefix else set()


#: The fields that name an object: an API server's ``managedFields`` lists no owner of them.
IDENTITY = frozenset({("apiVersion",), ("kind",), ("metadata", "name"), ("metadata", "namespace")})


def delete_field(body: Body, path: FieldPath) -> None:
    """Remove the field at ``path`` and any map it leaves empty."""
    parents: list[tuple[Body, str]] = []
    node: Any = body
    for step in path[:-1]:
        if not isinstance(node, dict) or step not in node:
            return
        parents.append((node, step))
        node = node[step]
    if isinstance(node, dict):
        node.pop(path[-1], None)
    for parent, step in reversed(parents):
        if parent[step] == {}:
            del parent[step]


def merge_into(target: Body, source: Mapping[str, Any]) -> None:
    for key, value in source.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict) and value:
            merge_into(target[key], value)
        else:
            target[key] = copied(value)


def json_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, Mapping):
        return copied(patch)
    result = target if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = json_merge_patch(result.get(key), value)
    return result


def spec_of(body: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in ("metadata", "status")}


def with_managed_fields(stored: Stored) -> Body:
    """The stored object as a reader gets it: a copy of its own, with ``managedFields``."""
    return copied(managed_view(stored))


def managed_view(stored: Stored) -> Body:
    """The stored object with ``managedFields``, sharing everything but the two outer levels
    with the stored body: for readers that change nothing (a snapshot's dump)."""
    body = dict(stored.body)
    body["metadata"] = {**body["metadata"], "managedFields": managed_fields(stored)}
    return body


def managed_fields(stored: Stored) -> list[dict[str, Any]]:
    return [
        {
            "manager": manager,
            "operation": "Update" if manager in stored.updaters else "Apply",
            "fieldsType": "FieldsV1",
            "fieldsV1": fields_of_paths(paths),
        }
        for manager, paths in sorted(stored.owners.items())
    ]


def copied(value: _T) -> _T:
    """A deep copy of a JSON-shaped value (mappings, lists, scalars), as ``copy.deepcopy`` makes
    one but several times faster (an object's body rarely holds anything else)."""
    if isinstance(value, dict):
        return cast(_T, {key: copied(child) for key, child in value.items()})
    if isinstance(value, list):
        return cast(_T, [copied(child) for child in value])
    if value is None or isinstance(value, str | int | float):  # bool is an int
        return value
    return copy.deepcopy(value)  # not JSON-shaped: copied as Python copies anything


def fields_of_paths(paths: set[FieldPath]) -> dict[str, Any]:
    """Field paths in the API server's ``fieldsV1`` form: ``{"f:spec": {"f:replicas": {}}}``."""
    tree: dict[str, Any] = {}
    for path in sorted(paths):
        node = tree
        for step in path:
            node = node.setdefault(f"f:{step}", {})
    return tree


def paths_of_fields(fields: Mapping[str, Any], prefix: FieldPath = ()) -> set[FieldPath]:
    paths: set[FieldPath] = set()
    for key, child in fields.items():
        if not key.startswith("f:"):
            continue
        path = (*prefix, key[2:])
        inner = paths_of_fields(child, path) if isinstance(child, Mapping) and child else set()
        paths |= inner or {path}
    return paths


ObjectKey = tuple[str, str, str, str]


class SnapshotTexts:
    """Each stored object's text in a snapshot, kept while the object is unchanged (the same
    stored object at the same resource version)."""

    def __init__(self) -> None:
        self._kept: dict[ObjectKey, tuple[Stored, Any, str]] = {}

    def parts(
        self, objects: Sequence[tuple[ObjectKey, Stored]], dump: Callable[[Body], str]
    ) -> list[str]:
        """The text of every object of ``objects`` (in order), made by ``dump`` when new."""
        parts: list[str] = []
        kept: dict[ObjectKey, tuple[Stored, Any, str]] = {}
        for key, stored in objects:
            version = stored.body["metadata"].get("resourceVersion")
            cached = self._kept.get(key)
            if cached is None or cached[0] is not stored or cached[1] != version:
                cached = (stored, version, dump(managed_view(stored)))
            kept[key] = cached
            parts.append(cached[2])
        self._kept = kept
        return parts
