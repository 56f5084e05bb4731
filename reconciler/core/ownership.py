"""Which fields we manage another field manager took in one change of an object (pure).

Server-side apply records, in ``metadata.managedFields``, the fields each manager owns. When
someone else changes a field we applied (``kubectl scale``, ``kubectl set image``, a patch, a
forced apply), the server moves that field to them: it leaves our entry and appears in theirs.
So a change to a field we manage by another manager is a field our entries owned before the
change and no longer own after it, owned now by a manager whose entry the change wrote (new or
different). What we stopped applying ourselves (nobody else's entry changed) and fields someone
else only shares with us (set to the same value) are not taken. Fields are read at the server's
own granularity (``f:``, and the ``k:``/``v:``/``i:`` items of keyed lists), so one container's
image is named, not the whole list. The state before a change may be kept with the other
managers' entries reduced to their keys (:func:`kept_entries`). Caller: the daemon's watches
(:mod:`reconciler.daemon.watches`), to report drift.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Set
from typing import Any

#: One field: the ``fieldsV1`` keys from the top (``f:spec``, ``f:replicas``).
Path = tuple[str, ...]


def taken_fields(
    before: Mapping[str, Any], after: Mapping[str, Any], ours: Set[str]
) -> dict[str, list[str]]:
    """The fields (dotted, as :func:`shown` names them) that ``ours`` (our field managers)
    owned on ``before`` and another manager took in the change to ``after``, each with the
    managers that own it now (sorted)."""
    lost = _owned(before, ours) - _owned(after, ours)
    if not lost:
        return {}
    previous = [_entry_key(e) for e in _entries(before)]
    writers: dict[str, set[Path]] = {}
    for entry in _entries(after):
        manager = str(entry.get("manager") or "")
        if manager and manager not in ours and _entry_key(entry) not in previous:
            writers.setdefault(manager, set()).update(_paths(entry.get("fieldsV1") or {}))
    taken: dict[str, list[str]] = {}
    for path in sorted(lost):
        by = sorted(m for m, paths in writers.items() if any(_overlap(path, p) for p in paths))
        if by:
            taken[shown(path)] = by
    return taken


def shown(path: Path) -> str:
    """A field as people write it: ``spec.template.spec.containers[name=manager].image``."""
    text = ""
    for step in path:
        kind, _, value = step.partition(":")
        if kind == "f":
            text = f"{text}.{value}" if text else value
        elif kind == "k":
            keys = json.loads(value) if value.startswith("{") else {}
            text += "[" + ",".join(f"{k}={v}" for k, v in keys.items()) + "]"
        else:  # v: a set's value, i: a position
            text += f"[{value}]"
    return text


def _entries(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    found = (body.get("metadata") or {}).get("managedFields") or []
    return [e for e in found if isinstance(e, Mapping)]


def _entry_key(entry: Mapping[str, Any]) -> str:
    kept = entry.get(ENTRY_KEY)
    if kept is not None:
        return str(kept)
    return hashlib.sha256(json.dumps(entry, sort_keys=True, default=str).encode()).hexdigest()


#: What a managedFields entry kept without its fields holds instead (:func:`kept_entries`).
ENTRY_KEY = "entryKey"


def kept_entries(body: Mapping[str, Any], ours: Set[str]) -> list[Mapping[str, Any]]:
    """The managedFields entries of ``body`` that :func:`taken_fields` reads of the state
    *before* a change: those of ``ours`` whole, the others as their manager and key only (a
    watch cache keeps these, not every manager's fields)."""
    return [
        e if e.get("manager") in ours else {"manager": e.get("manager"), ENTRY_KEY: _entry_key(e)}
        for e in _entries(body)
    ]


def _owned(body: Mapping[str, Any], managers: Set[str]) -> set[Path]:
    owned: set[Path] = set()
    for entry in _entries(body):
        if entry.get("manager") in managers:
            owned |= _paths(entry.get("fieldsV1") or {})
    return owned


def _paths(fields: Mapping[str, Any], prefix: Path = ()) -> set[Path]:
    """Every field ``fields`` (``fieldsV1``) names: its leaves, and the list items it owns as
    a whole (``"."``)."""
    paths: set[Path] = set()
    for key, child in fields.items():
        if key == ".":
            if prefix:
                paths.add(prefix)
            continue
        path = (*prefix, key)
        inner = _paths(child, path) if isinstance(child, Mapping) and child else set()
        paths |= inner or {path}
    return paths


def _overlap(one: Path, other: Path) -> bool:
    """Whether one field is the other or inside it."""
    shortest = min(len(one), len(other))
    return one[:shortest] == other[:shortest]
