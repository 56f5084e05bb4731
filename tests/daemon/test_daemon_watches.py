"""Event-driven reconciliation in the daemon, on in-memory clusters: one watch per
(cluster, kind), opened after a runtime's run; an operator becoming available and a deleted
object wake the runtime once, one debounce interval later (a fake monotonic clock: no
sleeping), drift reported; ``watch`` off opens nothing. The watches are stepped and the
debounced wakes fired by the tests (no threads)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from reconciler.cluster.api import Permission
from reconciler.cluster.memory import InMemoryCluster
from reconciler.cluster.snapshot import SnapshotFileCluster, load_snapshot
from reconciler.core.model import ClusterAccess
from reconciler.core.objects import ObjectRef
from reconciler.core.status import ModuleState
from reconciler.daemon.membership import fenced
from reconciler.daemon.service import Daemon, DaemonOptions
from reconciler.daemon.watches import ALL, OUR_MANAGERS
from reconciler.operations.store import SqliteStore
from reconciler.source.git import RemoteSource
from tests.support.daemons import WIDGET, Fleet, GitServer, poll_and_reconcile
from tests.support.fleet_history import SETTINGS, runtime_yaml

DEBOUNCE = timedelta(seconds=2)
GADGET = ObjectRef("apps/v1", "Deployment", "gadget-system", "gadget-operator")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _daemon(
    tmp_path: Path, *, watch: bool | None
) -> Iterator[tuple[Daemon, InMemoryCluster, Clock, Fleet]]:
    fleet = Fleet(tmp_path)
    server = GitServer(tmp_path)
    server.start()
    clusters: dict[str, InMemoryCluster] = {}
    clock = Clock()

    def connect(access: ClusterAccess, name: str) -> InMemoryCluster:
        return clusters.setdefault(name, InMemoryCluster(auto_ready=False))

    source = RemoteSource(server.url, "main", "fleet", tmp_path / "cache")
    options = DaemonOptions(watch=watch, debounce=DEBOUNCE if watch is not None else None)
    store = SqliteStore(tmp_path / "state.db")
    daemon = Daemon(source, store, connect, lambda: datetime.now(UTC), options, monotonic=clock)
    try:
        yield daemon, connect(ClusterAccess(), "a"), clock, fleet
    finally:
        daemon.close()
        server.stop()


@pytest.fixture
def watching(tmp_path: Path) -> Iterator[tuple[Daemon, InMemoryCluster, Clock, Fleet]]:
    yield from _daemon(tmp_path, watch=True)


@pytest.fixture
def as_the_repo_says(tmp_path: Path) -> Iterator[tuple[Daemon, InMemoryCluster, Clock, Fleet]]:
    yield from _daemon(tmp_path, watch=None)


@pytest.fixture
def polling(tmp_path: Path) -> Iterator[tuple[Daemon, InMemoryCluster, Clock, Fleet]]:
    yield from _daemon(tmp_path, watch=False)


def _state(daemon: Daemon, runtime: str = "a") -> ModuleState | None:
    record = daemon.store.runtime(runtime)
    return record.state if record is not None else None


def _available(cluster: InMemoryCluster) -> None:
    """Every operator Deployment available, as its controller would say."""
    for body in cluster.list_objects("apps/v1", "Deployment"):
        _available_one(cluster, ObjectRef.of(body), body["metadata"]["generation"])


def _available_one(cluster: InMemoryCluster, ref: ObjectRef, generation: int) -> None:
    cluster.set_status(
        ref,
        {
            "observedGeneration": generation,
            "replicas": 1,
            "availableReplicas": 1,
            "readyReplicas": 1,
            "updatedReplicas": 1,
        },
    )


def _fire_after_debounce(daemon: Daemon, clock: Clock) -> list[str]:
    daemon.watches.step_all()  # the events since the last step
    assert daemon.watches.fire_due() == []  # not before the debounce interval
    clock.now += DEBOUNCE.total_seconds()
    fired = daemon.watches.fire_due()
    daemon.wait_idle()
    return fired


def test_one_watch_per_cluster_and_kind_opened_after_a_run(watching: Any) -> None:
    daemon, _, _, _ = watching
    assert daemon.watches.open == {}

    poll_and_reconcile(daemon)

    wheres = {key[0] for key in daemon.watches.open}
    kinds = {key[1:3] for key in daemon.watches.open}
    assert ("apiextensions.k8s.io/v1", "CustomResourceDefinition") in kinds
    assert ("apps/v1", "Deployment") in kinds
    assert len(daemon.watches.open) <= len(wheres) * len(kinds)  # one per (cluster, kind)
    shown = f"reconciler_watches_open {float(len(daemon.watches.open))}"
    assert shown in daemon.metrics.exposition().decode()
    daemon.watches.step_all()  # the first list of each


def test_a_watch_cache_keeps_only_what_the_wake_rules_read(watching: Any) -> None:
    """The caches keep no whole bodies (no template, no annotations) and only our
    own managedFields entries whole (the others' as keys); the drift of a field taken by
    another manager is still named from what they keep."""
    daemon, cluster, clock, _ = watching
    cluster.auto_ready = True
    poll_and_reconcile(daemon)
    daemon.watches.step_all()
    scaled = {"apiVersion": "apps/v1", "kind": "Deployment",
              "metadata": {"name": WIDGET.name, "namespace": WIDGET.namespace,
                           "annotations": {"note": "x" * 1000}},
              "spec": {"replicas": 3}}  # fmt: skip
    cluster.apply(scaled, field_manager="kubectl-edit", force=True)
    assert _fire_after_debounce(daemon, clock) == ["a"]

    cached = [b for o in daemon.watches.open.values() for b in o.watch.cache.values()]
    deployments = [b for b in cached if b["kind"] == "Deployment"]
    entries = [e for b in cached for e in b["metadata"].get("managedFields", [])]
    theirs = [e for e in entries if e["manager"] not in OUR_MANAGERS]

    assert deployments
    assert [set(b.get("spec", {})) for b in deployments] == [{"replicas"}] * len(deployments)
    assert all("annotations" not in b["metadata"] for b in cached)
    assert [e["manager"] for e in theirs] == ["kubectl-edit"]
    assert "fieldsV1" not in theirs[0]
    assert daemon.watches.status("a") == [
        f"{WIDGET.subject}: spec.replicas changed by kubectl-edit"
    ]


def test_an_operator_that_becomes_available_wakes_its_runtime_once(watching: Any) -> None:
    daemon, cluster, clock, _ = watching
    poll_and_reconcile(daemon)
    daemon.watches.step_all()
    assert _state(daemon) is ModuleState.PROCESSING  # waiting for the operator

    _available(cluster)
    _available(cluster)  # more events: still one reconcile

    assert _fire_after_debounce(daemon, clock) == ["a"]
    assert _state(daemon) is ModuleState.READY
    assert "reconciler_wakes_total 1.0" in daemon.metrics.exposition().decode()


def test_a_deleted_managed_deployment_is_reported_and_recreated(watching: Any) -> None:
    daemon, cluster, clock, _ = watching
    cluster.auto_ready = True
    poll_and_reconcile(daemon)
    daemon.watches.step_all()

    cluster.delete(WIDGET)

    assert _fire_after_debounce(daemon, clock) == ["a"]
    assert cluster.get(WIDGET) is not None
    assert daemon.watches.status("a") == [f"{WIDGET.subject} deleted"]
    assert any(e["reason"] == "Drift" for e in cluster.events.values())
    assert "reconciler_drift_total" in daemon.metrics.exposition().decode()


def test_a_deletion_the_daemon_sent_itself_wakes_but_is_no_drift(watching: Any) -> None:
    daemon, cluster, clock, _ = watching
    cluster.auto_ready = True
    poll_and_reconcile(daemon)
    daemon.watches.step_all()
    where = next(k[0] for k, o in daemon.watches.open.items() if o.watch.cluster is cluster)
    ours = fenced(cluster, lambda: None, around_delete=daemon.watches.own_deletes.around(where))

    assert ours.delete(WIDGET)  # as a run's prune or replacement sends it

    assert _fire_after_debounce(daemon, clock) == ["a"]
    assert daemon.watches.status("a") == []
    assert not any(e["reason"] == "Drift" for e in cluster.events.values())
    cluster.delete(WIDGET)  # re-created by the wake; now someone else deletes it
    assert _fire_after_debounce(daemon, clock) == ["a"]
    assert daemon.watches.status("a") == [f"{WIDGET.subject} deleted"]


USERS = ObjectRef("example.io/v1", "Gadget", "gadget-system", "users")
EVERY_GADGET = ("example.io/v1", "Gadget", "every")


def _blocked_by_users(watching: Any, change: str, files: dict[str, str | None]) -> Daemon:
    """Runtime a reconciled, a user's Gadget made, then ``files`` committed (``change``): the
    removal that follows is blocked by the Gadget, whose every instance is watched."""
    daemon: Daemon = watching[0]
    cluster, fleet = watching[1], watching[3]
    cluster.auto_ready = True
    poll_and_reconcile(daemon)
    metadata = {"name": USERS.name, "namespace": USERS.namespace}
    users = {"apiVersion": USERS.api_version, "kind": USERS.kind, "metadata": metadata, "spec": {}}
    cluster.apply(users, field_manager="kubectl")
    fleet.commit(change, files)
    poll_and_reconcile(daemon)
    waiting = daemon.store.unfinished("a")
    assert waiting is not None
    assert USERS.subject in waiting.message  # blocked
    daemon.watches.step_all()
    assert EVERY_GADGET in {k[1:4] for k in daemon.watches.open}
    return daemon


def test_the_last_blocking_object_gone_lets_a_removal_finish(watching: Any) -> None:
    _, cluster, clock, _ = watching
    widget_only = runtime_yaml("a", "regular", "[{name: widget}]")
    daemon = _blocked_by_users(watching, "drop gadget", {"fleet/runtimes/a.yaml": widget_only})

    cluster.delete(USERS)

    assert _fire_after_debounce(daemon, clock) == ["a"]
    assert daemon.store.unfinished("a") is None
    assert cluster.get(GADGET) is None
    assert daemon.watches.status("a") == []  # the removal's own deletions are no drift
    assert EVERY_GADGET not in {k[1:4] for k in daemon.watches.open}


def test_the_last_blocking_object_gone_wakes_a_deprovision(watching: Any) -> None:
    _, cluster, clock, _ = watching
    daemon = _blocked_by_users(watching, "runtime a leaves git", {"fleet/runtimes/a.yaml": None})

    cluster.delete(USERS)

    assert _fire_after_debounce(daemon, clock) == ["a"]
    assert daemon.store.unfinished("a") is None
    assert daemon.store.runtime("a") is None  # deprovisioned
    assert cluster.get(GADGET) is None
    assert EVERY_GADGET not in {k[1:4] for k in daemon.watches.open}


def test_a_change_by_another_manager_is_drift_named_by_field(watching: Any) -> None:
    daemon, cluster, clock, _ = watching
    cluster.auto_ready = True
    poll_and_reconcile(daemon)
    daemon.watches.step_all()
    scaled = {"apiVersion": "apps/v1", "kind": "Deployment",
              "metadata": {"name": WIDGET.name, "namespace": WIDGET.namespace},
              "spec": {"replicas": 3}}  # fmt: skip

    cluster.apply(scaled, field_manager="kubectl-edit", force=True)

    assert _fire_after_debounce(daemon, clock) == ["a"]
    assert daemon.watches.status("a") == [
        f"{WIDGET.subject}: spec.replicas changed by kubectl-edit"
    ]


def test_our_own_writes_wake_nothing(watching: Any) -> None:
    daemon, cluster, clock, _ = watching
    cluster.auto_ready = True
    poll_and_reconcile(daemon)
    daemon.watches.step_all()

    daemon.reconcile_all(wait=True)  # a resync: applies what it applied before

    assert _fire_after_debounce(daemon, clock) == []


def test_watching_off_opens_nothing_and_waits_for_the_timers(polling: Any) -> None:
    daemon, cluster, clock, _ = polling
    poll_and_reconcile(daemon)
    _available(cluster)

    assert daemon.watches.open == {}
    assert _fire_after_debounce(daemon, clock) == []
    assert _state(daemon) is ModuleState.PROCESSING
    daemon.reconcile_all(wait=True)  # the timer's run, as before watches
    assert _state(daemon) is ModuleState.READY


def test_the_config_repo_turns_watching_off_and_sets_the_debounce(as_the_repo_says: Any) -> None:
    daemon, _, _, fleet = as_the_repo_says
    poll_and_reconcile(daemon)
    assert daemon.watches.open != {}  # on by default
    assert daemon.watches.debounce == 2.0

    settings = SETTINGS.replace(
        "spec: {channelsFrom: {path: ../channels}}",
        "spec: {channelsFrom: {path: ../channels}, watch: false, intervals: {debounce: 5s}}",
    )
    fleet.commit("no watches", {"fleet/reconciler.yaml": settings})
    poll_and_reconcile(daemon)

    assert not daemon.watches.enabled
    assert daemon.watches.debounce == 5.0
    assert daemon.watches.open == {}  # released after each runtime's run


def test_a_change_right_after_the_run_is_an_event(watching: Any) -> None:
    """A watch lists before the run's caller goes on: what changes after is not absorbed into
    its first list (no wake would follow it then)."""
    daemon, cluster, clock, _ = watching
    poll_and_reconcile(daemon)  # no step: the watch threads have not run yet

    _available(cluster)

    assert _fire_after_debounce(daemon, clock) == ["a"]
    assert _state(daemon) is ModuleState.READY


@pytest.mark.timeout(60)  # a stream not hung up would wait for its timeout (minutes)
def test_closing_the_watches_ends_their_tasks_at_once(watching: Any) -> None:
    """Every watch is a task of the one event loop, none a thread of its own; its
    stream is hung up, and :meth:`Watches.close` returns once its task (blocked in a stream
    with nothing to tell) has ended: none is left behind."""
    daemon, _, _, _ = watching
    poll_and_reconcile(daemon)
    daemon.watches.start()
    opened = list(daemon.watches.open.values())

    daemon.watches.close()

    assert opened
    assert [o.thread for o in opened] == [None] * len(opened)
    assert [o.task is not None and o.task.done() for o in opened] == [True] * len(opened)


@pytest.mark.timeout(60)
def test_a_watch_released_by_its_last_runtime_ends_its_task(watching: Any) -> None:
    """Runtimes that leave this replica close the watches only they needed: their streams
    are hung up at once (their tasks waited for when the watches close)."""
    daemon, _, _, _ = watching
    poll_and_reconcile(daemon)
    daemon.watches.start()
    tasks = [o.task for o in daemon.watches.open.values()]

    for runtime in daemon.fleet():
        daemon.watches.release(runtime)
    assert daemon.watches.open == {}
    daemon.watches.close()

    assert tasks
    assert [t is not None and t.done() for t in tasks] == [True] * len(tasks)


def test_a_snapshot_cluster_opens_no_watch(tmp_path: Path) -> None:
    """A snapshot file's cluster changes only by our own runs: a watching daemon reconciles
    it as before but opens no watch on it (and connects to it for watches once, not per run)."""
    Fleet(tmp_path)  # the commit served
    server = GitServer(tmp_path)
    server.start()
    connections: list[str] = []

    def connect(access: ClusterAccess, name: str) -> SnapshotFileCluster:
        connections.append(name)
        return SnapshotFileCluster(tmp_path / f"{name}.yaml")

    source = RemoteSource(server.url, "main", "fleet", tmp_path / "cache")
    options = DaemonOptions(watch=True, debounce=DEBOUNCE)
    store = SqliteStore(tmp_path / "state.db")
    daemon = Daemon(source, store, connect, lambda: datetime.now(UTC), options)
    try:
        poll_and_reconcile(daemon)
        first = len(connections)
        daemon.reconcile_all(wait=True)

        assert daemon.watches.open == {}
        assert "reconciler_watches_open 0.0" in daemon.metrics.exposition().decode()
        assert load_snapshot(tmp_path / "a.yaml").get(WIDGET) is not None  # reconciled
        again = len(connections) - first  # the runs' own: the watches never connect again
        assert again == first - len(daemon.fleet())
    finally:
        daemon.close()
        server.stop()


class _CountedNeeds(dict[str, Any]):
    """The watches' needs per runtime, counting every read of the whole (all runtimes')."""

    wholes = 0

    def values(self) -> Any:
        type(self).wholes += 1
        return super().values()

    def items(self) -> Any:
        type(self).wholes += 1
        return super().items()

    def __iter__(self) -> Any:
        type(self).wholes += 1
        return super().__iter__()


def test_a_run_reads_only_its_own_runtimes_watches(watching: Any) -> None:
    """What a run closes or opens is found from its runtime's own watches: with many
    runtimes watched, a run (and a release) never reads the others'; a watch shared by two
    runtimes stays open until the last one no longer needs it."""
    daemon, cluster, _, _ = watching
    watches = daemon.watches
    watches._needs = _CountedNeeds()
    deployment, config = ("apps/v1", "Deployment"), ("v1", "ConfigMap")
    for n in range(50):
        watches.need(f"r{n}", f"c{n}", InMemoryCluster(), [deployment])
    watches.need("x", "shared", cluster, [deployment, config])
    watches.need("y", "shared", cluster, [deployment])

    watches.need("x", "shared", cluster, [deployment])  # x no longer needs ConfigMaps
    assert ("shared", *config, "ours", ALL) not in watches.open
    watches.release("y")
    assert watches.open[("shared", *deployment, "ours", ALL)].needers == {"x"}
    watches.release("x")
    assert not any(key[0] == "shared" for key in watches.open)

    assert _CountedNeeds.wholes == 0
    assert len(watches.open) == 50 * 2  # each r's Deployments and CRDs


def _lines(caplog: pytest.LogCaptureFixture, *words: str) -> list[str]:
    """The daemon's log lines (INFO and up) that hold every one of ``words``."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.INFO and all(w in r.getMessage() for w in words)
    ]


