"""Replica benchmark (issue 14): runtimes converged per second by one and by two daemon replicas
sharing a PostgreSQL store, and by one replica on SQLite, on the same fleet with simulated API
latency.

    bash tests/pg_server.sh --install python bench/replica_bench.py --runtimes 400

The fleet (``--runtimes``, 3 modules each) is committed in a git repository that the replicas
fetch as a local remote. Each replica is an OS process of its own (one Python process is bound
by one core): it builds a :class:`Daemon` through the library as ``reconciler daemon`` does, on
the shared store, with the command's ``--snapshot`` connections (one snapshot file per runtime in
a shared folder, so a runtime keeps its state whoever owns it) whose clusters answer every API
call after ``--latency`` seconds (``InMemoryCluster.latency``). A replica joins as a member, waits
on its start pipe, polls (which reconciles the runtimes it owns) and runs the daemon's scheduler
(heartbeats, retries) until every runtime of the fleet has a succeeded operation for the fleet's
commit in the store; then it leaves and exits.

The parent starts the replicas, waits until the store lists all of them as live members, writes
to their pipes at once and reads the operations table until every runtime has converged. The
time is from that start to the last runtime's first succeeded operation, as the store recorded
it. Three configurations, each on a fresh store and fresh cluster files: one replica on
PostgreSQL, two on PostgreSQL, one on SQLite. Results: a table, the two ratios, and
``<workdir>/replicas.json``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import select
import shutil
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reconciler.cli.clusters import Access  # noqa: E402
from reconciler.cli.options import ClusterOptions  # noqa: E402
from reconciler.cluster.api import Cluster  # noqa: E402
from reconciler.cluster.memory import InMemoryCluster  # noqa: E402
from reconciler.core.model import ClusterAccess  # noqa: E402
from reconciler.daemon.membership import DEFAULT_LEASE  # noqa: E402
from reconciler.daemon.service import Daemon, DaemonOptions, start_scheduler  # noqa: E402
from reconciler.operations.model import OperationState  # noqa: E402
from reconciler.operations.store import open_store  # noqa: E402
from reconciler.source.git import RemoteSource  # noqa: E402
from tests.support.fleet_generator import generate_fleet  # noqa: E402

GIT = ["git", "-c", "user.email=bench@example.io", "-c", "user.name=bench"]
SQLITE = "sqlite:///"
#: How often the parent, and each replica, read the store for progress.
PARENT_LOOK = 0.25
REPLICA_LOOK = 0.5

Rows = list[tuple[Any, ...]]


# -- progress, from the store ---------------------------------------------------------------------


class Progress:
    """The succeeded operations of a commit, read from the store's operations table over a
    connection of its own (one small query: no operation is decoded)."""

    def __init__(self, state: str) -> None:
        self._close: Callable[[], None]
        self._query: Callable[[str, tuple[str, ...]], Rows]
        if state.startswith(SQLITE):
            lite = sqlite3.connect(state.removeprefix(SQLITE), timeout=30)
            self._query = lambda sql, values: lite.execute(sql, values).fetchall()
            self._close, self._mark = lite.close, "?"
        else:
            import psycopg

            postgres = psycopg.connect(state, autocommit=True)
            self._query = lambda sql, values: postgres.execute(sql.encode(), values).fetchall()
            self._close, self._mark = postgres.close, "%s"

    def converged(self, commit: str) -> dict[str, tuple[datetime, str]]:
        """Runtime -> when its first operation for ``commit`` succeeded, and by which member."""
        mark = self._mark
        rows = self._query(
            f"SELECT runtime, updated, owner FROM operations "
            f"WHERE state = {mark} AND commit_id = {mark}",
            (str(OperationState.SUCCEEDED), commit),
        )
        found: dict[str, tuple[datetime, str]] = {}
        for runtime, updated, owner in rows:
            moment = datetime.fromisoformat(updated) if isinstance(updated, str) else updated
            if runtime not in found or moment < found[runtime][0]:
                found[runtime] = (moment, owner)
        return found

    def operations(self) -> int:
        """Operations in the store, whatever their state or commit."""
        return int(self._query("SELECT count(*) FROM operations", ())[0][0])

    def close(self) -> None:
        """Close the connection."""
        self._close()


# -- one replica (a process of its own) -----------------------------------------------------------


def replica_main(args: argparse.Namespace) -> int:
    """Join, wait on stdin for the start, poll, then run the daemon's ticks until the fleet has
    converged."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    root = Path(args.root)
    source = RemoteSource(args.remote, "main", ".", root / f"cache-{args.member}", local=True)
    # as `reconciler daemon --snapshot FOLDER/` connects: the runtime's file read anew each time
    snapshot = f"{root / 'clusters'}/"
    clusters = ClusterOptions(None, "", snapshot=snapshot, snapshot_create=True)
    access = Access(clusters, reuse_snapshots=False)

    def connect(cluster_access: ClusterAccess, name: str) -> Cluster:
        cluster = access.connect(cluster_access, name)
        assert isinstance(cluster, InMemoryCluster)
        cluster.latency = args.latency  # every API call of this cluster waits this long
        return cluster

    def now() -> datetime:
        return datetime.now(UTC)

    options = DaemonOptions(workers=args.workers, member=args.member)
    daemon = Daemon(source, open_store(args.state), connect, now, options)
    if daemon.membership.beat() is None:
        return 2
    beat_every = daemon.membership.lease.total_seconds() / 3
    while not select.select([sys.stdin], [], [], beat_every)[0]:
        daemon.membership.beat()  # still waiting for the others to join
    if not sys.stdin.readline():
        daemon.close()
        return 3  # the parent went away
    daemon.poll()  # the fleet's commit: submits every runtime this replica owns
    # what it owns, recorded now: the scheduler's first heartbeat, run before the poll loaded
    # the fleet, would take every owned runtime for new at the second one and run it again
    daemon.heartbeat()
    scheduler = start_scheduler(daemon)  # heartbeats, and the retries operations ask for
    progress = Progress(args.state)
    try:
        while len(progress.converged(args.commit)) < args.runtimes:
            time.sleep(REPLICA_LOOK)  # the others work in other processes: look again
    finally:
        progress.close()
        scheduler.shutdown(wait=True)
        daemon.close()
    return 0


