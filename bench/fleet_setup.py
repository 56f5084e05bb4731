"""The set-up the daemon benchmarks share: a fresh work folder, a generated fleet committed to a
git repository in it, and a daemon following that repository as a local remote onto in-memory
clusters with injected API latency and a SQLite store in the work folder (its ticks are called by
the benchmark, never scheduled). Callers: ``daemon_bench.py``, ``rollout_bench.py``."""

from __future__ import annotations

import argparse
import shutil
import subprocess
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.model import ClusterAccess
from reconciler.daemon.service import Daemon, DaemonOptions
from reconciler.operations.store import SqliteStore
from reconciler.source.git import RemoteSource
from tests.support.fleet_generator import generate_fleet

GIT = ["git", "-c", "user.email=bench@example.io", "-c", "user.name=bench"]


def fresh_workdir(folder: Path) -> Path:
    """``folder``, emptied (or made): what an earlier run left there is removed."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    return folder


def commit_generated_fleet(fleet: Path, runtimes: int, modules: int) -> None:
    """Generate a fleet of ``runtimes`` x ``modules`` in ``fleet`` and commit it on ``main``."""
    generate_fleet(fleet, runtimes, modules=modules)
    subprocess.run([*GIT, "init", "-q", "-b", "main"], cwd=fleet, check=True)
    subprocess.run([*GIT, "add", "-A"], cwd=fleet, check=True)
    subprocess.run([*GIT, "commit", "-qm", "fleet"], cwd=fleet, check=True)


@dataclass
class BenchDaemon:
    """A daemon following a fleet repository, its source and the clusters it connected to."""

    daemon: Daemon
    source: RemoteSource
    clusters: dict[str, InMemoryCluster] = field(default_factory=dict)

    def writes(self) -> int:
        """API writes on every cluster so far."""
        return sum(c.writes for c in self.clusters.values())


def start_bench_daemon(work: Path, fleet: Path, latency: float, workers: int) -> BenchDaemon:
    """A daemon on ``fleet`` (its git clone and ``state.db`` in ``work``), ``workers`` workers,
    every API call of its clusters taking ``latency`` seconds."""
    clusters: dict[str, InMemoryCluster] = {}

    def connect(access: ClusterAccess, name: str) -> InMemoryCluster:
        return clusters.setdefault(name, InMemoryCluster(latency=latency))

    source = RemoteSource(str(fleet), "main", ".", work / "cache", local=True)  # a path we chose
    daemon = Daemon(
        source,
        SqliteStore(work / "state.db"),
        connect,
        lambda: datetime.now(UTC),
        DaemonOptions(workers=workers),
    )
    return BenchDaemon(daemon, source, clusters)


def add_fleet_arguments(parser: argparse.ArgumentParser, workdir: Path) -> None:
    """The options both daemon benchmarks take: the fleet's size, the API latency, the
    workers and where the fleet is written."""
    parser.add_argument("--runtimes", type=int, default=1000)
    parser.add_argument("--modules", type=int, default=10)
    parser.add_argument("--latency", type=float, default=0.002, help="seconds per API call")
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--workdir", type=Path, default=workdir)
