"""What one watched cluster's client and watches cost, apart from the daemon (issue 43): RSS per
cluster of N ``KubeCluster`` clients on one real control plane, after making them, after listing
four kinds with each (discovery and the lists), and after opening a watch stream of each kind
(one HTTP/2 connection per cluster, streams read in the event loop).

    RECONCILER_K8S_ASSETS=../shared/k8s python bench/watch_client_bench.py [--clusters 20]

Every client is another cluster to itself (its own configuration, pool and connection), though
all reach one server; the streams watch a label nothing has, so no cache or event is counted.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from concurrent.futures import Future
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.kube_bench import control_plane  # noqa: E402
from reconciler.cluster.kube import KubeCluster, k8s_config  # noqa: E402
from reconciler.cluster.watch_loop import WATCH_LOOP  # noqa: E402

KINDS = [
    ("v1", "ConfigMap"),
    ("v1", "Namespace"),
    ("apps/v1", "Deployment"),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
]
NOTHING = {"reconciler.dev/bench": "nothing"}


def _rss_mb() -> float:
    gc.collect()
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def _watch(cluster: KubeCluster, api_version: str, kind: str, start: str) -> None:
    async for _ in cluster.watch_async(
        api_version, kind, resource_version=start, labels=NOTHING, timeout_seconds=300
    ):
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=20)
    args = parser.parse_args()
    with control_plane() as plane:

        def made() -> KubeCluster:
            client = k8s_config.new_client_from_config(config_file=str(plane.kubeconfig))
            return KubeCluster(client, name="bench")

        made().list_for_watch("v1", "ConfigMap")  # imports and caches warmed
        before = _rss_mb()
        clusters = [made() for _ in range(args.clusters)]
        after_clients = _rss_mb()
        starts = [[c.list_for_watch(*kind).resource_version for kind in KINDS] for c in clusters]
        after_lists = _rss_mb()
        tasks: list[Future[None]] = [
            WATCH_LOOP.start(_watch(cluster, *kind, start))
            for cluster, begun in zip(clusters, starts, strict=True)
            for kind, start in zip(KINDS, begun, strict=True)
        ]
        time.sleep(10)  # every stream open
        after_streams = _rss_mb()
        for task in tasks:
            task.cancel()
    rows = [
        ("client", after_clients - before),
        ("discovery and lists", after_lists - after_clients),
        (f"{len(KINDS)} watch streams", after_streams - after_lists),
    ]
    for what, grown in rows:
        print(f"{what}: {grown / args.clusters:.2f} MB per cluster")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