# -- the parent -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Fleet:
    """The generated fleet, as a bare git repository, and its commit."""

    remote: Path
    commit: str
    runtimes: int


@dataclass(slots=True)
class Result:
    """One configuration's run."""

    engine: str
    replicas: int
    seconds: float
    rate: float
    #: From the start to the parent seeing convergence (``seconds`` is the store's time).
    observed_seconds: float
    operations: int
    runtimes_by_member: dict[str, int]
    load_average_before: float


def make_fleet(work: Path, runtimes: int, modules: int) -> Fleet:
    """The fleet generated in ``work/fleet``, committed, cloned bare into ``work/remote.git``."""
    tree, remote = work / "fleet", work / "remote.git"
    generate_fleet(tree, runtimes=runtimes, modules=modules, versions=1, seed=5)
    shutil.rmtree(remote, ignore_errors=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(tree)], check=True)
    subprocess.run([*GIT, "-C", str(tree), "add", "-A"], check=True)
    subprocess.run([*GIT, "-C", str(tree), "commit", "-qm", "fleet"], check=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(tree), str(remote)], check=True)
    head = subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    )
    return Fleet(remote, head.stdout.strip(), runtimes)


class Stores:
    """Fresh stores: a SQLite file in the configuration's folder, or a PostgreSQL schema of
    its own (dropped afterwards)."""

    def __init__(self, postgres: str) -> None:
        self.postgres = postgres
        self.schemas: list[str] = []

    def fresh(self, engine: str, folder: Path) -> str:
        """The URL of a new, empty store, its tables made (before the replicas race to it)."""
        if engine == "sqlite":
            url = f"{SQLITE}{folder / 'state.db'}"
        else:
            import psycopg

            schema = f"rc_bench_{uuid.uuid4().hex[:10]}"
            with psycopg.connect(self.postgres, autocommit=True) as db:
                db.execute(f"CREATE SCHEMA {schema}".encode())
            self.schemas.append(schema)
            joiner = "&" if "?" in self.postgres else "?"
            url = f"{self.postgres}{joiner}options=-csearch_path%3D{schema}"
        store = open_store(url)
        close = getattr(store, "close", None)
        if close is not None:
            close()
        return url

    def drop(self) -> None:
        """Drop the PostgreSQL schemas made."""
        if not self.schemas:
            return
        import psycopg

        with psycopg.connect(self.postgres, autocommit=True) as db:
            for schema in self.schemas:
                db.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE".encode())
        self.schemas.clear()


