"""Event-driven reconciliation: the daemon's watches on the clusters of the runtimes it owns.

After each run of a runtime, :meth:`Watches.need` records the kinds its modules use (the
objects we apply, labelled ours) and CRDs; each (cluster, kind) is watched once
(:class:`~reconciler.cluster.watch.KindWatch`, on a thread of its own), opened when a first
runtime needs it and closed when the last one no longer does (:meth:`Watches.release`: the
runtime left this replica or git). An event that matters wakes the runtime
(:func:`reason_to_wake`): an operator became (un)available, a CRD Established, an object of
ours deleted, or a field we manage taken by another field manager (its ``managedFields``:
:mod:`reconciler.core.ownership`), or an object's health changed (kstatus's word for it: a Job
completed or failed, a custom resource Ready or Stalled; what ``healthChecks`` name). A field
taken, and the deletion of an object git wants by anyone but us (our prunes, removals and
replacements are noted as they are sent: :mod:`reconciler.daemon.own_deletes`), is drift,
reported: a log line naming the object, the fields and the manager, ``reconciler_drift_total``
by kind, a Warning ``Drift`` Event and ``/status``. An object a removal waits for gone wakes
it too (a deprovision keeps its watches while it waits: the kinds of its inventories' objects
and of what blocks them); a run never waits within a pass, these wakes are how what it waits
for is seen in seconds. Wakes are debounced: the runtime runs once,
one debounce interval after its first wake (many events, one reconcile), and a wake during a
run runs it once more after. Timers (retries, resync) stay as the fallback. ``spec.watch:
false`` (or ``--no-watch``) turns it all off (pure polling); ``spec.intervals.debounce`` (or
``--debounce``) is the interval. Caller: :class:`reconciler.daemon.service.Daemon`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from reconciler.cluster.api import (
    Cluster,
    EventSink,
    ObjectEvent,
    Watchable,
    WatchEvent,
    WatchEventType,
)
from reconciler.cluster.watch import KindWatch
from reconciler.core.enforce import CONFIG_FIELD_MANAGER
from reconciler.core.health import health_of
from reconciler.core.inventory import LABEL_INVENTORY, inventory_from_configmap
from reconciler.core.model import (
    FIELD_MANAGER,
    LABEL_MANAGED_BY,
    LABEL_RUNTIME,
    MANAGED_BY_VALUE,
    Settings,
)
from reconciler.core.objects import Body, ObjectRef
from reconciler.core.ownership import taken_fields
from reconciler.daemon.own_deletes import OwnDeletes
from reconciler.errors import ReconcilerError

if TYPE_CHECKING:
    from reconciler.daemon.service import Daemon

log = logging.getLogger("reconciler.daemon")

OURS = {LABEL_MANAGED_BY: MANAGED_BY_VALUE}
#: A watch of our objects only, or of every instance (the kinds that block a removal).
OWN, EVERY = "ours", "every"
#: (cluster, apiVersion, kind, OWN or EVERY): what one watch watches.
Key = tuple[str, str, str, str]
CRD = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")
#: Our field managers: what they write is never drift.
OUR_MANAGERS = frozenset({FIELD_MANAGER, CONFIG_FIELD_MANAGER})
#: Fields named in one drift's line (the others counted).
SHOWN_FIELDS = 3
#: Drifts kept per runtime for ``/status``.
KEPT_DRIFTS = 10


@dataclass(frozen=True, slots=True)
class Drift:
    """An object of ours changed (fields we manage taken by another manager) or deleted by
    someone else."""

    ref: ObjectRef
    field: str
    by: str

    def describe(self) -> str:
        """``Deployment/ns/name: spec.replicas changed by kubectl``."""
        if self.field == "deleted":
            return f"{self.ref.subject} deleted"
        return f"{self.ref.subject}: {self.field} changed by {self.by}"

    @classmethod
    def of_fields(cls, ref: ObjectRef, taken: Mapping[str, list[str]]) -> Drift:
        """The drift of the fields ``taken`` (field: the managers that own it now)."""
        names = list(taken)[:SHOWN_FIELDS]
        more = len(taken) - len(names)
        fields = ", ".join(names) + (f" and {more} more" if more else "")
        by = sorted({m for managers in taken.values() for m in managers})
        return cls(ref, fields, ", ".join(by))


def reason_to_wake(event: WatchEvent, before: Body | None) -> tuple[str, Drift | None] | None:
    """Why ``event`` wakes its runtime (and the drift it may be: a deletion is, unless we
    asked for it), or None when it does not matter: our own writes, status noise, a change by
    another manager of fields we do not manage, bookmarks."""
    body = event.body
    ref = ObjectRef.of(body)
    if event.type is WatchEventType.BOOKMARK:
        return None
    if event.type is WatchEventType.DELETED:
        return "deleted", Drift(ref, "deleted", "")
    if before is None:
        return None  # created: by us (a run is under way) or noticed by the next resync
    taken = taken_fields(before, body, OUR_MANAGERS)  # first: a scale changes availability too
    if taken:
        return "changed", Drift.of_fields(ref, taken)
    if _available(before) != _available(body):
        return "availability changed", None
    if _established(before) != _established(body):
        return "CRD established", None
    if health_of(before) != health_of(body):  # a Job completed, a custom resource Ready ...
        return "health changed", None
    return None


def _identity(ref: ObjectRef) -> tuple[str, str, str, str]:
    """An object whatever the version it is served in: group, kind, namespace, name."""
    return ref.group, ref.kind, ref.namespace, ref.name


def _ours(body: Body) -> bool:
    labels = (body.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in OURS.items())


def fetch_blocking_kinds(
    cluster: Cluster, namespace: str, runtime: str, modules: Iterable[str] | None
) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """What the removal of ``modules`` (``None``: every module, a deprovision) waits for, from
    their inventories in ``namespace``: the kinds (apiVersion, kind) of their own objects (a
    CRD or Namespace the server is still deleting), and the kinds whose instances block them
    (the kinds served now; none for a kind no longer)."""
    wanted = None if modules is None else set(modules)
    labels = {LABEL_INVENTORY: "true", LABEL_RUNTIME: runtime}
    own: set[tuple[str, str]] = set()
    kinds: set[tuple[str, str]] = set()
    for body in cluster.list_objects("v1", "ConfigMap", namespace=namespace, labels=labels):
        try:
            inventory = inventory_from_configmap(body)
        except ValueError:
            continue
        if wanted is not None and inventory.module not in wanted:
            continue
        own |= {(ref.api_version, ref.kind) for ref in inventory.objects}
        for group, kind in inventory.managed_kinds:
            info = cluster.kinds_in_group(group, kind)
            if info is not None:
                kinds.add((info.api_version, kind))
    return own, kinds


def _available(body: Body) -> bool:
    """Whether a workload is available (as far as a wake cares: a change of it wakes)."""
    status = body.get("status") or {}
    if body.get("kind") == "DaemonSet":
        wanted = status.get("desiredNumberScheduled") or 0
        return bool((status.get("numberAvailable") or 0) >= wanted and wanted)
    desired = (body.get("spec") or {}).get("replicas", 1)
    current = status.get("observedGeneration") == (body.get("metadata") or {}).get("generation")
    return bool(current and (status.get("availableReplicas") or 0) >= (desired or 0))


def _established(body: Body) -> bool:
    conditions = (body.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


@dataclass(slots=True)
class _Open:
    """One (cluster, kind) watched, and the runtimes that need it."""

    watch: KindWatch
    thread: threading.Thread | None = None
    needers: set[str] = field(default_factory=set)


class Watches:
    """See the module docstring. Threads run only after :meth:`start` (tests step the
    watches and fire the debounced wakes themselves: :meth:`step_all`, :meth:`fire_due`)."""

    def __init__(
        self,
        daemon: Daemon,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.daemon = daemon
        self.monotonic = monotonic
        self.open: dict[Key, _Open] = {}
        #: How many watches the last log line counted.
        self._counted = 0
        self._needs: dict[str, set[Key]] = {}
        self._desired: dict[str, set[tuple[str, str, str, str]]] = {}
        self._due: dict[str, float] = {}
        self.drifts: dict[str, list[Drift]] = {}
        #: The deletions our runs asked for (the runs' clusters note them): no drift.
        self.own_deletes = OwnDeletes()
        self._clusters: dict[str, Cluster] = {}
        self.wakes = 0
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._running = False
        #: The threads of the watches closed (ending now), joined at close, as the wakes' one.
        self._ending: list[threading.Thread] = []
        self._wakes: threading.Thread | None = None

    @property
    def enabled(self) -> bool:
        """Whether to watch: ``--watch/--no-watch`` when given, else ``spec.watch``."""
        given = self.daemon.options.watch
        return given if given is not None else self._settings().watch

    @property
    def debounce(self) -> float:
        """Seconds: ``--debounce`` when given, else ``spec.intervals.debounce``."""
        given = self.daemon.options.debounce
        return (given or self._settings().debounce).total_seconds()

    def _settings(self) -> Settings:
        repo = self.daemon.state.repo
        return repo.settings if repo is not None else Settings()

    # -- what is watched -----------------------------------------------------------------------

    def cluster(self, where: str, connect: Callable[[], Cluster]) -> Cluster | None:
        """The client the watches of the cluster ``where`` names use (made once by
        ``connect``); None when it cannot be reached (the run reported why)."""
        with self._lock:
            if where not in self._clusters:
                try:
                    self._clusters[where] = connect()
                except ReconcilerError as error:
                    log.info("no watches on %s: %s", where, error)
                    return None
            return self._clusters[where]

    def need(
        self,
        runtime: str,
        where: str,
        cluster: object,
        kinds: Iterable[tuple[str, str]],
        blocking: Iterable[tuple[str, str]] = (),
        desired: Iterable[ObjectRef] = (),
    ) -> bool:
        """``runtime`` (on the cluster ``where`` names) needs ``kinds`` watched (our objects),
        and ``blocking`` (every instance: they hold up a removal), and only those; a change
        to one of ``desired`` (the objects git wants there now) by someone else is drift.
        Whether ``runtime`` needs a watch it did not before (opened now, or another runtime's:
        an event on it before this call was not passed to ``runtime``)."""
        if not self.enabled or not isinstance(cluster, Watchable):
            return False
        wanted = {(where, api_version, kind, OWN) for api_version, kind in {*kinds, CRD}}
        wanted |= {(where, api_version, kind, EVERY) for api_version, kind in blocking}
        with self._lock:
            added = wanted - self._needs.get(runtime, set())
            new = [k for k in added if k not in self.open]
            for key in added:
                self._open(key, cluster).needers.add(runtime)
            opened = [self.open[k] for k in new]
            self._needs[runtime] = wanted
            self._desired[runtime] = {_identity(ref) for ref in desired}
            self._close_unneeded()
        for one in opened:  # listed before the run's caller goes on: the gap stays small
            one.watch.prime()
            with self._lock:
                if self._running and not one.watch.stop.hung_up():
                    self._start_thread(one)
        return bool(added)

    def release(self, runtime: str) -> None:
        """``runtime`` needs no watch any more (it left this replica, or git)."""
        with self._lock:
            self._needs.pop(runtime, None)
            self._desired.pop(runtime, None)
            self._due.pop(runtime, None)
            self._close_unneeded()

    def _open(self, key: Key, cluster: Watchable) -> _Open:
        found = self.open.get(key)
        if found is not None:
            return found
        where, api_version, kind, scope = key
        watch = KindWatch(
            cluster,
            api_version,
            kind,
            lambda event, before: self._on_event(key, cluster, event, before),
            labels=OURS if scope == OWN else {},
        )
        opened = self.open[key] = _Open(watch)
        log.debug("watching %s on %s", watch.what, where)
        return opened

    def _close_unneeded(self) -> None:
        """Close the watches no runtime needs (their streams hung up: their threads end now,
        joined at :meth:`close`), and count those left open."""
        needed = set().union(*self._needs.values()) if self._needs else set()
        for key in [k for k in self.open if k not in needed]:
            closed = self.open.pop(key)
            self._end(closed)
            log.debug("no longer watching %s on %s", closed.watch.what, key[0])
        for key, opened in self.open.items():
            opened.needers = {r for r, keys in self._needs.items() if key in keys}
        if len(self.open) != self._counted:  # one line when the count moves, not one a kind
            clusters = len({key[0] for key in self.open})
            log.info("watching %d kinds on %d clusters", len(self.open), clusters)
            self._counted = len(self.open)
        self.daemon.metrics.watches(len(self.open))

    # -- threads -------------------------------------------------------------------------------

    def start(self) -> None:
        """Run every watch on a thread of its own, and the debounced wakes on one more."""
        with self._lock:
            self._running = True
            for opened in self.open.values():
                self._start_thread(opened)
            self._wakes = threading.Thread(target=self._fire_loop, name="wakes", daemon=True)
            self._wakes.start()  # it waits for the lock

    def _start_thread(self, opened: _Open) -> None:
        if opened.thread is None:
            opened.thread = threading.Thread(target=opened.watch.run, name="watch", daemon=True)
            opened.thread.start()

    def _end(self, opened: _Open) -> None:
        """Hang ``opened`` up; its thread (if any) is joined at :meth:`close`."""
        opened.watch.close()
        if opened.thread is not None:
            self._ending = [t for t in self._ending if t.is_alive()] + [opened.thread]

    def close(self) -> None:
        """Stop every watch, and return once their threads (and the wakes') have ended: each
        stream is hung up, none waits for its timeout."""
        with self._lock:
            self._running = False
            for opened in self.open.values():
                self._end(opened)
            self.open.clear()
            self._needs.clear()
            self._changed.notify_all()
            ending, self._ending = self._ending, []
            if self._wakes is not None:
                ending.append(self._wakes)
                self._wakes = None
        for thread in ending:  # without the lock: an event being handled may need it
            thread.join()

    def step_all(self) -> None:
        """One step of every watch, its stream ending at once when it has nothing more to
        tell (tests and benches without threads)."""
        with self._lock:
            watches = [o.watch for o in self.open.values()]
        for watch in watches:
            watch.stream_seconds = 0
            watch.step()

    # -- wakes ---------------------------------------------------------------------------------

    def _on_event(
        self, key: Key, cluster: Watchable, event: WatchEvent, before: Body | None
    ) -> None:
        if key[3] == EVERY:
            self._on_blocking(key, event)
            return
        if event.type is WatchEventType.ADDED:
            self.own_deletes.created(key[0], event.body)
        ours = event.type is WatchEventType.DELETED and self.own_deletes.ours(key[0], event.body)
        runtime = str(
            ((event.body.get("metadata") or {}).get("labels") or {}).get(LABEL_RUNTIME) or ""
        )
        if not runtime or runtime not in self._needs:
            return
        why = reason_to_wake(event, before)
        if why is None:
            return
        reason, drift = why
        if ours or (
            drift is not None and _identity(drift.ref) not in self._desired.get(runtime, ())
        ):
            drift = None  # our own deletion; not (or no longer) wanted: a default configuration
        if drift is not None:
            self._report(runtime, cluster, drift)
        self.wake(runtime, f"{ObjectRef.of(event.body).subject} {reason}")

    def _on_blocking(self, key: Key, event: WatchEvent) -> None:
        """An instance of a kind that blocks a removal deleted: when none but ours is left,
        the runtimes waiting on it are woken."""
        if event.type is not WatchEventType.DELETED:
            return
        with self._lock:
            opened = self.open.get(key)
            if opened is None or any(not _ours(b) for b in opened.watch.cache.values()):
                return
            needers = sorted(opened.needers)
        for runtime in needers:
            self.wake(runtime, f"the last {key[2]} blocking a removal is gone")

    def _report(self, runtime: str, cluster: object, drift: Drift) -> None:
        log.warning("runtime %s: drift: %s", runtime, drift.describe(), extra={"runtime": runtime})
        self.daemon.metrics.drift(runtime, drift.ref.kind)
        with self._lock:
            kept = self.drifts.setdefault(runtime, [])
            kept[:] = [*kept, drift][-KEPT_DRIFTS:]
        if isinstance(cluster, EventSink):
            event = ObjectEvent(drift.ref, "Drift", drift.describe() + "; reconciling", "Warning")
            cluster.record_event(event, component="reconciler")

    def wake(self, runtime: str, why: str) -> None:
        """Reconcile ``runtime`` one debounce interval from its first wake."""
        with self._lock:
            if runtime not in self._due:
                self._due[runtime] = self.monotonic() + self.debounce
                log.info("runtime %s: woken: %s", runtime, why, extra={"runtime": runtime})
                self._changed.notify_all()

    def fire_due(self) -> list[str]:
        """Submit the runtimes whose debounce interval has passed; which."""
        now = self.monotonic()
        with self._lock:
            due = sorted(r for r, when in self._due.items() if when <= now)
            for runtime in due:
                del self._due[runtime]
        for runtime in due:
            self.wakes += 1
            self.daemon.metrics.woken()
            self.daemon.submit(runtime, newer_commit=True)  # once more when it runs now
        return due

    def _fire_loop(self) -> None:
        with self._changed:
            while self._running:
                self._lock.release()
                try:
                    self.fire_due()
                finally:
                    self._lock.acquire()
                nearest = min(self._due.values(), default=None)
                wait = None if nearest is None else max(0.0, nearest - self.monotonic())
                self._changed.wait(wait)

    def status(self, runtime: str) -> list[str]:
        """The runtime's last drifts, for ``/status``."""
        with self._lock:
            return [d.describe() for d in self.drifts.get(runtime, [])]
