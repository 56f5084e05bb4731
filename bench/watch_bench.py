"""Event-driven reconciliation vs polling: how long until the daemon reacts to the cluster.

Two latencies, with watches (``--debounce``) and without (the retry and resync timers):
"operator available" to "module Ready" (every operator Deployment is made available at once,
as a kubelet would, after the first sync left the modules Processing) and "object deleted" to
"object restored" (one operator Deployment per runtime deleted). Runs the real daemon with its
scheduler, on N in-memory runtimes of a generated fleet, and with ``--kube`` on one runtime of
the real API server (started from RECONCILER_K8S_ASSETS). Also reports the watches per
cluster, the threads (one per watch: one open connection on a real server) and the resident
memory they add per watched cluster.

    python bench/watch_bench.py --runtimes 100
    RECONCILER_K8S_ASSETS=../shared/k8s python bench/watch_bench.py --kube
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reconciler.cluster.api import Cluster  # noqa: E402
from reconciler.cluster.memory import InMemoryCluster  # noqa: E402
from reconciler.core.model import ClusterAccess  # noqa: E402
from reconciler.core.objects import ObjectRef  # noqa: E402
from reconciler.core.status import ModuleState  # noqa: E402
from reconciler.daemon.service import Daemon, DaemonOptions, start_scheduler  # noqa: E402
from reconciler.operations.store import SqliteStore  # noqa: E402
from reconciler.source.git import RemoteSource  # noqa: E402
from tests.support.fleet_generator import generate_fleet  # noqa: E402

GIT = ["git", "-c", "user.email=bench@example.io", "-c", "user.name=bench"]
DEBOUNCE = timedelta(seconds=1)
RESYNC = timedelta(seconds=60)


def _rss_mb() -> float:
    status = Path("/proc/self/status").read_text().split("VmRSS:")[1]
    return int(status.split()[0]) / 1024


def _until(condition: Callable[[], bool], limit: float = 300.0) -> float:
    """Seconds until ``condition()`` holds (polled every 20 ms; a benchmark may wait)."""
    started = time.perf_counter()
    while not condition():
        if time.perf_counter() - started > limit:
            raise SystemExit("gave up waiting")
        time.sleep(0.02)
    return time.perf_counter() - started


def _git_fleet(fleet: Path) -> None:
    subprocess.run([*GIT, "init", "-q", "-b", "main"], cwd=fleet, check=True)
    subprocess.run([*GIT, "add", "-A"], cwd=fleet, check=True)
    subprocess.run([*GIT, "commit", "-qm", "fleet"], cwd=fleet, check=True)


@contextmanager
def _daemon(
    fleet: Path, work: Path, connect: Callable[[ClusterAccess, str], Cluster], watch: bool
) -> Iterator[Daemon]:
    source = RemoteSource(str(fleet), "main", ".", work / "cache", local=True)
    options = DaemonOptions(workers=4, watch=watch, debounce=DEBOUNCE, resync_interval=RESYNC)
    store = SqliteStore(work / "state.db")
    daemon = Daemon(source, store, connect, lambda: datetime.now(UTC), options)
    scheduler = start_scheduler(daemon)
    try:
        yield daemon
    finally:
        scheduler.shutdown(wait=False)
        daemon.close()


def _all_ready(daemon: Daemon, runtimes: list[str]) -> bool:
    for name in runtimes:
        record = daemon.store.runtime(name)
        if record is None or record.state is not ModuleState.READY:
            return False
    return True


def _operators(cluster: InMemoryCluster) -> list[ObjectRef]:
    return [ObjectRef.of(b) for b in cluster.list_objects("apps/v1", "Deployment")]


def _make_available(cluster: InMemoryCluster, ref: ObjectRef) -> None:
    body = cluster.get(ref)
    if body is not None:
        generation = body["metadata"]["generation"]
        status = {"observedGeneration": generation, "replicas": 1, "availableReplicas": 1,
                  "readyReplicas": 1, "updatedReplicas": 1}  # fmt: skip
        cluster.set_status(ref, status)


def memory_run(args: argparse.Namespace, watch: bool) -> dict[str, Any]:
    """One mode on N in-memory runtimes."""
    work = args.workdir / f"watch-{args.runtimes}-{'watch' if watch else 'poll'}"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    fleet = work / "fleet"
    generate_fleet(fleet, args.runtimes, modules=args.modules)
    _git_fleet(fleet)
    clusters: dict[str, InMemoryCluster] = {}
    lock = threading.Lock()

    def connect(access: ClusterAccess, name: str) -> InMemoryCluster:
        with lock:
            return clusters.setdefault(name, InMemoryCluster(auto_ready=False))

    rss_before = _rss_mb()
    threads_before = threading.active_count()
    with _daemon(fleet, work, connect, watch) as daemon:
        runtimes = sorted(daemon.fleet()) if daemon.state.repo else []
        _until(lambda: daemon.state.repo is not None)
        runtimes = sorted(daemon.state.repo.runtimes) if daemon.state.repo else []
        _until(lambda: all(daemon.store.runtime(r) is not None for r in runtimes))
        daemon.wait_idle()
        if watch:
            _until(lambda: all(o.watch.resource_version for o in daemon.watches.open.values()))
        watches = len(daemon.watches.open)
        threads = threading.active_count() - threads_before
        rss = _rss_mb() - rss_before
        with lock:
            every = list(clusters.values())
        for cluster in every:
            for ref in _operators(cluster):
                _make_available(cluster, ref)
            cluster.auto_ready = True
        ready = _until(lambda: _all_ready(daemon, runtimes))
        daemon.wait_idle()
        deleted = [(c, _operators(c)[0]) for c in every if _operators(c)]
        for cluster, ref in deleted:
            cluster.delete(ref)
        restored = _until(lambda: all(c.get(ref) is not None for c, ref in deleted))
    return {
        "mode": "watch" if watch else "poll",
        "runtimes": len(runtimes),
        "available_to_ready_s": ready,
        "deleted_to_restored_s": restored,
        "watches": watches,
        "watches_per_cluster": watches / max(1, len(clusters)),
        "threads_added": threads,
        "rss_added_mb_incl_simulated_clusters": rss,
    }


def kube_run(args: argparse.Namespace, watch: bool) -> dict[str, Any]:
    """One mode on one runtime of the real API server (a kubelet's part played here)."""
    from reconciler.cluster.kube import KubeCluster, connect, k8s_config
    from tests.support.e2e_harness import Kube
    from tests.support.kube_control_plane import find_assets, start_control_plane, unpack

    assets = find_assets()
    if assets is None:
        raise SystemExit("--kube needs RECONCILER_K8S_ASSETS")
    work = args.workdir / f"watch-kube-{'watch' if watch else 'poll'}"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    fleet = work / "fleet"
    generate_fleet(fleet, 1, modules=3)
    with start_control_plane(unpack(assets)) as plane:
        runtime = next((fleet / "runtimes").glob("*.yaml"))
        text = runtime.read_text()
        start = text.index("  cluster:")
        end = text.index("\n", text.index("\n", start) + 1)
        access = f"  cluster: {{kubeconfigFile: {plane.kubeconfig_name}}}"
        runtime.write_text(text[:start] + access + text[end:])
        _git_fleet(fleet)

        def reach(access: ClusterAccess, name: str) -> Cluster:
            return connect(access, name=name, kubeconfig_dir=plane.kubeconfig_dir)

        kube = KubeCluster(k8s_config.new_client_from_config(config_file=str(plane.kubeconfig)))
        with _daemon(fleet, work, reach, watch) as daemon:
            _until(lambda: daemon.state.repo is not None)
            runtimes = sorted(daemon.state.repo.runtimes) if daemon.state.repo else []
            _until(lambda: daemon.store.runtime(runtimes[0]) is not None)
            daemon.wait_idle()
            if watch:
                _until(lambda: all(o.watch.resource_version for o in daemon.watches.open.values()))
            refs = [ObjectRef.of(b) for b in kube.list_objects("apps/v1", "Deployment")]
            kubelet = Kube(plane.kubeconfig)
            for ref in refs:
                kubelet.make_available(ref.namespace, ref.name)
            ready = _until(lambda: _all_ready(daemon, runtimes))
            daemon.wait_idle()
            kube.delete(refs[0])
            restored = _until(lambda: kube.get(refs[0]) is not None)
    return {"mode": "watch" if watch else "poll", "server": "real",
            "available_to_ready_s": ready, "deleted_to_restored_s": restored}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runtimes", type=int, default=100)
    parser.add_argument("--modules", type=int, default=10)
    parser.add_argument("--kube", action="store_true", help="the real API server instead")
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench" / "out")
    args = parser.parse_args(argv)
    run = kube_run if args.kube else memory_run
    results = [run(args, watch=True), run(args, watch=False)]
    print(json.dumps(results, indent=2))
    name = "watch-kube.json" if args.kube else f"watch-{args.runtimes}.json"
    (args.workdir / name).write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
