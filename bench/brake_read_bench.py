"""The daemon's deletion brake on a channel bump (issue 43, point 5): which clusters it reads
and how long its verdict takes, reading the clusters of the runtimes the commit changes (the
daemon now) or every cluster (the daemon before, and a commit with none in force).

    python bench/brake_read_bench.py --fleet bench/out/scale-fleet-5000 \\
        --clusters bench/out/scale-cl-5000/ [--module mod-03] [--channel regular] [--runs 3]

``--fleet`` is a generated fleet (``bench/generate_fleet.py``), ``--clusters`` its snapshot
folder after a first ``reconciler sync`` (its store beside it). The fleet is read once as the
commit in force; the judged commit is the same with ``--module`` one version up in
``--channel``, made in memory. Each verdict is
:func:`reconciler.operations.running.fetch_verdict` over the snapshot files (read at each
connection, as the daemon reads them) and the store, 4 clusters at a time as the daemon's
default workers.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reconciler.cli.clusters import Access
from reconciler.cli.options import ClusterOptions, RepoInput
from reconciler.cluster.api import Cluster
from reconciler.core.brake import Allowance, Limits, changed_by
from reconciler.core.model import ClusterAccess, ConfigRepo
from reconciler.operations.running import Judged, fetch_verdict
from reconciler.operations.store import open_store_to_read
from reconciler.source.loader import ReadOptions, load_repo


def bumped(repo: ConfigRepo, channel: str, module: str) -> ConfigRepo:
    """``repo`` with ``module`` one version up in ``channel``."""
    versions = sorted(repo.modules[module].versions)
    current = repo.channels[channel].modules[module]
    newer = versions[min(versions.index(current) + 1, len(versions) - 1)]
    modules = {**repo.channels[channel].modules, module: newer}
    channels = {**repo.channels, channel: replace(repo.channels[channel], modules=modules)}
    return replace(repo, channels=channels)


def main(argv: list[str] | None = None) -> int:
    """Command line; see the module docstring."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--fleet", type=Path, required=True)
    parser.add_argument("--clusters", required=True, help="the snapshot folder (ending in /)")
    parser.add_argument("--module", default="mod-03")
    parser.add_argument("--channel", default="regular")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    validation = load_repo(RepoInput(args.fleet, None, 1 << 20).repo, ReadOptions())
    assert validation.repo is not None, validation.diagnostics[:3]
    current = validation.repo
    judged_repo = bumped(current, args.channel, args.module)
    options = ClusterOptions(None, "reconciler-system", snapshot=args.clusters)
    access = Access(options, current.settings, reuse_snapshots=False)
    store = open_store_to_read(f"sqlite:///{Path(args.clusters).resolve() / 'reconciler-state.db'}")
    changed = changed_by(current, judged_repo)
    print(f"{len(current.runtimes)} runtimes; the bump changes {len(changed)}")
    in_force = Limits.of(current.settings)
    for label, of in (("every cluster", None), ("the runtimes it changes", current)):
        seconds, reads = [], 0
        for _ in range(args.runs):
            read: list[str] = []

            def connect(cluster: ClusterAccess, name: str, log: list[str] = read) -> Cluster:
                log.append(name)
                return access.connect(cluster, name)

            started = time.perf_counter()
            judged = Judged(judged_repo, Allowance(), in_force, of)
            verdict, _ = fetch_verdict(store, connect, judged, workers=4)
            seconds.append(time.perf_counter() - started)
            reads = len(read)
        print(
            f"{label}: {reads} clusters read, verdict in {statistics.median(seconds):.2f} s "
            f"(median of {args.runs}; {verdict.message[:60]})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
