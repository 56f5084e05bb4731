"""Kubernetes objects as plain values: an object's identity and its JSON body (pure).

:class:`ObjectRef` names an object (``apiVersion``, kind, namespace, name); :data:`Body` is the
object itself as JSON-like dicts, exactly as an API server returns it (nulls included: readers
must not assume a field is a mapping or a list because the in-memory cluster left it out).
Used by every stage from rendering to the cluster adapters.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

Body = dict[str, Any]


@dataclass(frozen=True, slots=True, eq=False)
class ObjectRef:
    """An object: ``apiVersion``, kind, namespace (empty when cluster-scoped), name. Equal and
    hashed by :attr:`key` (L12: ``G/v1 Gadget ns/main`` is ``G/v2 Gadget ns/main``); sorted by
    all four fields, so that an order never depends on which version was seen first."""

    api_version: str
    kind: str
    namespace: str
    name: str

    @property
    def key(self) -> tuple[str, str, str, str]:
        """What the object is known by: (group, kind, namespace, name), never its version."""
        return self.group, self.kind, self.namespace, self.name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectRef) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __lt__(self, other: ObjectRef) -> bool:
        return self._order() < other._order()

    def __le__(self, other: ObjectRef) -> bool:
        return self._order() <= other._order()

    def __gt__(self, other: ObjectRef) -> bool:
        return self._order() > other._order()

    def __ge__(self, other: ObjectRef) -> bool:
        return self._order() >= other._order()

    def _order(self) -> tuple[str, str, str, str]:
        return self.api_version, self.kind, self.namespace, self.name

    def at(self, api_version: str) -> ObjectRef:
        """The same object at ``api_version`` (another version of its group)."""
        return ObjectRef(api_version, self.kind, self.namespace, self.name)

    @property
    def group(self) -> str:
        """The API group (empty for the core group)."""
        return self.api_version.rpartition("/")[0]

    @property
    def subject(self) -> str:
        """``Kind/namespace/name``, or ``Kind/name`` when cluster-scoped."""
        if self.namespace:
            return f"{self.kind}/{self.namespace}/{self.name}"
        return f"{self.kind}/{self.name}"

    @classmethod
    def of(cls, body: Mapping[str, Any]) -> ObjectRef:
        """The reference of an object body."""
        metadata = body.get("metadata") or {}
        return cls(
            str(body.get("apiVersion") or ""),
            str(body.get("kind") or ""),
            str(metadata.get("namespace") or ""),
            str(metadata.get("name") or ""),
        )

    def to_json(self) -> dict[str, str]:
        """Stable JSON form, as kept in the inventory."""
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ObjectRef:
        """Inverse of :meth:`to_json`."""
        return cls(
            str(data["apiVersion"]),
            str(data["kind"]),
            str(data.get("namespace") or ""),
            str(data["name"]),
        )


def is_established(crd: Mapping[str, Any]) -> bool:
    """Whether a CustomResourceDefinition reports the condition Established=True."""
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def crd_kind(crd: Mapping[str, Any]) -> tuple[str, str]:
    """(group, kind) a CustomResourceDefinition defines."""
    spec = crd.get("spec") or {}
    return str(spec.get("group") or ""), str((spec.get("names") or {}).get("kind") or "")
