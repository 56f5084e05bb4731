"""Event-driven reconciliation: the daemon's watches on the clusters of the runtimes it owns.

After each run of a runtime, :meth:`Watches.need` records the kinds its modules use (the
objects we apply, labelled ours) and CRDs; each (cluster, kind) is watched once
(:class:`~reconciler.cluster.watch.KindWatch`, a task of the one event loop that reads every
stream: :mod:`reconciler.cluster.watch_loop`), opened when a first
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
``--debounce``) is the interval. A snapshot file's cluster (``--snapshot``: a private copy of
a file only our own writes change) is never watched: nothing there changes but by our runs (a
rehearsal costs what ``--no-watch`` costs). A run's bookkeeping reads only its own runtime's
watches (what it no longer needs, what it needs new), whatever the fleet's size.

A watch the identity may not open (SelfSubjectAccessReview of ``list`` and ``watch`` before it
is opened, or a 403 of the server) is narrowed: a namespaced kind whose objects the runtime
keeps in some namespaces is watched in each of them instead (:data:`ALL` no longer tried for
it), each one reviewed alike. What still cannot be watched (a cluster-scoped kind, a namespace
refused too) is refused: logged once (and once again when it works), reported per runtime in
``/status`` (:meth:`Watches.problems`: the kind, why, the grant that fixes it), never retried
in a loop; the runtime's next run tries it again once, and the resync covers it meanwhile.
Watches take the settings in force (``spec.watch``, ``spec.intervals.debounce``) and the
command line's, the metrics, the log's repeats and a ``rerun`` callable (a runtime reconciled once
more); nothing else of the daemon.

Caller: :class:`reconciler.daemon.service.Daemon`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, cast

from reconciler.cluster.api import (
    Cluster,
    EventSink,
    ObjectEvent,
    Permission,
    Reviewer,
    StreamWatchable,
    Watchable,
    WatchEvent,
    WatchEventType,
)
from reconciler.cluster.snapshot import SnapshotFileCluster
from reconciler.cluster.watch import KindWatch
from reconciler.cluster.watch_loop import WATCH_LOOP
from reconciler.core.enforce import CONFIG_FIELD_MANAGER
from reconciler.core.health import health_of
from reconciler.core.inventory import LABEL_INVENTORY, inventory_from_configmap
from reconciler.core.live import WORKLOAD_KINDS, labelled_ours, workload_available
from reconciler.core.model import (
    FIELD_MANAGER,
    LABEL_MANAGED_BY,
    LABEL_RUNTIME,
    MANAGED_BY_VALUE,
    Settings,
)
from reconciler.core.objects import Body, ObjectRef, is_established
from reconciler.core.ownership import kept_entries, taken_fields
from reconciler.daemon.logs import Repeats
from reconciler.daemon.metrics import Metrics
from reconciler.daemon.own_deletes import OwnDeletes
from reconciler.errors import ReconcilerError

log = logging.getLogger("reconciler.daemon")

OURS = {LABEL_MANAGED_BY: MANAGED_BY_VALUE}
#: A watch of our objects only, or of every instance (the kinds that block a removal).
OWN, EVERY = "ours", "every"
#: The namespace of a watch of all namespaces.
ALL = ""
#: (cluster, apiVersion, kind, OWN or EVERY, namespace or ALL): what one watch watches.
Key = tuple[str, str, str, str, str]
#: What a watch needs of the identity.
WATCH_VERBS = ("list", "watch")
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
    workload = body.get("kind") in WORKLOAD_KINDS
    if workload and workload_available(before) != workload_available(body):
        return "availability changed", None
    if is_established(before) != is_established(body):
        return "CRD established", None
    if health_of(before) != health_of(body):  # a Job completed, a custom resource Ready ...
        return "health changed", None
    return None


#: The metadata the wake rules read of an object's state before a change.
KEPT_METADATA = (
    "name",
    "namespace",
    "labels",
    "resourceVersion",
    "generation",
    "deletionTimestamp",
)


def kept_for_wakes(body: Body) -> Body:
    """What a watch's cache keeps of ``body``: what :func:`reason_to_wake` and the
    blocking removals read of the state before a change (its identity, labels, generation,
    ``spec.replicas``, status, our managedFields entries and the others' keys), not the whole
    body (no template, data, annotations, or a CRD's schema)."""
    metadata = body.get("metadata") or {}
    kept: dict[str, Any] = {k: metadata[k] for k in KEPT_METADATA if k in metadata}
    if "managedFields" in metadata:
        kept["managedFields"] = kept_entries(body, OUR_MANAGERS)
    spec = body.get("spec") or {}
    trimmed: dict[str, Any] = {
        "apiVersion": body.get("apiVersion"),
        "kind": body.get("kind"),
        "metadata": kept,
    }
    if "replicas" in spec:
        trimmed["spec"] = {"replicas": spec["replicas"]}
    if "status" in body:
        trimmed["status"] = body["status"]
    return trimmed


def _identity(ref: ObjectRef) -> tuple[str, str, str, str]:
    """An object whatever the version it is served in: group, kind, namespace, name."""
    return ref.group, ref.kind, ref.namespace, ref.name


@dataclass(frozen=True, slots=True)
class _Review:
    """What a review found of one watch: why the identity may not open it (empty: it may,
    or the cluster cannot tell: its list does), and the resource RBAC names."""

    refused: str = ""
    resource: str = ""


def review_watch(cluster: object, key: Key) -> _Review:
    """Whether the identity may list and watch the kind of ``key`` where it is watched (one
    SelfSubjectAccessReview a verb); nothing refused when the cluster cannot review, the kind
    is not served (yet) or the review fails: the watch's own list tells then."""
    _, api_version, kind, _, namespace = key
    if not isinstance(cluster, Reviewer):
        return _Review()
    try:
        info = cast("Cluster", cluster).kind_info(api_version, kind)
        if info is None:
            return _Review()
        asked = [Permission(verb, info.group, info.plural, namespace) for verb in WATCH_VERBS]
        missing = [p.verb for p in asked if not cluster.can_i(p)]
    except ReconcilerError:
        return _Review()
    resource = f"{info.plural}.{info.group}" if info.group else info.plural
    if not missing:
        return _Review(resource=resource)
    where = f"in namespace {namespace}" if namespace else "in all namespaces"
    return _Review(f"may not {' or '.join(missing)} {resource} {where}", resource)


def grant_fix(resource: str, namespace: str) -> str:
    """The grant that lets a watch of ``resource`` (in ``namespace``, or all) be opened."""
    if namespace:
        return (
            f"grant list and watch on {resource} in namespace {namespace} (a Role and a "
            "RoleBinding there) or in all namespaces"
        )
    return (
        f"grant list and watch on {resource} in all namespaces (a ClusterRole and a "
        "ClusterRoleBinding: `reconciler rbac REPO` prints the role)"
    )


def _what(key: Key) -> str:
    """``Deployment (apps/v1)``, ``... in NAMESPACE``."""
    return f"{key[2]} ({key[1]})" + (f" in {key[4]}" if key[4] else "")


def _spread(desired: Iterable[ObjectRef]) -> dict[tuple[str, str], set[str]]:
    """The namespaces the objects of each (apiVersion, kind) of ``desired`` are kept in
    (none for a cluster-scoped kind)."""
    spread: dict[tuple[str, str], set[str]] = {}
    for ref in desired:
        if ref.namespace:
            spread.setdefault((ref.api_version, ref.kind), set()).add(ref.namespace)
    return spread


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


@dataclass(slots=True)
class _Open:
    """One (cluster, kind) watched, and the runtimes that need it."""

    watch: KindWatch
    thread: threading.Thread | None = None
    #: Its task in the event loop (a cluster whose streams are read there), instead.
    task: Future[None] | None = None
    needers: set[str] = field(default_factory=set)
    #: The resource RBAC names (``deployments.apps``; the kind when not known).
    resource: str = ""

    @property
    def working(self) -> bool:
        """Not refused by the identity's permissions."""
        return not self.watch.refused


class Watches:
    """See the module docstring. Threads run only after :meth:`start` (tests step the
    watches and fire the debounced wakes themselves: :meth:`step_all`, :meth:`fire_due`)."""

    def __init__(
        self,
        settings: Callable[[], Settings],
        metrics: Metrics,
        repeats: Repeats,
        rerun: Callable[[str], object],
        *,
        watch: bool | None = None,
        debounce: timedelta | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        #: The settings of the commit in force (their defaults before one).
        self.settings = settings
        self.metrics = metrics
        #: The failure last logged of each subject (a cluster's watches fail alike once).
        self.repeats = repeats
        #: Reconcile a runtime, once more after the run under way (a woken runtime).
        self.rerun = rerun
        #: ``--watch/--no-watch`` and ``--debounce`` when given (None: the settings say).
        self.watch_given = watch
        self.debounce_given = debounce
        self.monotonic = monotonic
        self.open: dict[Key, _Open] = {}
        #: How many watches the last log line counted.
        self._counted = 0
        #: (cluster, apiVersion, kind, scope) the identity may not watch in all namespaces.
        self._narrowed: set[tuple[str, str, str, str]] = set()
        #: The refusal last logged of each watch (logged again only when it changes).
        self._said: dict[Key, str] = {}
        self._needs: dict[str, set[Key]] = {}
        self._desired: dict[str, set[tuple[str, str, str, str]]] = {}
        self._due: dict[str, float] = {}
        self.drifts: dict[str, list[Drift]] = {}
        #: The deletions our runs asked for (the runs' clusters note them): no drift.
        self.own_deletes = OwnDeletes()
        self._clusters: dict[str, Cluster] = {}
        #: Clusters nothing but our own runs change (snapshot files): never watched.
        self._still: set[str] = set()
        self.wakes = 0
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._running = False
        #: The threads of the watches closed (ending now), joined at close, as the wakes' one.
        self._ending: list[threading.Thread] = []
        self._ending_tasks: list[Future[None]] = []
        self._wakes: threading.Thread | None = None

    @property
    def enabled(self) -> bool:
        """Whether to watch: ``--watch/--no-watch`` when given, else ``spec.watch``."""
        given = self.watch_given
        return given if given is not None else self._settings().watch

    @property
    def debounce(self) -> float:
        """Seconds: ``--debounce`` when given, else ``spec.intervals.debounce``."""
        given = self.debounce_given
        return (given or self._settings().debounce).total_seconds()

    def _settings(self) -> Settings:
        return self.settings()

    # -- what is watched -----------------------------------------------------------------------

    def cluster(self, where: str, connect: Callable[[], Cluster]) -> Cluster | None:
        """The client the watches of the cluster ``where`` names use (made once by
        ``connect``); None when it cannot be reached (the run reported why)."""
        with self._lock:
            if where in self._still:
                return None
            if where not in self._clusters:
                try:
                    cluster = connect()
                except ReconcilerError as error:  # logged once while it fails alike
                    subject, failure = f"watches on {where}", str(error)
                    level = self.repeats.level(subject, failure, logging.INFO)
                    log.log(level, "no watches on %s: %s", where, error)
                    return None
                self.repeats.recovered(f"watches on {where}")
                if isinstance(cluster, SnapshotFileCluster):  # only our writes change it
                    self._still.add(where)
                    return None
                self._clusters[where] = cluster
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
        desired = list(desired)
        spread = _spread(desired)
        bases = {(where, api_version, kind, OWN, ALL) for api_version, kind in {*kinds, CRD}}
        bases |= {(where, api_version, kind, EVERY, ALL) for api_version, kind in blocking}
        reviews = self._reviewed(cluster, bases, spread)
        with self._lock:
            wanted = self._narrow(bases, spread)
            before = self._needs.get(runtime, set())
            added = wanted - before
            retried: dict[Key, set[str]] = {}
            for key in reviews:  # refused before: tried again, once a run
                if key in self.open and not self.open[key].working:
                    closed = self.open.pop(key)
                    self._end(closed)
                    retried[key] = closed.needers
            new = [k for k in wanted if k not in self.open]
            for key in new:
                reopened = self._open(key, cluster, reviews.get(key, _Review()))
                reopened.needers |= retried.get(key, set())
            for key in wanted - before:
                self.open[key].needers.add(runtime)
            opened = [(k, self.open[k]) for k in new]
            self._needs[runtime] = wanted
            self._desired[runtime] = {_identity(ref) for ref in desired}
            self._close_unneeded(runtime, before - wanted, changed=bool(new or retried))
        for key, one in opened:  # listed before the run's caller goes on: the gap stays small
            if one.working:
                one.watch.prime()
            self._say(key, one)
            with self._lock:
                if self._running and one.working and not one.watch.stop.hung_up():
                    self._start_thread(one)
        return bool(added)

    def _reviewed(
        self, cluster: Watchable, bases: set[Key], spread: Mapping[tuple[str, str], set[str]]
    ) -> dict[Key, _Review]:
        """The review of each watch wanted (:meth:`_narrow`) that is not open and working;
        a base refused in all namespaces whose kind the runtime keeps in some is narrowed on
        the way (its watches in those namespaces reviewed too)."""
        with self._lock:
            trying = [k for k in self._narrow(bases, spread) if not self._works(k)]
        reviews = {key: review_watch(cluster, key) for key in trying}
        narrowing = {
            key: spread[key[1:3]]
            for key, review in reviews.items()
            if review.refused and key[4] == ALL and spread.get(key[1:3])
        }
        if not narrowing:
            return reviews
        with self._lock:
            self._narrowed |= {key[:4] for key in narrowing}
            trying = [k for k in self._narrow(bases, spread) if not self._works(k)]
        for key, namespaces in sorted(narrowing.items()):
            log.info(
                "watch %s on %s: %s; watched in %s instead",
                _what(key),
                key[0],
                reviews[key].refused,
                ", ".join(sorted(namespaces)),
            )
        return reviews | {k: review_watch(cluster, k) for k in trying if k not in reviews}

    def _narrow(self, bases: set[Key], spread: Mapping[tuple[str, str], set[str]]) -> set[Key]:
        """``bases``, each one the identity may not watch in all namespaces as a watch per
        namespace where the runtime keeps objects of its kind (when it keeps some)."""
        keys: set[Key] = set()
        for base in bases:
            where, api_version, kind, scope, _ = base
            namespaces = spread.get((api_version, kind), set())
            if (where, api_version, kind, scope) in self._narrowed and namespaces:
                keys |= {(where, api_version, kind, scope, ns) for ns in namespaces}
            else:
                keys.add(base)
        return keys

    def _works(self, key: Key) -> bool:
        opened = self.open.get(key)
        return opened is not None and opened.working

    def _say(self, key: Key, opened: _Open) -> None:
        """Log a watch refused, once per refusal (and once when it works again)."""
        refused = opened.watch.refused
        with self._lock:
            said = self._said.get(key, "")
            if refused:
                self._said[key] = refused
            else:
                self._said.pop(key, None)
        if refused and refused != said:
            fix = grant_fix(opened.resource, key[4])
            log.warning(
                "watch %s on %s: not watched: %s; %s (the resync covers it meanwhile)",
                _what(key),
                key[0],
                refused,
                fix,
            )
        elif said and not refused:
            log.info("watch %s on %s: works again", _what(key), key[0])

    def problems(self, runtime: str) -> dict[str, list[dict[str, Any]]]:
        """For ``/status``: the kinds ``runtime`` needs watched only in some namespaces
        (``narrowed``), and those not watched at all (``refused``: why, and the grant that
        fixes it)."""
        narrowed: dict[tuple[str, str], set[str]] = {}
        refused: dict[tuple[str, str, str], dict[str, Any]] = {}
        with self._lock:
            for key in sorted(self._needs.get(runtime, ())):
                _, api_version, kind, _, namespace = key
                if namespace != ALL:
                    narrowed.setdefault((api_version, kind), set()).add(namespace)
                opened = self.open.get(key)
                if opened is not None and not opened.working:
                    refused[api_version, kind, namespace] = {
                        "kind": kind,
                        "apiVersion": api_version,
                        "namespace": namespace,
                        "reason": opened.watch.refused,
                        "fix": grant_fix(opened.resource, namespace),
                    }
        return {
            "narrowed": [
                {"kind": kind, "apiVersion": api_version, "namespaces": sorted(namespaces)}
                for (api_version, kind), namespaces in sorted(narrowed.items())
            ],
            "refused": [refused[k] for k in sorted(refused)],
        }

    def release(self, runtime: str) -> None:
        """``runtime`` needs no watch any more (it left this replica, or git)."""
        with self._lock:
            before = self._needs.pop(runtime, set())
            self._desired.pop(runtime, None)
            self._due.pop(runtime, None)
            self._close_unneeded(runtime, before)

    def _open(self, key: Key, cluster: Watchable, review: _Review) -> _Open:
        """The watch of ``key`` (refused, not started, when ``review`` says so)."""
        where, api_version, kind, scope, namespace = key
        watch = KindWatch(
            cluster,
            api_version,
            kind,
            lambda event, before: self._on_event(key, cluster, event, before),
            labels=OURS if scope == OWN else {},
            namespace=namespace,
            refused=review.refused,
            keep=kept_for_wakes,
        )
        opened = self.open[key] = _Open(watch, resource=review.resource or kind)
        log.debug("watching %s on %s", watch.what, where)
        return opened

    def _close_unneeded(
        self, runtime: str, dropped: Iterable[Key], *, changed: bool = False
    ) -> None:
        """``runtime`` no longer needs the watches ``dropped``: close those no other runtime
        needs (their streams hung up: their threads end now, joined at :meth:`close`), and,
        when any opened (``changed``) or closed, count those left open. Only ``runtime``'s own
        watches are read otherwise (a run's bookkeeping does not grow with the fleet)."""
        for key in dropped:
            opened = self.open.get(key)
            if opened is None:
                continue
            opened.needers.discard(runtime)
            if not opened.needers:
                del self.open[key]
                self._said.pop(key, None)
                self._end(opened)
                changed = True
                log.debug("no longer watching %s on %s", opened.watch.what, key[0])
        if changed:
            self._count()

    def _count(self) -> None:
        """Log (when it moved) and show the count of the watches open and working."""
        working = [key for key, opened in self.open.items() if opened.working]
        if len(working) != self._counted:  # one line when the count moves, not one a kind
            clusters = len({key[0] for key in working})
            log.info("watching %d kinds on %d clusters", len(working), clusters)
            self._counted = len(working)
        self.metrics.watches(len(working))

    # -- threads -------------------------------------------------------------------------------

    def start(self) -> None:
        """Run every watch (in the event loop), and the debounced wakes on a thread."""
        with self._lock:
            self._running = True
            for opened in self.open.values():
                if opened.working:
                    self._start_thread(opened)
            self._wakes = threading.Thread(target=self._fire_loop, name="wakes", daemon=True)
            self._wakes.start()  # it waits for the lock

    def _start_thread(self, opened: _Open) -> None:
        """Run ``opened`` as a task of the event loop (many watches, one thread), or on a
        thread of its own when its cluster's streams cannot be read there."""
        if opened.thread is not None or opened.task is not None:
            return
        if isinstance(opened.watch.cluster, StreamWatchable):
            opened.task = WATCH_LOOP.start(opened.watch.run_async())
            return
        opened.thread = threading.Thread(target=opened.watch.run, name="watch", daemon=True)
        opened.thread.start()

    def _end(self, opened: _Open) -> None:
        """Hang ``opened`` up; its thread or task (if any) is waited for at :meth:`close`."""
        opened.watch.close()
        if opened.thread is not None:
            self._ending = [t for t in self._ending if t.is_alive()] + [opened.thread]
        if opened.task is not None:
            self._ending_tasks = [t for t in self._ending_tasks if not t.done()] + [opened.task]

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
            tasks, self._ending_tasks = self._ending_tasks, []
            if self._wakes is not None:
                ending.append(self._wakes)
                self._wakes = None
        for thread in ending:  # without the lock: an event being handled may need it
            thread.join()
        wait_futures(tasks)

    def step_all(self) -> None:
        """One step of every watch, its stream ending at once when it has nothing more to
        tell (tests and benches without threads)."""
        with self._lock:
            watches = [o.watch for o in self.open.values() if o.working]
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
            if opened is None or any(not labelled_ours(b) for b in opened.watch.cache.values()):
                return
            needers = sorted(opened.needers)
        for runtime in needers:
            self.wake(runtime, f"the last {key[2]} blocking a removal is gone")

    def _report(self, runtime: str, cluster: object, drift: Drift) -> None:
        log.warning("runtime %s: drift: %s", runtime, drift.describe(), extra={"runtime": runtime})
        self.metrics.drift(runtime, drift.ref.kind)
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
            self.metrics.woken()
            self.rerun(runtime)  # once more when it runs now
        return due

    def _fire_loop(self) -> None:
        with self._changed:
            while self._running:
                self._lock.release()
                try:
                    self.fire_due()
                finally:
                    self._lock.acquire()
                if not self._running:  # closed while firing: its notify came before this wait
                    return
                nearest = min(self._due.values(), default=None)
                wait = None if nearest is None else max(0.0, nearest - self.monotonic())
                self._changed.wait(wait)

    def status(self, runtime: str) -> list[str]:
        """The runtime's last drifts, for ``/status``."""
        with self._lock:
            return [d.describe() for d in self.drifts.get(runtime, [])]
