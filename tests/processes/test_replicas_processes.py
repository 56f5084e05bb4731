"""Three ``reconciler daemon`` processes on one PostgreSQL database: a fleet of 300 runtimes on
``--snapshot`` clusters converges; each runtime is worked on by one member only, proved from the
owners the store records on each operation; after SIGKILL of one member its runtimes are taken over
by the others (at their next heartbeat after its lease, not at a resync) and converge; a member
paused (SIGSTOP) past its lease loses its runtimes, and once resumed saves nothing from its old
epoch (it comes back in a new one).

Needs the PostgreSQL server that ``.ci/run`` starts (``RECONCILER_TEST_POSTGRES``); skipped
without it, failed under CI. Slow (about a minute) because it runs real processes: the work of
300 runtimes on two cores, and a lease that must run out.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import psycopg
import pytest

from reconciler.operations.model import OperationState
from reconciler.operations.store.postgres import PostgresStore
from tests.support.fleet_generator import generate_fleet
from tests.support.store_backends import with_schema

POSTGRES = os.environ.get("RECONCILER_TEST_POSTGRES", "")
RUNTIMES = 300
LEASE = "6s"


def _until(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"not in {seconds:.0f}s: {what}"
        time.sleep(0.5)  # the daemons work in other processes: look again


class Cluster:
    """The fleet in git, a PostgreSQL schema of its own, and three daemons."""

    def __init__(self, root: Path) -> None:
        self.root = root
        work = root / "work"
        generate_fleet(work, runtimes=RUNTIMES, modules=3, versions=1, seed=5)
        git = ["git", "-c", "user.email=t@example.io", "-c", "user.name=t"]
        subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)
        subprocess.run([*git, "-C", str(work), "add", "-A"], check=True)
        subprocess.run([*git, "-C", str(work), "commit", "-qm", "fleet"], check=True)
        self.remote = root / "remote.git"
        subprocess.run(["git", "clone", "-q", "--bare", str(work), str(self.remote)], check=True)
        schema = f"rc_replicas_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(POSTGRES, autocommit=True) as db:
            db.execute(f"CREATE SCHEMA {schema}".encode())
        self.url = with_schema(POSTGRES, schema)
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.logs: list[IO[bytes]] = []

    def start(self, member: str) -> None:
        command = [sys.executable, "-m", "reconciler", "daemon", "--repo", str(self.remote)]
        command += ["--snapshot", f"{self.root / 'clusters'}/", "--snapshot-create"]
        command += ["--state", self.url]
        command += ["--member", member, "--lease", LEASE, "--interval", "2s"]
        command += ["--workers", "4", "--listen", "127.0.0.1:0"]
        command += ["--cache-dir", str(self.root / f"cache-{member}")]
        log = (self.root / f"{member}.log").open("wb")
        self.logs.append(log)
        self.processes[member] = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)

    def overlaps(self) -> list[str]:
        """Runtimes that two members worked on at once: operations of different owners whose
        spans (created to last update, as the store records them) overlap."""
        store = PostgresStore(self.url)
        try:
            spans: dict[str, list[tuple[float, float, str]]] = {}
            for o in store.operations(limit=100_000):
                if o.owner:
                    end = (o.updated or o.created).timestamp()
                    spans.setdefault(o.runtime, []).append((o.created.timestamp(), end, o.owner))
        finally:
            store.close()
        found = []
        for runtime, worked in spans.items():
            worked.sort()
            for (_, end, owner), (start, _, other) in itertools.pairwise(worked):
                if other != owner and start < end:
                    found.append(f"{runtime}: {owner} until {end:.1f}, {other} from {start:.1f}")
        return found

    def epoch(self, member: str) -> int:
        """``member``'s epoch in the store (0 when it is not there)."""
        store = PostgresStore(self.url)
        try:
            return next((m.epoch for m in store.members() if m.name == member), 0)
        finally:
            store.close()

    def member_started(self, member: str) -> float:
        """When ``member``'s current epoch began (a Unix time)."""
        store = PostgresStore(self.url)
        try:
            return next(m.started.timestamp() for m in store.members() if m.name == member)
        finally:
            store.close()

    def saved_by(self, member: str, start: float, end: float) -> list[str]:
        """Operations ``member`` saved between ``start`` and ``end``."""
        store = PostgresStore(self.url)
        try:
            return [
                f"{o.runtime} {o.id}"
                for o in store.operations(limit=100_000)
                if o.owner == member
                and o.updated is not None
                and start < o.updated.timestamp() < end
            ]
        finally:
            store.close()

    def current_owners(self) -> dict[str, str]:
        """Runtime -> the member that claimed its newest operation, as the store records it."""
        store = PostgresStore(self.url)
        try:
            found: dict[str, str] = {}
            for operation in store.operations(limit=100_000):  # newest first
                if operation.owner and operation.runtime not in found:
                    found[operation.runtime] = operation.owner
            return found
        finally:
            store.close()

    def converged(self, since: float = 0.0) -> set[str]:
        """Runtimes with an operation that succeeded after ``since`` (a Unix time)."""
        store = PostgresStore(self.url)
        try:
            return {
                o.runtime
                for o in store.operations(limit=100_000)
                if o.state is OperationState.SUCCEEDED
                and o.updated is not None
                and o.updated.timestamp() >= since
            }
        finally:
            store.close()

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        for log in self.logs:
            log.close()


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[Cluster]:
    if not POSTGRES:
        message = "RECONCILER_TEST_POSTGRES is not set (bash tests/pg_server.sh pytest ...)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    made = Cluster(tmp_path)
    try:
        yield made
    finally:
        made.stop()


