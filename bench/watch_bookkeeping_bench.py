"""The daemon's watch bookkeeping per run (issue 43): the CPU time of one runtime's
``Watches.need`` (what a run does after it ends) with N clusters watched, one runtime each,
10 kinds each (plus CRDs), on in-memory clusters; no threads, no events.

    python bench/watch_bookkeeping_bench.py --clusters 10 100 300 1000 2000 [--runs 200]

Prints, per N, the mean CPU time of a steady-state run (the same kinds again), in ms. Runs on
whichever ``reconciler`` is imported (a checkout of another commit measures that one).
"""

from __future__ import annotations

import argparse
import time

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.model import Settings
from reconciler.daemon.logs import Repeats
from reconciler.daemon.metrics import Metrics
from reconciler.daemon.watches import Watches

KINDS = [("v1", f"Kind{k}") for k in range(10)]


def per_run_ms(clusters: int, runs: int) -> float:
    """Mean CPU ms of one steady-state ``need`` with ``clusters`` runtimes watched."""
    watches = Watches(Settings, Metrics(), Repeats(), lambda _runtime: None, watch=True)
    cluster = InMemoryCluster()
    for n in range(clusters):
        watches.need(f"rt-{n}", f"cluster-{n}", cluster, KINDS)
    start = time.process_time()
    for i in range(runs):
        n = i % clusters
        watches.need(f"rt-{n}", f"cluster-{n}", cluster, KINDS)
    return (time.process_time() - start) / runs * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, nargs="+", default=[10, 100, 300, 1000, 2000])
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    for clusters in args.clusters:
        runs = max(5, min(args.runs, args.runs * 100 // clusters))
        print(f"{clusters:>6} clusters: {per_run_ms(clusters, runs):9.3f} ms per run ({runs} runs)")


if __name__ == "__main__":
    main()
