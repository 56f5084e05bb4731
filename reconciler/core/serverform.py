"""An object in the words the API server answers it with (pure).

A server stores what we apply in its own words: resource quantities canonicalised (``cpu: 1000m``
answers ``1``, ``memory: 1024Mi`` answers ``1Gi``, a ``ResourceList`` rounded up to milli),
``protocol: TCP`` defaulted on ports (container, Service, NetworkPolicy and EndpointSlice ports:
the key, with the port, of the list's items in ``managedFields``), a Secret's write-only
``stringData`` merged into its ``data``, base64-encoded (a key in both takes ``stringData``'s
value). :func:`server_form` rewrites a body so, for the kinds Kubernetes builds in (custom
resources are stored as written, and so are CRDs: their schemas only name such fields); everything
else it defaults (``imagePullPolicy``, ``strategy``, ``sessionAffinity`` ...) is a field we do not
set, which the diff does not read. Callers: the planner (desired objects are compared in the
server's words, so what the server rewrote is no drift) and the in-memory cluster (which answers as
the server does).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from reconciler.core.quantity import MILLI, NANO, canonical_quantity

#: API groups with a dot that Kubernetes builds in (custom resources' groups all have one).
_BUILTIN_GROUPS = frozenset(
    {
        "admissionregistration.k8s.io",
        "apiextensions.k8s.io",
        "apiregistration.k8s.io",
        "certificates.k8s.io",
        "coordination.k8s.io",
        "discovery.k8s.io",
        "flowcontrol.apiserver.k8s.io",
        "networking.k8s.io",
        "node.k8s.io",
        "rbac.authorization.k8s.io",
        "scheduling.k8s.io",
        "storage.k8s.io",
    }
)
#: Keys of a core/v1 ``ResourceRequirements`` that hold a ``ResourceList``.
_RESOURCE_LISTS = ("limits", "requests")
#: LimitRange items: every ``ResourceList`` they hold.
_LIMIT_RANGE_LISTS = ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio")
DEFAULT_PROTOCOL = "TCP"


def is_builtin(api_version: str) -> bool:
    """Whether ``api_version`` belongs to a kind Kubernetes builds in (not a custom resource)."""
    group = api_version.rpartition("/")[0]
    return "." not in group or group in _BUILTIN_GROUPS


def server_form(body: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``body`` as the server would answer it (see the module docstring)."""
    kind = str(body.get("kind", ""))
    if not is_builtin(str(body.get("apiVersion", ""))) or kind == "CustomResourceDefinition":
        return dict(body)
    if kind == "Secret" and body.get("apiVersion") == "v1":
        return _secret_data(body)
    return {key: _rewritten(value, (key,), kind) for key, value in body.items()}


def _secret_data(body: Mapping[str, Any]) -> dict[str, Any]:
    """A Secret as stored: ``stringData`` (write-only) merged into ``data``, base64-encoded.
    Values that are not strings are left as written, for the server to refuse."""
    strings = body.get("stringData")
    if not isinstance(strings, Mapping) or not all(isinstance(v, str) for v in strings.values()):
        return dict(body)
    data = dict(body.get("data") or {})
    data.update({k: base64.b64encode(v.encode()).decode("ascii") for k, v in strings.items()})
    stored = {k: v for k, v in body.items() if k != "stringData"}
    return {**stored, "data": data} if data else stored


def _rewritten(value: Any, path: tuple[str, ...], kind: str) -> Any:
    if isinstance(value, Mapping):
        found = {k: _rewritten(v, (*path, str(k)), kind) for k, v in value.items()}
        return _quantities(found, path, kind)
    if isinstance(value, list):
        items = [_rewritten(item, (*path, "[]"), kind) for item in value]
        return [_with_protocol(item) for item in items] if path[-1] == "ports" else items
    return value


def _with_protocol(item: Any) -> Any:
    if isinstance(item, dict) and item.get("protocol") is None:
        return {**item, "protocol": DEFAULT_PROTOCOL}
    return item


def _quantities(found: dict[str, Any], path: tuple[str, ...], kind: str) -> dict[str, Any]:
    """``found`` (the map at ``path``) with the quantities it holds in the server's words."""
    if path[-1] == "emptyDir" and "sizeLimit" in found:
        return _canonical(found, ("sizeLimit",), NANO)
    if path[-1] == "resources" or (kind == "LimitRange" and path[-2:] == ("limits", "[]")):
        names = _RESOURCE_LISTS if path[-1] == "resources" else _LIMIT_RANGE_LISTS
        return {k: _resource_list(v) if k in names else v for k, v in found.items()}
    if path[-1] == "overhead" or (kind == "ResourceQuota" and path == ("spec", "hard")):
        return _canonical(found, tuple(found), MILLI)
    return found


def _resource_list(value: Any) -> Any:
    """A core/v1 ``ResourceList``: every quantity rounded up to milli."""
    if not isinstance(value, dict):
        return value
    return _canonical(value, tuple(value), MILLI)


def _canonical(found: dict[str, Any], keys: tuple[str, ...], scale: int) -> dict[str, Any]:
    result = dict(found)
    for key in keys:
        text = canonical_quantity(found[key], scale=scale)
        if text is not None:
            result[key] = text
    return result