def run_config(
    args: argparse.Namespace, fleet: Fleet, stores: Stores, engine: str, replicas: int
) -> Result:
    """One configuration on a fresh store and fresh cluster files."""
    folder = Path(args.workdir) / "replicas" / f"{engine}-{replicas}"
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "clusters").mkdir(parents=True)
    state = stores.fresh(engine, folder)
    load = os.getloadavg()[0]
    names = [f"replica-{index + 1}" for index in range(replicas)]
    processes = [start_replica(args, fleet, folder, state, name) for name in names]
    progress = Progress(state)
    try:
        wait_members(state, names, processes, folder, args.timeout)
        started = time.time()  # a wall clock time: the store's timestamps are compared to it
        for process in processes:
            assert process.stdin is not None
            process.stdin.write(b"go\n")
            process.stdin.close()
        deadline = time.monotonic() + args.timeout
        while len(done := progress.converged(fleet.commit)) < fleet.runtimes:
            check_replicas(processes, folder, deadline, f"{len(done)} of {fleet.runtimes}")
            time.sleep(PARENT_LOOK)  # the replicas work in other processes: look again
        observed = time.time() - started
        for process in processes:
            code = process.wait(timeout=120)  # each leaves once it too sees the fleet converged
            if code != 0:
                raise SystemExit(f"a replica exited with {code}; see {folder}/*.log")
        operations = progress.operations()
    finally:
        progress.close()
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    seconds = max(moment for moment, _ in done.values()).timestamp() - started
    shares: dict[str, int] = {}
    for _, owner in done.values():
        shares[owner] = shares.get(owner, 0) + 1
    return Result(
        engine,
        replicas,
        seconds,
        fleet.runtimes / seconds,
        observed,
        operations,
        dict(sorted(shares.items())),
        load,
    )


def start_replica(
    args: argparse.Namespace, fleet: Fleet, folder: Path, state: str, name: str
) -> subprocess.Popen[bytes]:
    """A replica process, its output in ``folder/NAME.log``, started by its stdin."""
    command = [sys.executable, __file__, "--replica", "--member", name, "--state", state]
    command += ["--root", str(folder), "--remote", str(fleet.remote), "--commit", fleet.commit]
    command += ["--runtimes", str(fleet.runtimes), "--latency", str(args.latency)]
    command += ["--workers", str(args.workers)]
    with (folder / f"{name}.log").open("wb") as log:
        return subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT
        )


def wait_members(
    state: str,
    names: Sequence[str],
    processes: Sequence[subprocess.Popen[bytes]],
    folder: Path,
    timeout: float,
) -> None:
    """Until the store lists every replica as a live member (so ownership is shared from the
    first reconcile on, not all of it taken by the first replica up)."""
    store = open_store(state)
    deadline = time.monotonic() + timeout
    try:
        while True:
            now = datetime.now(UTC)
            live = {m.name for m in store.members() if m.live(now, DEFAULT_LEASE)}
            if live >= set(names):
                return
            check_replicas(processes, folder, deadline, f"members {sorted(live)}")
            time.sleep(0.2)  # the replicas join in other processes
    finally:
        close = getattr(store, "close", None)
        if close is not None:
            close()


