"""Stopping the daemon while runs are under way (a server slow to answer whether an operator
is available) and one is queued: ``close()`` returns once the steps under way end, no further
step starts, the queued run is dropped, and each operation stays resumable (its step pending or
retrying, never failed because of the stop); a daemon started again on the same store finishes
it. A pass never waits for the cluster (its runs end "not yet" and are run again later), so the
slow answer is the server's: it comes once the daemon stops (the test's time limit is a minute,
the answer would take an hour otherwise: a close that waited for it fails by the limit). The
same on the real API server: tests/e2e/test_daemon_stopping.py; ``SIGTERM`` to the process:
tests/processes/test_daemon_stopping.py."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.model import ClusterAccess
from reconciler.core.objects import Body, ObjectRef
from reconciler.daemon.service import Daemon, DaemonOptions
from reconciler.operations.model import OperationState, StepState
from reconciler.operations.store import SqliteStore
from reconciler.source.git import RemoteSource
from tests.support.daemons import Fleet, GitServer, until
from tests.support.stopping import NotedStop, steps_of

RUNTIMES = ("a", "b", "c")
IN_PROGRESS, PENDING = OperationState.IN_PROGRESS, OperationState.PENDING
AN_HOUR = 3600.0


class _SlowCluster(InMemoryCluster):
    """An in-memory cluster whose operators never become available by themselves, and whose
    answer to a read of a Deployment takes an hour, or until ``stop`` is set (the daemon
    stops): a run is under way in a step when the daemon stops."""

    def __init__(self, stop: threading.Event) -> None:
        super().__init__(auto_ready=False)
        self.stop = stop

    def get(self, ref: ObjectRef) -> Body | None:
        if ref.kind == "Deployment":
            self.stop.wait(AN_HOUR)
        return super().get(ref)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """The URL of the fleet's repository, served."""
    Fleet(tmp_path)
    server = GitServer(tmp_path)
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


def _daemon(
    root: Path, url: str, clusters: dict[str, InMemoryCluster], stop: threading.Event
) -> Daemon:
    def connect(access: ClusterAccess, name: str) -> InMemoryCluster:
        return clusters.setdefault(name, _SlowCluster(stop))

    source = RemoteSource(url, "main", "fleet", root / "cache")
    store = SqliteStore(root / "state.db")
    options = DaemonOptions(workers=2)  # a and b run, c waits in the queue
    return Daemon(source, store, connect, lambda: datetime.now(UTC), options, stopping=stop)


def _make_available(cluster: InMemoryCluster) -> None:
    for body in cluster.list_objects("apps/v1", "Deployment"):
        status = {
            "observedGeneration": body["metadata"]["generation"],
            "replicas": 1,
            "availableReplicas": 1,
            "readyReplicas": 1,
            "updatedReplicas": 1,
        }
        cluster.set_status(ObjectRef.of(body), status)


@pytest.mark.timeout(60)
def test_close_wakes_runs_waiting_for_operators_and_a_restart_finishes_them(
    served: str, tmp_path: Path
) -> None:
    clusters: dict[str, InMemoryCluster] = {}
    stop = NotedStop()
    daemon = _daemon(tmp_path, served, clusters, stop)

    assert daemon.poll()  # every runtime submitted; a and b ask whether operators are up
    stop.waiting.wait(30)
    assert stop.waiting.is_set(), "a run waits for the server's answer"
    daemon.close()  # returns within the test's limit, not after an hour

    # the queued run was dropped (no operation made) and no run starts now; each operation
    # stopped where it was, none failed; a run that waited applied its modules and its
    # readiness check is still to run
    assert daemon.store.unfinished("c") is None
    assert daemon.submit("c").cancelled()
    operations = [daemon.store.unfinished(r) for r in RUNTIMES[:2]]
    assert None not in operations
    steps = [steps_of(o) for o in operations if o is not None]
    assert {o.state for o in operations if o is not None} <= {IN_PROGRESS, PENDING}
    assert all(StepState.FAILED not in s.values() for s in steps)
    waited = [s for s in steps if s["Apply_Modules"] is StepState.DONE]
    assert waited, "the run that waited for its operators applied its modules"
    assert all(s["Check_Modules_Ready"] in (StepState.PENDING, StepState.RETRYING) for s in waited)
    assert isinstance(daemon.store, SqliteStore)
    daemon.store.close()

    for cluster in clusters.values():  # the operators come up meanwhile
        cluster.auto_ready = True
        _make_available(cluster)
    again = _daemon(tmp_path, served, clusters, threading.Event())
    try:
        again.poll()
        until(lambda: _all_succeeded(again), 30)
    finally:
        again.close()


def _all_succeeded(daemon: Daemon) -> bool:
    daemon.reconcile_all(wait=True)  # a step that waited is retried from its stage's start
    return all(daemon.store.unfinished(r) is None for r in RUNTIMES)


@pytest.mark.timeout(60)
def test_a_run_queued_before_the_stop_does_not_start_after_it(served: str, tmp_path: Path) -> None:
    """The pool's threads, freed by the runs the stop let go on, take no queued run (before
    ``close()`` shuts the pool down): none makes an operation while the daemon stops."""
    stop = NotedStop()
    daemon = _daemon(tmp_path, served, {}, stop)
    try:
        assert daemon.poll()  # a and b wait for the server's answer, c waits in the queue
        stop.waiting.wait(30)
        assert stop.waiting.is_set(), "a run waits for the server's answer"
        daemon.stopping.set()
        daemon.wait_idle()  # a and b end; a thread free for c, which must not run

        assert daemon.store.unfinished("c") is None
    finally:
        daemon.close()
