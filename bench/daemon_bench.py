"""Daemon benchmark: a generated fleet on in-memory clusters with injected API latency.

Generates N runtimes x 10 modules in a git repository, serves it as a local remote, and drives
the daemon's ticks: a first poll and full sync of every runtime, a poll when nothing changed,
and a poll after one channel bump. Reports times, API writes, remote checks and the process's
peak resident memory.

    python bench/daemon_bench.py --runtimes 1000 --latency 0.002 --workers 16
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.fleet_setup import (  # noqa: E402
    GIT,
    add_fleet_arguments,
    commit_generated_fleet,
    fresh_workdir,
    start_bench_daemon,
)
from reconciler.core.fleetdiff import FleetDiffer  # noqa: E402

MEASURE = """
import sys
from datetime import UTC, datetime
from reconciler.cluster.memory import InMemoryCluster
from reconciler.lifecycle.executor import sync_runtime
from reconciler.source.loader import load_repo
from reconciler.core.render import Renderer
from reconciler.core.resolve import resolve_runtime
repo = load_repo(sys.argv[2]).repo
renderer = Renderer(repo)
clusters = {}
for name in sorted(repo.runtimes):
    if sys.argv[1] == "clusters":
        clusters[name] = InMemoryCluster()
        sync_runtime(clusters[name], repo, name, now=datetime.now(UTC), renderer=renderer)
    else:
        renderer.render(resolve_runtime(repo, repo.runtimes[name]))
status = open("/proc/self/status").read().split("VmHWM:")[1]
print(int(status.split()[0]) / 1024)
"""


def _peak_rss_mb() -> float:
    """This process's peak resident memory (VmHWM: unlike ru_maxrss, not inherited through
    fork and exec)."""
    status = Path("/proc/self/status").read_text().split("VmHWM:")[1]
    return int(status.split()[0]) / 1024


def _rss_of(what: str, fleet: Path) -> float:
    """Peak RSS (MB) of a fresh process holding the repo, or the repo and every runtime's
    in-memory cluster fully synced: what the benchmark's simulation itself costs."""
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, what, str(fleet)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return float(done.stdout.strip())


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; results also go to ``<workdir>/daemon.json``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_fleet_arguments(parser, ROOT / "bench" / "out")
    args = parser.parse_args(argv)
    work = fresh_workdir(args.workdir / f"daemon-{args.runtimes}")
    fleet = work / "fleet"
    commit_generated_fleet(fleet, args.runtimes, args.modules)
    bench = start_bench_daemon(work, fleet, args.latency, args.workers)
    daemon, source, writes = bench.daemon, bench.source, bench.writes

    started = time.perf_counter()
    daemon.poll()
    daemon.reconcile_all(wait=True)
    full = time.perf_counter() - started
    full_writes = writes()

    checks, before = source.checks, writes()
    started = time.perf_counter()
    changed = daemon.poll()
    noop = time.perf_counter() - started
    noop_checks, noop_writes = source.checks - checks, writes() - before

    old = daemon.state.repo
    channel = fleet / "channels" / "regular.yaml"
    channel.write_text(channel.read_text().replace("mod-03: 1.0.0", "mod-03: 1.1.0"))
    subprocess.run([*GIT, "commit", "-qam", "bump"], cwd=fleet, check=True)
    before = writes()
    started = time.perf_counter()
    daemon.poll()
    daemon.wait_idle()  # only the runtimes the commit changes were submitted
    bump = time.perf_counter() - started
    bump_writes = writes() - before
    assert old is not None
    assert daemon.state.repo is not None
    planned = FleetDiffer(old, daemon.state.repo, datetime.now(UTC)).diff()
    object_changes = sum(len(m.plan.changes) for r in planned.runtimes for m in r.modules)
    module_changes = sum(len(r.modules) for r in planned.runtimes)
    daemon.close()

    peak = _peak_rss_mb()
    repo_only = _rss_of("repo", fleet)
    clusters_only = _rss_of("clusters", fleet)
    result = {
        "runtimes": args.runtimes,
        "modules": args.modules,
        "latency_s": args.latency,
        "workers": args.workers,
        "full_sync_s": full,
        "full_sync_writes": full_writes,
        "noop_poll_s": noop,
        "noop_poll_share_of_full": noop / full,
        "noop_poll_writes": noop_writes,
        "noop_poll_remote_checks": noop_checks,
        "noop_poll_accepted": changed,
        "bump_cycle_s": bump,
        "bump_writes": bump_writes,
        "bump_planned_object_changes": object_changes,
        "bump_changed_modules": module_changes,
        "peak_rss_mb": peak,
        "rss_repo_only_mb": repo_only,
        "rss_repo_and_simulated_clusters_mb": clusters_only,
        # the simulated clusters live in the API servers in production, not in the daemon
        "daemon_rss_estimate_mb": peak - (clusters_only - repo_only),
    }
    print(json.dumps(result, indent=2))
    (args.workdir / "daemon.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
