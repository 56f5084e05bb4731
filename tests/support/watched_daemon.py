"""A daemon in the test's process following the e2e world's config repo through ``git daemon``
(:func:`watched_daemon`), its watches on threads, its debounce 1 s, reaching the real API
server as the admin or as the identity of a kubeconfig folder; and what its tests ask of it
(:class:`Watched`). Used by tests/e2e/test_watches.py and tests/e2e/test_least_privilege.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from reconciler.cluster.api import Cluster
from reconciler.cluster.kube import connect
from reconciler.core.model import ClusterAccess
from reconciler.core.status import Reason
from reconciler.daemon.service import Daemon, DaemonOptions
from reconciler.operations.model import Operation
from reconciler.operations.store import SqliteStore
from reconciler.source.git import RemoteSource
from tests.support.daemons import GitServer
from tests.support.e2e_harness import until
from tests.support.e2e_world import World
from tests.support.fleet_history import git
from tests.support.stopping import NotedStop

DEBOUNCE = timedelta(seconds=1)
#: How long a test waits for what a wake does (a hang guard: a run never waits within it).
BOUNDED = 60.0


@dataclass
class Watched:
    """A daemon following the test's config repo through ``git daemon``."""

    world: World
    daemon: Daemon
    work: Path

    def commit(self, message: str) -> None:
        self.world.fleet.write()
        git(self.work, "add", "-A")
        git(self.work, "commit", "-qm", message, "--allow-empty")
        git(self.work, "push", "-q", str(self.work.parent / "git" / "remote.git"), "HEAD:main")

    def first_run(self) -> None:
        """Poll, run every runtime once, and wait until the watches have listed and no run
        waits for CRDs (a run never waits for them: it ends "not yet"; watching, a wake runs
        it again, else a retry timer would: run here, as for a step retrying on a transient
        error, such as the 429 of a new kind whose storage is initializing)."""
        assert self.daemon.poll()
        self.daemon.wait_idle()
        until(self._past_crds, "every run past its CRDs", BOUNDED)
        until(self._listed, "the watches listed their kinds", BOUNDED)

    def until_retried(self, condition: Callable[[], bool], what: str) -> None:
        """``until`` ``condition`` holds, running what a retry timer runs (this daemon runs
        none) whenever an operation waits on a failure: the 429 of a kind whose storage
        re-initialises after its CRD changed, for one."""

        def holds() -> bool:
            if condition():
                return True
            if any(o.data.failure for o in self._unfinished()):
                self.daemon.reconcile_all(wait=True)
            return False

        until(holds, what, BOUNDED)

    def _past_crds(self) -> bool:
        waiting = self._unfinished()
        if not self.daemon.watches.enabled or any(o.data.failure for o in waiting):
            self.daemon.reconcile_all(wait=True)  # what a retry timer runs
            waiting = self._unfinished()
        modules = [m for o in waiting for m in o.data.applied.modules]
        return not any(m.reason == Reason.WAITING_FOR_CRD for m in modules)

    def _unfinished(self) -> list[Operation]:
        found = map(self.daemon.store.unfinished, self.world.fleet.runtimes)
        return [o for o in found if o is not None]

    def _listed(self) -> bool:
        opened = list(self.daemon.watches.open.values())
        return all(o.watch.resource_version for o in opened if o.working)

    def module(self, runtime: str, name: str) -> dict[str, Any]:
        status = self.daemon.status()
        for item in status["runtimes"]:
            if item["runtime"] == runtime:
                for module in item["modules"]:
                    if module["module"] == name:
                        found: dict[str, Any] = module
                        return found
        return {}

    def state(self, runtime: str, name: str) -> str:
        return str(self.module(runtime, name).get("state") or "")


def watched_daemon(
    world: World,
    tmp_path: Path,
    *,
    watch: bool,
    kubeconfig_dir: Path | None = None,
    workers: int = 2,
) -> Iterator[Watched]:
    """A daemon on the test's repo with ``workers`` workers, reaching the cluster with the
    admin's kubeconfig (or the one in ``kubeconfig_dir``); its ``stopping`` event notes each
    wait on it (:class:`~tests.support.stopping.NotedStop`: a run that paused within a pass)."""
    server = GitServer(tmp_path / "git")
    (tmp_path / "git").mkdir()
    git(tmp_path / "git", "init", "-q", "--bare", "remote.git")
    work = world.fleet.root
    world.fleet.write()
    git(work, "init", "-q", "-b", "main")
    server.start()

    def reach(access: ClusterAccess, name: str) -> Cluster:
        folder = kubeconfig_dir or world.control_plane.kubeconfig_dir
        return connect(access, name=name, kubeconfig_dir=folder)

    source = RemoteSource(server.url, "main", "", tmp_path / "cache")
    # no scheduler renews this replica's heartbeat between the test's ticks: a lease longer than
    # any test, so that a run slowed by a loaded machine is not fenced (a test of its own)
    lease = timedelta(minutes=30)
    options = DaemonOptions(workers=workers, watch=watch, debounce=DEBOUNCE, lease=lease)
    store = SqliteStore(tmp_path / "state.db")
    daemon = Daemon(source, store, reach, lambda: datetime.now(UTC), options, stopping=NotedStop())
    daemon.watches.start()
    watched = Watched(world, daemon, work)
    watched.commit("first")
    try:
        yield watched
    finally:
        threads = [o.thread for o in daemon.watches.open.values() if o.thread is not None]
        daemon.close()
        server.stop()
    assert [t for t in threads if t.is_alive()] == []  # each stream hung up, none left behind
