"""The cluster interface: what the product asks of a Kubernetes API server (pure).

:class:`Cluster` is the one seam between the product and a Kubernetes API server: get, list by
kind and labels, server-side apply with a field manager, merge patch, delete with propagation,
and discovery of the kinds served; :class:`Watchable` adds list-then-watch of a kind (events in
order, bookmarks, 410 Gone as :class:`~reconciler.errors.ExpiredError`). Objects are plain
JSON-like dicts. Errors are those of :mod:`reconciler.errors` (not found, conflict, invalid,
forbidden, throttled, server error, unknown kind); implementations translate their library's
exceptions once. Callers: the lifecycle executor, the inventory store, the CLI, the daemon's
watches.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncGenerator, Callable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from reconciler.core.objects import Body, ObjectRef


class AccessKind(StrEnum):
    """What a run reached a runtime through."""

    #: A live API server, named by its URL.
    SERVER = "server"
    #: A recorded snapshot file (a rehearsal), named by its path.
    SNAPSHOT = "snapshot"
    #: A cluster that does not say where it lives (the in-memory one of tests and benchmarks),
    #: named by how it was reached; also any record written before the kinds were kept.
    UNLOCATED = "unlocated"
    #: Nothing recorded yet (a runtime never synced).
    NONE = "none"


#: The kinds that are rehearsals: two of them never count as different clusters.
_REHEARSALS = frozenset({AccessKind.SNAPSHOT})


@dataclass(frozen=True, slots=True)
class ClusterIdentity:
    """Which cluster a run reaches: what :attr:`Cluster.identity` says and the state store keeps
    per runtime (``RuntimeRecord.access``), so that a runtime is never deprovisioned through
    another cluster than the one it was synced through (rehearsal and reality never mix).
    Kept as its :meth:`describe` text at the store's edge only (:meth:`parse` reads it back)."""

    kind: AccessKind
    where: str = ""

    @classmethod
    def server(cls, url: str) -> ClusterIdentity:
        """A live API server at ``url``."""
        return cls(AccessKind.SERVER, url)

    @classmethod
    def snapshot(cls, path: str) -> ClusterIdentity:
        """The snapshot file at ``path`` (absolute)."""
        return cls(AccessKind.SNAPSHOT, path)

    @classmethod
    def reached_by(cls, how: str) -> ClusterIdentity:
        """A cluster that does not say where it lives, named by how it was reached."""
        return cls(AccessKind.UNLOCATED, how)

    @classmethod
    def parse(cls, text: str) -> ClusterIdentity:
        """The identity :meth:`describe` wrote as ``text`` (the store's column)."""
        if not text:
            return NO_IDENTITY
        kind, _, where = text.partition(" ")
        if kind in (AccessKind.SERVER, AccessKind.SNAPSHOT) and where:
            return cls(AccessKind(kind), where)
        return cls(AccessKind.UNLOCATED, text)

    def describe(self) -> str:
        """``server https://10.0.0.1:6443``, ``snapshot /abs/path.yaml``, how an unlocated
        cluster was reached, or the empty text for none; :meth:`parse` reads it back."""
        if self.kind in (AccessKind.SERVER, AccessKind.SNAPSHOT):
            return f"{self.kind} {self.where}"
        return self.where

    def __bool__(self) -> bool:
        return self.kind is not AccessKind.NONE

    def is_other_than(self, recorded: ClusterIdentity) -> bool:
        """Whether this is another cluster than ``recorded``: a real cluster instead of a
        snapshot (or the reverse), or another API server; two snapshot files are both
        rehearsals, and nothing recorded is no other cluster."""
        if not recorded or recorded == self:
            return False
        return not (self.kind in _REHEARSALS and recorded.kind in _REHEARSALS)


NO_IDENTITY = ClusterIdentity(AccessKind.NONE)


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


