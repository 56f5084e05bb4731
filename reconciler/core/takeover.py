"""Field ownership taken over from ``kubectl apply`` (client-side) when we apply an object (pure).

An object first made with ``kubectl apply`` (client-side) is owned, in ``metadata.managedFields``,
by the manager ``kubectl-client-side-apply`` with operation ``Update`` (an object older than
server-side apply: ``before-first-apply``), and carries the annotation
``kubectl.kubernetes.io/last-applied-configuration``. Applied by us (adopted, L6), its fields
stay owned by that manager too, so a field a later version drops stays live: server-side apply
removes only fields no manager owns any more. As kubectl's own upgrade to server-side apply does
(``csaupgrade.UpgradeManagedFields`` of k8s.io/client-go), and Flux's cleanup of those managers,
the fields of those entries are merged into our manager's ``Apply`` entry, the entries removed,
and the annotation removed with its field: from then on the object is ours alone where it was
kubectl's. Another manager's server-side apply (a user's ``kubectl apply --server-side``, a
controller's) is left alone: that ownership is shared on purpose.

Callers: the planner (:func:`takeover_fields`, a change shown in ``diff``) and the lifecycle's
writer (:func:`takeover_patch`, the merge patch it sends before the object's apply).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.core.fielddiff import MASK, FieldChange

#: The client-side managers whose ownership is taken over: (manager, operation).
FORMER_MANAGERS = (("kubectl-client-side-apply", "Update"), ("before-first-apply", "Update"))
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
_LAST_APPLIED_FIELD = f"f:{LAST_APPLIED}"


def _entries(live: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    found = (live.get("metadata") or {}).get("managedFields") or []
    return [e for e in found if isinstance(e, Mapping)]


def _former(entry: Mapping[str, Any]) -> bool:
    key = (entry.get("manager"), entry.get("operation"))
    return key in FORMER_MANAGERS and not entry.get("subresource")


def _last_applied(live: Mapping[str, Any]) -> bool:
    return LAST_APPLIED in ((live.get("metadata") or {}).get("annotations") or {})


def former_managers(live: Mapping[str, Any]) -> list[str]:
    """The client-side managers ``live`` has entries of, in their order."""
    return list(dict.fromkeys(str(e.get("manager")) for e in _entries(live) if _former(e)))


def takeover_fields(live: Mapping[str, Any] | None, manager: str) -> tuple[FieldChange, ...]:
    """What taking ``live`` over changes, for a plan: the managers that lose their fields to
    ``manager`` and the annotation removed (its value masked: it may hold a Secret's data)."""
    if not live:
        return ()
    changes = []
    former = former_managers(live)
    if former:
        changes.append(FieldChange("metadata.managedFields", ", ".join(former), manager))
    if _last_applied(live):
        changes.append(FieldChange(f"metadata.annotations.{LAST_APPLIED}", MASK, None))
    return tuple(changes)


def takeover_patch(live: Mapping[str, Any], manager: str) -> dict[str, Any] | None:
    """The merge patch that takes ``live`` over for ``manager`` (see the module docstring), or
    ``None`` when there is nothing to take over. It carries ``live``'s resource version: the
    server refuses it (a conflict, retried) when the object changed since it was read, so no
    newer owner is overwritten."""
    metadata: dict[str, Any] = {}
    if former_managers(live):
        metadata["managedFields"] = taken_over(_entries(live), manager)
    if _last_applied(live):
        metadata["annotations"] = {LAST_APPLIED: None}
    if not metadata:
        return None
    version = (live.get("metadata") or {}).get("resourceVersion")
    return {"metadata": {**metadata, "resourceVersion": version} if version else metadata}


def taken_over(entries: list[Mapping[str, Any]], manager: str) -> list[dict[str, Any]]:
    """``managedFields`` with the former managers' fields merged into ``manager``'s ``Apply``
    entry (made from the newest former entry when there is none), theirs removed."""
    former = [e for e in entries if _former(e)]
    ours = next(
        (e for e in entries if e.get("manager") == manager and e.get("operation") == "Apply"), None
    )
    target = dict(ours if ours is not None else former[0])
    fields: dict[str, Any] = {}
    for entry in ([ours] if ours is not None else []) + former:
        fields = _union(fields, entry.get("fieldsV1") or {})
    metadata = fields.get("f:metadata") or {}
    annotations = metadata.get("f:annotations") or {}
    if annotations.pop(_LAST_APPLIED_FIELD, None) is not None and not annotations:
        metadata.pop("f:annotations", None)
        if not metadata:
            fields.pop("f:metadata", None)
    target.update(manager=manager, operation="Apply", fieldsV1=fields)
    kept = [dict(e) for e in entries if not _former(e) and e is not ours]
    return [target, *kept]


def _union(left: Mapping[str, Any], right: Mapping[str, Any]) -> dict[str, Any]:
    """Two ``fieldsV1`` trees merged (a key in either is in the result)."""
    merged = {k: dict(v) if isinstance(v, Mapping) else v for k, v in left.items()}
    for key, value in right.items():
        mine = merged.get(key)
        if isinstance(mine, Mapping) and isinstance(value, Mapping):
            merged[key] = _union(mine, value)
        else:
            merged[key] = _union({}, value) if isinstance(value, Mapping) else value
    return merged
