"""Replica benchmark (issue 14): runtimes converged per second by one and by two daemon replicas
sharing a PostgreSQL store, and by one replica on SQLite, on the same fleet with simulated API
latency.

    bash tests/pg_server.sh --install python bench/replica_bench.py --runtimes 400

Each replica is a process of its own (one Python process is bound by one core): it builds the
daemon through the library (as ``reconciler daemon`` does), on snapshot-file clusters (one file
per runtime, shared, so a runtime keeps its state whoever owns it) that answer every API call
after ``--latency`` seconds (``InMemoryCluster.latency``). Replicas first join as members; once
the store lists all of them, the parent releases them at once and counts the runtimes whose
record says Ready at the fleet's commit, from the store, until all are.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.generate_fleet import generate_fleet  # noqa: E402
from reconciler.cluster.snapshot import SnapshotFileCluster  # noqa: E402
from reconciler.core.model import ClusterAccess  # noqa: E402
from reconciler.core.status import ModuleState  # noqa: E402
from reconciler.daemon.service import Daemon, DaemonOptions  # noqa: E402
from reconciler.operations.store import open_store  # noqa: E402
from reconciler.source.git import RemoteSource  # noqa: E402

GIT = ["git", "-c", "user.email=bench@example.io", "-c", "user.name=bench"]
LEASE = timedelta(seconds=20)


def replica_main(args: argparse.Namespace) -> None:
    """One replica: join, wait for the start file, poll once, then beat until the stop file."""
    root = Path(args.workdir)
    remote, cache = str(root / "remote.git"), root / f"cache-{args.member}"
    source = RemoteSource(remote, "main", "", cache, local=True)  # as --repo PATH does

    def connect(access: ClusterAccess, name: str) -> SnapshotFileCluster:
        cluster = SnapshotFileCluster(root / "clusters" / f"{name}.yaml")
        cluster.latency = args.latency
        return cluster

    options = DaemonOptions(member=args.member, lease=LEASE, workers=args.workers)
    daemon = Daemon(source, open_store(args.state), connect, lambda: datetime.now(UTC), options)
    daemon.membership.beat()
    while not (root / "start").exists():
        time.sleep(0.05)  # the parent's barrier: another process
    daemon.poll()
    while not (root / "stop").exists():
        time.sleep(LEASE.total_seconds() / 6)
        daemon.heartbeat()
    daemon.close()


def _git_remote(root: Path, runtimes: int) -> str:
    """The generated fleet committed and cloned bare into ``root/remote.git``; its commit."""
    work = root / "work"
    generate_fleet(work, runtimes=runtimes, modules=3, versions=1, seed=5)
    subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)
    subprocess.run([*GIT, "-C", str(work), "add", "-A"], check=True)
    subprocess.run([*GIT, "-C", str(work), "commit", "-qm", "fleet"], check=True)
    remote = root / "remote.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(remote)], check=True)
    done = subprocess.run(
        ["git", "-C", str(work), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def _fresh_state(kind: str, root: Path, postgres: str) -> str:
    if kind == "sqlite":
        return f"sqlite:///{root / 'state.db'}"
    import psycopg

    schema = f"rc_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres, autocommit=True) as db:
        db.execute(f"CREATE SCHEMA {schema}".encode())
    joiner = "&" if "?" in postgres else "?"
    return f"{postgres}{joiner}options=-csearch_path%3D{schema}"


def _converged(state: str, commit: str) -> int:
    store = open_store(state)
    try:
        return sum(
            1
            for r in store.runtimes()
            if r.state is ModuleState.READY and r.commit is not None and r.commit.config == commit
        )
    finally:
        close = getattr(store, "close", None)
        if close is not None:
            close()


def run_config(args: argparse.Namespace, kind: str, replicas: int) -> dict[str, float]:
    """One configuration on a fresh store and fresh clusters: seconds to converge, rate."""
    root = Path(args.workdir) / f"{kind}-{replicas}"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    commit = _git_remote(root, args.runtimes)
    (root / "clusters").mkdir()
    state = _fresh_state(kind, root, args.postgres)
    open_store(state)  # migrated once, before the replicas race to it
    names = [f"replica-{index}" for index in range(replicas)]
    processes = [_start_replica(args, root, state, name) for name in names]
    try:
        _wait_members(state, len(names), processes)
        started = time.monotonic()
        (root / "start").touch()
        done = 0
        while done < args.runtimes:
            time.sleep(0.5)  # the replicas work in other processes: look again
            done = _converged(state, commit)
            _check_alive(processes)
        seconds = time.monotonic() - started
    finally:
        (root / "stop").touch()
        for process in processes:
            process.wait(timeout=120)
    rate = args.runtimes / seconds
    print(f"  {kind}, {replicas} replica(s): {seconds:.1f} s, {rate:.1f} runtimes/s", flush=True)
    return {"seconds": seconds, "rate": rate}


def _start_replica(
    args: argparse.Namespace, root: Path, state: str, name: str
) -> subprocess.Popen[bytes]:
    command = [sys.executable, __file__, "--replica", "--member", name, "--state", state]
    command += ["--workdir", str(root), "--latency", str(args.latency)]
    command += ["--workers", str(args.workers)]
    log = (root / f"{name}.log").open("wb")
    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)


def _wait_members(state: str, count: int, processes: list[subprocess.Popen[bytes]]) -> None:
    store = open_store(state)
    try:
        while len(store.members()) < count:
            time.sleep(0.2)  # the replicas join in other processes
            _check_alive(processes)
    finally:
        close = getattr(store, "close", None)
        if close is not None:
            close()


def _check_alive(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        if process.poll() is not None:
            raise SystemExit(f"a replica stopped ({process.returncode}); see its log")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtimes", type=int, default=400)
    parser.add_argument("--latency", type=float, default=0.02, help="seconds per API call")
    parser.add_argument("--workers", type=int, default=16, help="reconciles at once per replica")
    parser.add_argument("--postgres", default=os.environ.get("RECONCILER_TEST_POSTGRES", ""))
    parser.add_argument("--workdir", default=str(ROOT / "bench" / "out" / "replicas"))
    parser.add_argument("--replica", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--member", help=argparse.SUPPRESS)
    parser.add_argument("--state", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.replica:
        replica_main(args)
        return
    if not args.postgres:
        raise SystemExit(
            "replica_bench: no PostgreSQL: give --postgres URL or run it through "
            "bash tests/pg_server.sh --install python bench/replica_bench.py"
        )
    print(
        f"{args.runtimes} runtimes, {args.latency * 1000:g} ms per API call, "
        f"{args.workers} workers per replica"
    )
    results = {
        "postgresql-1": run_config(args, "postgresql", 1),
        "postgresql-2": run_config(args, "postgresql", 2),
        "sqlite-1": run_config(args, "sqlite", 1),
    }
    scale = results["postgresql-2"]["rate"] / results["postgresql-1"]["rate"]
    engine = results["sqlite-1"]["rate"] / results["postgresql-1"]["rate"]
    print(f"two replicas / one (PostgreSQL): {scale:.2f}x (aim at least 1.7x)")
    print(f"SQLite / PostgreSQL, one replica: {engine:.2f}x (aim at most 1.3x)")
    document = {**results, "two_vs_one": scale, "sqlite_vs_postgresql": engine}
    document["settings"] = {"runtimes": args.runtimes, "latency": args.latency}
    out = Path(args.workdir) / "replicas.json"
    out.write_text(json.dumps(document, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