def test_three_daemons_share_the_fleet_and_take_over_a_dead_ones_runtimes(
    replicas: Cluster,
) -> None:
    for member in ("d1", "d2", "d3"):
        replicas.start(member)
    everyone = {f"rt-{index:05d}" for index in range(RUNTIMES)}
    begun = time.time()

    _until(lambda: replicas.converged() >= everyone, 300, "every runtime converged")
    _until(lambda: len(replicas.current_owners()) == RUNTIMES, 60, "every runtime owned")
    owners = replicas.current_owners()

    assert replicas.overlaps() == []  # never two members at once (ownership moves as they join)
    shares = {m: sum(1 for owner in owners.values() if owner == m) for m in ("d1", "d2", "d3")}
    print(f"shares of {RUNTIMES} runtimes: {shares}")
    assert all(share > 0 for share in shares.values())

    theirs = {runtime for runtime, owner in owners.items() if owner == "d3"}
    replicas.processes["d3"].send_signal(signal.SIGKILL)
    killed = time.time()
    print(f"converged in {killed - begun:.1f}s")

    _until(
        lambda: replicas.converged(since=killed) >= theirs,
        300,
        "d3's runtimes converged under the others",
    )
    print(f"d3's runtimes taken over in {time.time() - killed:.1f}s")
    assert replicas.overlaps() == []
    after = replicas.current_owners()
    assert all(after[runtime] in {"d1", "d2"} for runtime in theirs)

    # d2 paused past its lease: d1 takes its runtimes; resumed, d2 writes nothing it lost
    paused = {runtime for runtime, owner in after.items() if owner == "d2"}
    replicas.processes["d2"].send_signal(signal.SIGSTOP)
    stopped = time.time()
    _until(
        lambda: replicas.converged(since=stopped) >= paused,
        300,
        "d2's runtimes converged under d1 while d2 was stopped",
    )
    print(f"d2's runtimes taken over in {time.time() - stopped:.1f}s")
    replicas.processes["d2"].send_signal(signal.SIGCONT)
    resumed = time.time()
    _until(lambda: replicas.epoch("d2") == 2, 60, "d2 beating again, in a new epoch")
    rejoined = replicas.member_started("d2")
    print(f"d2 back in a new epoch {time.time() - resumed:.1f}s after it resumed")

    assert replicas.overlaps() == []
    assert replicas.saved_by("d2", stopped, rejoined) == []  # nothing while it was fenced