def test_a_kind_the_identity_may_not_watch_everywhere_is_narrowed_or_refused_once(
    watching: Any, caplog: pytest.LogCaptureFixture
) -> None:
    daemon, cluster, clock, _ = watching
    caplog.set_level(logging.DEBUG)
    # a Role in the widget's namespace only, and no watch of CRDs (a cluster-scoped kind)
    cluster.only_in = {Permission("watch", "apps", "deployments"): {WIDGET.namespace}}
    cluster.denied = {Permission("watch", "apiextensions.k8s.io", "customresourcedefinitions")}

    poll_and_reconcile(daemon)
    daemon.watches.step_all()
    for _ in range(3):  # its next runs try the refused watches once each, quietly
        daemon.reconcile_all(wait=True)
        daemon.watches.step_all()

    on_a = [k for k in daemon.watches.open if k[0] == "context a"]  # runtime a's cluster
    deployments = {k[4] for k in on_a if k[1:3] == ("apps/v1", "Deployment")}
    assert deployments == {WIDGET.namespace, GADGET.namespace}  # one watch each, not all
    watches = next(r for r in daemon.status()["runtimes"] if r["runtime"] == "a")["watches"]
    assert watches["narrowed"] == [
        {"kind": "Deployment", "apiVersion": "apps/v1",
         "namespaces": sorted({WIDGET.namespace, GADGET.namespace})}
    ]  # fmt: skip
    refused = {(r["kind"], r["namespace"]): r for r in watches["refused"]}
    assert set(refused) == {("CustomResourceDefinition", ""), ("Deployment", GADGET.namespace)}
    crds = refused["CustomResourceDefinition", ""]
    assert crds["reason"] == (
        "may not watch customresourcedefinitions.apiextensions.k8s.io in all namespaces"
    )
    assert (
        "grant list and watch on customresourcedefinitions.apiextensions.k8s.io in all"
        in (crds["fix"])
    )
    # one line per refusal and one for the narrowing, whatever the runs since
    assert len(_lines(caplog, "CustomResourceDefinition", "not watched")) == 1
    assert len(_lines(caplog, "Deployment", GADGET.namespace, "not watched")) == 1
    assert len(_lines(caplog, "Deployment", "watched in", "instead")) == 1
    assert not _lines(caplog, "tried again in")  # no watch failing in a loop

    _available(cluster)  # the narrowed watch tells the widget's operator became available
    assert _fire_after_debounce(daemon, clock) == ["a"]

    cluster.denied = set()  # the grant made: the next run opens the watch of CRDs
    daemon.reconcile_all(wait=True)
    assert len(_lines(caplog, "CustomResourceDefinition", "works again")) == 1
    watches = next(r for r in daemon.status()["runtimes"] if r["runtime"] == "a")["watches"]
    assert [r["kind"] for r in watches["refused"]] == ["Deployment"]
