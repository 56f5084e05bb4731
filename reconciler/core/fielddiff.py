"""Field-level differences between a desired object and the live one (pure).

Only the fields we set count: a desired object is unchanged when every field it sets has the same
value live (what a server-side apply would leave alone), and when no field our field manager
owns on the live object (``metadata.managedFields``) has left the desired one: server-side apply
removes such a field, so it is a change (:func:`removed_owned_fields`). Fields others own, status
and server-managed metadata are ignored. Values of a Secret's ``data`` and ``stringData`` are masked
(rule S4). Callers: the planner and everything that prints a plan.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

MASK = "***"
_IGNORED_METADATA = frozenset(
    {"resourceVersion", "uid", "generation", "creationTimestamp", "managedFields", "selfLink"}
)


@dataclass(frozen=True, slots=True)
class FieldChange:
    """One field: its dotted path, the live value (``None`` when absent) and the desired one."""

    path: str
    old: Any
    new: Any

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        return {"path": self.path, "old": self.old, "new": self.new}

    def format(self) -> str:
        """``path: old -> new``."""
        return f"{self.path}: {_show(self.old)} -> {_show(self.new)}"


def field_diff(
    desired: Mapping[str, Any], live: Mapping[str, Any] | None
) -> tuple[FieldChange, ...]:
    """The fields of ``desired`` whose live value differs, masked for Secrets."""
    secret = desired.get("kind") == "Secret"
    live_body: Mapping[str, Any] = live or {}
    changes = [
        _masked(change, secret) for change in _walk(desired, live_body, ()) if change is not None
    ]
    return tuple(changes)


def removed_fields(
    live: Mapping[str, Any], paths: list[tuple[str, ...]]
) -> tuple[FieldChange, ...]:
    """Changes that remove the fields at ``paths`` from ``live`` (e.g. our labels)."""
    changes = []
    for path in paths:
        value: Any = live
        for step in path:
            value = value.get(step) if isinstance(value, Mapping) else None
        if value is not None:
            changes.append(FieldChange(".".join(path), value, None))
    return tuple(changes)


def removed_owned_fields(
    desired: Mapping[str, Any], live: Mapping[str, Any] | None, manager: str
) -> tuple[FieldChange, ...]:
    """Fields ``manager`` applied to ``live`` that ``desired`` no longer sets (server-side apply
    removes them), masked for Secrets. Lists count by their keyed items (``k:``) and values
    (``v:``) as the API server records them; a list recorded whole counts as one field."""
    if not live:
        return ()
    secret = desired.get("kind") == "Secret"
    changes = []
    for fields in applied_fields(live, manager):
        for path, value in _owned_but_gone(fields, desired, live, ()):
            if not _ignored(path) and path != ("metadata",):
                changes.append(_masked(FieldChange(".".join(path), value, None), secret))
    return tuple(changes)


def applied_fields(live: Mapping[str, Any], manager: str) -> Iterator[Mapping[str, Any]]:
    """The ``fieldsV1`` of each entry of ``live``'s ``metadata.managedFields`` that ``manager``
    wrote by server-side apply (an entry without an operation counts as one)."""
    for entry in (live.get("metadata") or {}).get("managedFields") or ():
        if not isinstance(entry, Mapping) or entry.get("manager") != manager:
            continue
        if entry.get("operation", "Apply") != "Apply":
            continue
        yield entry.get("fieldsV1") or {}


def _owned_but_gone(
    fields: Mapping[str, Any], desired: Any, live: Any, path: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], Any]]:
    """(path, live value) of each owned field in ``fields`` that ``desired`` lacks."""
    for key, child in fields.items():
        if key == ".":
            continue
        found = _step(key, desired)
        theirs = _step(key, live)
        label = _label(key, path)
        if found is _ABSENT:
            if theirs is not _ABSENT:
                yield label, theirs
            continue
        if isinstance(child, Mapping) and child:
            yield from _owned_but_gone(child, found, theirs, label)


_ABSENT = object()
#: Keys of list items that the API server defaults before it records them in managedFields
#: (a port's ``protocol``: ``k:{"containerPort":8080,"protocol":"TCP"}`` for a port that named
#: none): an item that leaves them out matches the default.
_KEY_DEFAULTS = {"protocol": "TCP"}


def _step(key: str, value: Any) -> Any:
    """The part of ``value`` a ``fieldsV1`` key names, or ``_ABSENT``."""
    kind, _, name = key.partition(":")
    if kind == "f":
        return value.get(name, _ABSENT) if isinstance(value, Mapping) else _ABSENT
    if not isinstance(value, list):
        return _ABSENT
    if kind == "k":
        wanted = _json_object(name)
        for item in value:
            if isinstance(item, Mapping) and all(
                item.get(k, _KEY_DEFAULTS.get(k)) == v for k, v in wanted.items()
            ):
                return item
        return _ABSENT
    if kind == "v":
        wanted_value = _json_value(name)
        return wanted_value if wanted_value in value else _ABSENT
    if kind == "i" and name.isdigit() and int(name) < len(value):
        return value[int(name)]
    return _ABSENT


def _label(key: str, path: tuple[str, ...]) -> tuple[str, ...]:
    kind, _, name = key.partition(":")
    if kind == "f" or not path:
        return (*path, name)
    if kind == "k":
        shown = ",".join(str(v) for v in _json_object(name).values())
        return (*path[:-1], f"{path[-1]}[{shown}]")
    return (*path[:-1], f"{path[-1]}[{name}]")


def _json_object(text: str) -> dict[str, Any]:
    value = _json_value(text)
    return value if isinstance(value, dict) else {}


def _json_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _walk(desired: Any, live: Any, path: tuple[str, ...]) -> Iterator[FieldChange | None]:
    if isinstance(desired, Mapping) and desired:
        live_map = live if isinstance(live, Mapping) else {}
        for key, value in desired.items():
            child = (*path, str(key))
            if _ignored(child):
                continue
            yield from _walk(value, live_map.get(key), child)
        return
    if isinstance(desired, list) and isinstance(live, list) and desired and live:
        pairs = _list_pairs(desired, live)
        if pairs is not None:
            for label, mine, theirs in pairs:
                yield from _walk(mine, theirs, (*path[:-1], f"{path[-1]}[{label}]"))
            return
    if not (_equal(desired, live) or _left_out(desired, live)):
        yield FieldChange(".".join(path), live, desired)


def _list_pairs(desired: list[Any], live: list[Any]) -> list[tuple[str, Any, Any]] | None:
    """Elements to compare one by one: by ``name`` when every element has one (containers,
    ports, env), else by position when the lengths agree; ``None`` compares the lists whole."""
    if all(isinstance(x, Mapping) and "name" in x for x in (*desired, *live)):
        names = [str(x["name"]) for x in desired]
        theirs = {str(x["name"]): x for x in live}
        if len(set(names)) == len(names) and set(names) == set(theirs):
            return [(n, d, theirs[n]) for n, d in zip(names, desired, strict=True)]
        return None
    if len(desired) == len(live) and all(isinstance(x, Mapping) for x in desired):
        return [(str(i), d, v) for i, (d, v) in enumerate(zip(desired, live, strict=True))]
    return None


def _ignored(path: tuple[str, ...]) -> bool:
    return path[0] == "status" or (
        len(path) == 2 and path[0] == "metadata" and path[1] in _IGNORED_METADATA
    )


def _equal(desired: Any, live: Any) -> bool:
    if isinstance(desired, bool) or isinstance(live, bool):
        return desired is live or (desired == live and type(desired) is type(live))
    if isinstance(desired, int | float) and isinstance(live, int | float):
        return desired == live
    if isinstance(desired, list) and isinstance(live, list):
        return len(desired) == len(live) and all(
            _subset(d, v) for d, v in zip(desired, live, strict=True)
        )
    return bool(desired == live)


def _subset(desired: Any, live: Any) -> bool:
    """Inside lists, live objects may carry defaulted fields we did not set."""
    if isinstance(desired, Mapping) and isinstance(live, Mapping):
        return all(
            _subset(v, live[k]) if k in live else _left_out(v, None) for k, v in desired.items()
        )
    return _equal(desired, live)


def _left_out(desired: Any, live: Any) -> bool:
    """An empty value we set that the server leaves out (``omitempty``): ``args: []``."""
    return live is None and desired in ("", [], {})


def _masked(change: FieldChange, secret: bool) -> FieldChange:
    if secret and change.path.split(".")[0] in ("data", "stringData"):
        return FieldChange(change.path, MASK if change.old is not None else None, MASK)
    return change


def _show(value: Any) -> str:
    if value is None:
        return "(none)"
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 80 else text[:77] + "..."


def masked_secret(body: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` with every value of a Secret's ``data`` and ``stringData`` masked (S4), the keys
    kept; any other object as it is."""
    if body.get("kind") != "Secret" or "/" in str(body.get("apiVersion") or "v1"):
        return dict(body)
    masked = dict(body)
    for field in ("data", "stringData"):
        values = body.get(field)
        if isinstance(values, Mapping):
            masked[field] = {key: MASK for key in values}
    return masked