def check_replicas(
    processes: Sequence[subprocess.Popen[bytes]], folder: Path, deadline: float, where: str
) -> None:
    """Stop the benchmark when a replica stopped early or time ran out."""
    for process in processes:
        if process.poll() is not None:
            raise SystemExit(f"a replica exited with {process.returncode}; see {folder}/*.log")
    if time.monotonic() > deadline:
        raise SystemExit(f"no convergence in time ({where}); see {folder}/*.log")


def report(results: dict[str, Result], args: argparse.Namespace) -> dict[str, Any]:
    """Print the table and the ratios; the JSON document."""
    labels = {"postgresql": "PostgreSQL", "sqlite": "SQLite"}
    print()
    print("| store | replicas | seconds | runtimes/s | operations | runtimes by member |")
    print("|---|---|---|---|---|---|")
    for result in results.values():
        members = ", ".join(f"{n} {c}" for n, c in result.runtimes_by_member.items())
        print(
            f"| {labels[result.engine]} | {result.replicas} | {result.seconds:.1f} "
            f"| {result.rate:.1f} | {result.operations} | {members} |"
        )
    pg1, pg2, lite = results["postgresql-1"], results["postgresql-2"], results["sqlite-1"]
    scale, engine = pg2.rate / pg1.rate, lite.rate / pg1.rate
    print()
    print(f"two replicas / one, PostgreSQL: {scale:.2f}x (aim: at least 1.7x)")
    print(f"SQLite / PostgreSQL, one replica: {engine:.2f}x (aim: at most 1.3x)")
    return {
        "settings": {
            "runtimes": args.runtimes,
            "modules": args.modules,
            "latency_s": args.latency,
            "workers": args.workers,
            "lease_s": DEFAULT_LEASE.total_seconds(),
            "cpus": os.cpu_count(),
        },
        "results": {name: asdict(result) for name, result in results.items()},
        "two_vs_one_replicas_postgresql": scale,
        "sqlite_vs_postgresql_one_replica": engine,
    }


def main(argv: list[str] | None = None) -> int:
    """The benchmark (or, with the hidden ``--replica``, one replica)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runtimes", type=int, default=400)
    parser.add_argument("--modules", type=int, default=3, help="modules in the fleet (3)")
    parser.add_argument("--latency", type=float, default=0.005, help="seconds per API call")
    parser.add_argument("--workers", type=int, default=16, help="reconciles at once per replica")
    parser.add_argument(
        "--postgres",
        default=os.environ.get("RECONCILER_TEST_POSTGRES", ""),
        help="a PostgreSQL URL (default: RECONCILER_TEST_POSTGRES)",
    )
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench" / "out")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per configuration")
    for hidden in ("--member", "--state", "--root", "--remote", "--commit"):
        parser.add_argument(hidden, help=argparse.SUPPRESS)
    parser.add_argument("--replica", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.replica:
        return replica_main(args)
    if not args.postgres:
        print(
            "replica_bench: no PostgreSQL URL: pass --postgres URL or set "
            "RECONCILER_TEST_POSTGRES (bash tests/pg_server.sh --install python "
            "bench/replica_bench.py)",
            file=sys.stderr,
        )
        return 2
    work = Path(args.workdir) / "replicas"
    work.mkdir(parents=True, exist_ok=True)
    fleet = make_fleet(work, args.runtimes, args.modules)
    print(
        f"{args.runtimes} runtimes x {args.modules} modules, {args.latency * 1000:g} ms per API "
        f"call, {args.workers} workers per replica, {os.cpu_count()} cores"
    )
    stores = Stores(args.postgres)
    results: dict[str, Result] = {}
    try:
        for engine, replicas in (("postgresql", 1), ("postgresql", 2), ("sqlite", 1)):
            result = run_config(args, fleet, stores, engine, replicas)
            results[f"{engine}-{replicas}"] = result
            print(
                f"  {engine}, {replicas} replica(s): {result.seconds:.1f} s, "
                f"{result.rate:.1f} runtimes/s (load average before: "
                f"{result.load_average_before:.1f})",
                flush=True,
            )
    finally:
        stores.drop()
    document = report(results, args)
    out = Path(args.workdir) / "replicas.json"
    out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    print(f"written: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
