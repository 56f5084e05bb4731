"""The cluster interface and the values it speaks in (pure).

:class:`Cluster` is the one seam between the product and a Kubernetes API server: get, list by
kind and labels, server-side apply with a field manager, merge patch, delete with propagation,
and discovery of the kinds served. Objects are plain JSON-like dicts. Errors are those of
:mod:`reconciler.errors` (not found, conflict, invalid, forbidden, throttled, server error,
unknown kind); implementations translate their library's exceptions once. Callers: the
lifecycle executor, the inventory store, the CLI.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

Body = dict[str, Any]


@dataclass(frozen=True, slots=True, order=True)
class ObjectRef:
    """Identity of an object: ``apiVersion``, kind, namespace (empty when cluster-scoped), name."""

    api_version: str
    kind: str
    namespace: str
    name: str

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
        metadata = body.get("metadata", {})
        return cls(
            str(body.get("apiVersion", "")),
            str(body.get("kind", "")),
            str(metadata.get("namespace") or ""),
            str(metadata.get("name", "")),
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


@dataclass(frozen=True, slots=True)
class KindInfo:
    """A kind the API server serves."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        """``group/version``, or ``version`` for the core group."""
        return f"{self.group}/{self.version}" if self.group else self.version


class Cluster(Protocol):
    """A Kubernetes API server, as the product needs it."""

    def get(self, ref: ObjectRef) -> Body | None:
        """The object, or ``None`` when it does not exist."""

    def list_objects(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> list[Body]:
        """Objects of a kind, in one namespace or all (``None``), matching every label given."""

    def apply(
        self,
        body: Mapping[str, Any],
        *,
        field_manager: str,
        force: bool = True,
        dry_run: bool = False,
    ) -> Body:
        """Server-side apply of ``body`` as ``field_manager``; returns the resulting object."""

    def patch(self, ref: ObjectRef, merge_patch: Mapping[str, Any]) -> Body:
        """A JSON merge patch (RFC 7386): ``None`` values remove fields."""

    def delete(self, ref: ObjectRef, *, propagation: str = "Background") -> bool:
        """Ask for deletion; ``False`` when the object was already gone."""

    def kind_info(self, api_version: str, kind: str) -> KindInfo | None:
        """Discovery: how the kind is served, or ``None`` when it is not (yet)."""

    def kinds_in_group(self, group: str, kind: str) -> KindInfo | None:
        """Discovery by group and kind, whatever the served version (the preferred one)."""

    def served_kinds(self) -> list[KindInfo]:
        """Discovery: every kind the server serves that can be listed (preferred versions)."""


def is_established(crd: Mapping[str, Any]) -> bool:
    """Whether a CustomResourceDefinition reports the condition Established=True."""
    conditions = crd.get("status", {}).get("conditions", [])
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def crd_kind(crd: Mapping[str, Any]) -> tuple[str, str]:
    """(group, kind) a CustomResourceDefinition defines."""
    spec = crd.get("spec", {})
    return str(spec.get("group", "")), str(spec.get("names", {}).get("kind", ""))
