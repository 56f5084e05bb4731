"""The cluster interface: what the product asks of a Kubernetes API server (pure).

:class:`Cluster` is the one seam between the product and a Kubernetes API server: get, list by
kind and labels, server-side apply with a field manager, merge patch, delete with propagation,
and discovery of the kinds served. Objects are plain JSON-like dicts. Errors are those of
:mod:`reconciler.errors` (not found, conflict, invalid, forbidden, throttled, server error,
unknown kind); implementations translate their library's exceptions once. Callers: the
lifecycle executor, the inventory store, the CLI.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from reconciler.core.objects import Body, ObjectRef


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


@dataclass(frozen=True, slots=True, order=True)
class Permission:
    """A verb on a resource (in a namespace, or in all when empty), as RBAC grants it."""

    verb: str
    group: str
    resource: str
    namespace: str = ""

    def describe(self) -> str:
        """``delete customresourcedefinitions.apiextensions.k8s.io`` (``in NAMESPACE``)."""
        resource = f"{self.resource}.{self.group}" if self.group else self.resource
        return f"{self.verb} {resource}" + (f" in {self.namespace}" if self.namespace else "")


@runtime_checkable
class Reviewer(Protocol):
    """What ``reconciler check`` asks a server about the identity it is reached with."""

    def server_version(self) -> str:
        """The server's version, such as ``v1.31.2``."""

    def whoami(self) -> str:
        """The user name the server sees (SelfSubjectReview); ``unknown`` when not served."""

    def can_i(self, permission: Permission) -> bool:
        """Whether the identity may do ``permission`` (SelfSubjectAccessReview)."""


@dataclass(frozen=True, slots=True)
class ObjectEvent:
    """A Kubernetes Event about one object: what ``kubectl get events`` and ``kubectl describe``
    show (``reason`` one CamelCase word, ``kind`` Normal or Warning)."""

    ref: ObjectRef
    reason: str
    message: str
    kind: str = "Normal"


def event_ref(event: ObjectEvent, component: str) -> ObjectRef:
    """Where ``event`` is kept: in the object's namespace (``default`` for a cluster-scoped
    object, as kubectl looks for it), named after the object and a digest of what the event
    says, so that the same event again counts up one Event (as client-go aggregates them)
    instead of making another."""
    said = "|".join((str(event.ref), event.reason, event.message, component))
    digest = hashlib.sha256(said.encode()).hexdigest()[:16]
    return ObjectRef(
        "v1", "Event", event.ref.namespace or "default", f"{event.ref.name[:200]}.{digest}"
    )


def event_body(event: ObjectEvent, component: str, now: str) -> Body:
    """The core/v1 Event of ``event`` at ``now`` (RFC 3339), at :func:`event_ref`."""
    ref = event.ref
    where = event_ref(event, component)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": where.name, "namespace": where.namespace},
        "involvedObject": {
            "apiVersion": ref.api_version,
            "kind": ref.kind,
            "name": ref.name,
            **({"namespace": ref.namespace} if ref.namespace else {}),
        },
        "reason": event.reason,
        "message": event.message[:1024],
        "type": event.kind,
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": component,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }


@runtime_checkable
class EventSink(Protocol):
    """A cluster that records Events (the real one and the in-memory one)."""

    def record_event(self, event: ObjectEvent, *, component: str) -> None:
        """Create the Event, reported by ``component``; never raises for a refused Event."""


@runtime_checkable
class Settling(Protocol):
    """A cluster whose objects move on by themselves (a real API server: its controllers
    establish CRDs, Pods start): the lifecycle may wait a little for them within a pass, and
    pauses through it. The in-memory cluster changes only when asked, so it has no pause."""

    def pause(self, seconds: float) -> None:
        """Wait ``seconds`` before asking the server again."""


@runtime_checkable
class Buffered(Protocol):
    """A cluster that keeps its writes in memory until flushed (a snapshot file). The engine
    flushes after every step attempt, so the state store never records a step whose writes the
    cluster could still lose."""

    def flush(self) -> None:
        """Make every write so far durable."""


def flush_writes(cluster: object) -> None:
    """Flush ``cluster`` when it buffers its writes; nothing for a live API server."""
    if isinstance(cluster, Buffered):
        cluster.flush()


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