class Stop(Protocol):
    """What ends a pause early: a stopping daemon's :class:`threading.Event`."""

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until it is set, ``timeout`` seconds at most; whether it is set."""


@runtime_checkable
class Settling(Protocol):
    """A cluster whose objects move on by themselves (a real API server: its controllers
    establish CRDs, Pods start, deleted objects go): a replace waits a little within a pass
    for the old object to go, and pauses through it (nothing else waits within a pass: what is
    not ready yet is asked again by a later one). The in-memory cluster changes only when
    asked, so it has no pause."""

    def pause(self, seconds: float, stop: Stop | None = None) -> bool:
        """Wait ``seconds`` before asking the server again, or less when ``stop`` is set
        meanwhile (the daemon is stopping); False then: the caller waits no more."""


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

    @property
    def identity(self) -> ClusterIdentity:
        """Which cluster this is (a server's URL, a snapshot file's path): recorded per runtime
        and shown by ``check`` and ``tree``."""

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

    def served_kinds(self, *, fresh: bool = False) -> list[KindInfo]:
        """Discovery: every kind the server serves that can be listed (preferred versions);
        ``fresh``: asked of the server now, not from a cache of an earlier run."""


class WatchEventType(StrEnum):
    """What a watch event says happened (``BOOKMARK``: nothing, only how far the stream got)."""

    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"
    BOOKMARK = "BOOKMARK"


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One event of a watch: the object as it was at the event (its last state for
    ``DELETED``; only ``metadata.resourceVersion`` for a ``BOOKMARK``)."""

    type: WatchEventType
    body: Body

    @property
    def resource_version(self) -> str:
        """The resourceVersion the stream reached with this event."""
        return str((self.body.get("metadata") or {}).get("resourceVersion") or "")


@dataclass(frozen=True, slots=True)
class Listing:
    """A list of one kind and the resourceVersion a watch of it continues from."""

    items: list[Body]
    resource_version: str


class Hangup(Protocol):
    """How a watch stream is ended from another thread (:meth:`Watchable.watch`): a stream
    blocked on the server or on the in-memory journal asks to be told, and ends at once,
    quietly, when it is (the thread that hangs up calls the hook)."""

    def hung_up(self) -> bool:
        """Whether the stream was told to end."""

    def on_hangup(self, hook: Callable[[], None]) -> Callable[[], None]:
        """Call ``hook`` when told to end (at once, in this thread, when it already was);
        returns what forgets ``hook`` (the stream ended by itself)."""


@runtime_checkable
class Watchable(Protocol):
    """A cluster whose kinds can be watched (the real API server and the in-memory one)."""

    def list_for_watch(
        self,
        api_version: str,
        kind: str,
        *,
        labels: Mapping[str, str] | None = None,
        namespace: str | None = None,
    ) -> Listing:
        """Objects of a kind in all namespaces (or in ``namespace``) matching every label
        given, and the list's resourceVersion."""

    def watch(
        self,
        api_version: str,
        kind: str,
        *,
        resource_version: str,
        labels: Mapping[str, str] | None = None,
        timeout_seconds: float = 60.0,
        hangup: Hangup | None = None,
        namespace: str | None = None,
    ) -> Iterator[WatchEvent]:
        """The events of a kind after ``resource_version``, in order, with bookmarks, in all
        namespaces (or in ``namespace``), matching every label given; the stream ends after
        ``timeout_seconds`` (or when the connection drops), or at once, without an error, once
        ``hangup`` is told to end it (whole events only: the last one told is the last one
        read in full). :class:`~reconciler.errors.ForbiddenError` when the identity may not
        list or watch the kind there (403); :class:`~reconciler.errors.ExpiredError` when the
        server no longer keeps ``resource_version`` (410 Gone): list again."""


@runtime_checkable
class StreamWatchable(Watchable, Protocol):
    """A :class:`Watchable` whose streams are also read in an event loop
    (:mod:`reconciler.cluster.watch_loop`): many streams, one thread, none of its own."""

    def watch_async(
        self,
        api_version: str,
        kind: str,
        *,
        resource_version: str,
        labels: Mapping[str, str] | None = None,
        timeout_seconds: float = 60.0,
        namespace: str | None = None,
    ) -> AsyncGenerator[WatchEvent, None]:
        """:meth:`Watchable.watch` as an asynchronous iterator: the same events and errors;
        cancelling the task reading it hangs the stream up (no hangup is given)."""
