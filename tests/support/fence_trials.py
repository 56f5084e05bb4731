"""Pause trials of fencing, in real processes: a ``reconciler daemon`` (member A) works on a
one-runtime fleet on a ``--snapshot`` cluster and a shared state store (a SQLite file or a
PostgreSQL schema) and is stopped (SIGSTOP) in the middle of its operation; a second daemon (member
B) takes the runtime over once A's lease lapsed and finishes the operation; then A is resumed
(SIGCONT). Whatever A checked before its pause, nothing it writes afterwards under its old epoch may
land in the store or the snapshot file.

Where A stops:

- ``save``: right before the statement of an operation save, after the engine's own fence
  check passed (A's store is wrapped by the plugin below);
- ``flush``: right before the snapshot file's save of writes the fence let through before;
- ``external``: anywhere: the trial sends SIGSTOP after a random delay once A's operation runs.

In ``save`` and ``flush`` A holds at the point (deterministic) and the trial stops it there with
SIGSTOP, starts B, waits until the store shows B's operation finished (the takeover observed
through the store, no wall-clock wait), resumes A with SIGCONT, and waits until A reports the
outcome of the write it held before (its worker then holds for good, so that nothing else A does
on the runtime is mixed in).

A spy, loaded into both daemons with the plugin (a ``reconciler.steps`` entry point on
PYTHONPATH), logs every write to the store and to the snapshot file, every fence, with the
epoch of the run that made it, the thread, and times of CLOCK_MONOTONIC (one clock for every
process on the host). A write **by a fenced replica** is one of A that succeeded, made by a
run of an epoch that B had fenced before the write began. Used by
tests/processes/test_fencing_processes.py and bench/fence_bench.py.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from reconciler.operations.model import Operation, OperationState
from reconciler.operations.store import StateStore, open_store
from tests.support.fleet_generator import generate_fleet
from tests.support.step_plugins import install_step_package, write_step_package

LEASE = "2s"
MODULE = "fence_probe"

#: The plugin: a step that arms the pause, and the spy, installed when the engine loads it.
PLUGIN = r"""
import json, os, signal, threading, time
from pathlib import Path

from reconciler.cluster.snapshot import SnapshotFileCluster
from reconciler.operations import engine as engine_module
from reconciler.operations.model import OperationType, StepResult
from reconciler.operations.steps import Step
from reconciler.operations.store import SqliteStore
from reconciler.operations.store.postgres import PostgresStore

LOG = os.environ.get("FENCE_LOG", "")
PAUSE_AT = os.environ.get("FENCE_PAUSE_AT", "")
_local = threading.local()
_lock = threading.Lock()
_armed = {"done": False}


def log(event, **fields):
    if not LOG:
        return
    line = json.dumps({"event": event, "pid": os.getpid(), "thread": threading.get_ident(),
                       "epoch": getattr(_local, "epoch", None), **fields})
    with _lock, open(LOG, "a") as file:
        file.write(line + "\n")


def hold(name):
    # wait here until the trial creates the file name (it stops and resumes the process meanwhile)
    release = Path(os.environ["FENCE_PAUSE_DIR"], name)
    while not release.exists():
        time.sleep(0.01)


def pause(where):
    log("paused", where=where, t=time.monotonic())
    hold("release")
    log("resumed", where=where, t=time.monotonic())


def spied(cls, name):
    original = getattr(cls, name)

    def call(self, *args, **kwargs):
        start = time.monotonic()
        try:
            result = original(self, *args, **kwargs)
        except Exception as error:
            log("write", what=name, ok=False, error=type(error).__name__, start=start,
                end=time.monotonic())
            raise
        log("write", what=name, ok=True, result=str(result), start=start, end=time.monotonic())
        return result

    setattr(cls, name, call)


def spied_flush():
    original = SnapshotFileCluster.flush

    def stamp(path):
        try:
            status = path.stat()
        except FileNotFoundError:
            return None
        return (status.st_ino, status.st_mtime_ns, status.st_size)

    def flush(self, *args, **kwargs):
        if self.writes == self._saved:
            return original(self, *args, **kwargs)
        start, before = time.monotonic(), stamp(self.path)
        try:
            original(self, *args, **kwargs)
        except Exception as error:
            log("write", what="flush", ok=False, error=type(error).__name__, start=start,
                end=time.monotonic())
            raise
        log("write", what="flush", ok=stamp(self.path) != before, start=start,
            end=time.monotonic())

    SnapshotFileCluster.flush = flush


def spied_fence(cls):
    original = cls.fence

    def fence(self, name, epoch, lapsed_before):
        start = time.monotonic()
        done = original(self, name, epoch, lapsed_before)
        log("fence", member=name, fenced_epoch=epoch, ok=done, start=start, end=time.monotonic())
        return done

    cls.fence = fence


def spied_engine():
    original = engine_module.Engine.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        token = kwargs.get("token")
        _local.epoch = token.epoch if token is not None else None

    engine_module.Engine.__init__ = init


if not getattr(SqliteStore, "_fence_spied", False):
    for store in (SqliteStore, PostgresStore):
        for method in ("save", "claim", "put_runtime", "forget_runtime", "record_access"):
            spied(store, method)
        if hasattr(store, "fence"):
            spied_fence(store)
        store._fence_spied = True
    spied_flush()
    spied_engine()


class FenceProbe(Step):
    name = "Fence_Probe"
    domain = "test"
    description = "Arms a pause of its own process before the next write."
    operations = (OperationType.PROVISION, OperationType.UPDATE)
    stage = "apply"
    after = "Apply_Modules"

    def run(self, operation, context):
        log("probe", t=time.monotonic())
        if not PAUSE_AT or PAUSE_AT == "external" or _armed["done"]:
            return StepResult("not armed")
        _armed["done"] = True
        probe = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fence-probe"}}
        context.cluster.apply(probe, field_manager="fence-probe")  # the fence check passes
        if PAUSE_AT == "flush":
            self._before_flush(context.cluster.cluster)
        else:
            self._before_save(context.store)
        return StepResult("armed")

    @staticmethod
    def _before_flush(cluster):
        original = cluster.flush

        def flush(*args, **kwargs):
            cluster.flush = original
            pause("flush")
            outcome(lambda: original(*args, **kwargs))

        cluster.flush = flush

    @staticmethod
    def _before_save(store):
        original = store.save

        def save(*args, **kwargs):
            del store.save
            pause("save")
            outcome(lambda: original(*args, **kwargs))

        store.save = save


def outcome(write):
    # make the write held before and report it, then hold this worker for good (the daemon runs
    # no other reconcile of the runtime meanwhile: nothing else is mixed in)
    try:
        write()
    except Exception as error:
        log("outcome", written=False, error=type(error).__name__, message=str(error))
        hold("never")
    log("outcome", written=True)
    hold("never")
"""


def install_plugin(folder: Path) -> Path:
    """The plugin installed with pip into ``folder / "site"`` (to put on PYTHONPATH)."""
    package = write_step_package(folder, MODULE, PLUGIN, "FenceProbe")
    site = folder / "site"
    site.mkdir(parents=True, exist_ok=True)
    # imported at start-up from PYTHONPATH: the spy is in place before the first fence
    (site / "sitecustomize.py").write_text(
        f"import os\nif os.environ.get('FENCE_LOG'):\n    import {MODULE}\n"
    )
    install_step_package(package, site)
    return site


def make_remote(folder: Path) -> Path:
    """A bare git repository of a one-runtime fleet."""
    work = folder / "work"
    generate_fleet(work, runtimes=1, modules=2, versions=1, seed=7)
    git = ["git", "-c", "user.email=t@example.io", "-c", "user.name=t"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)
    subprocess.run([*git, "-C", str(work), "add", "-A"], check=True)
    subprocess.run([*git, "-C", str(work), "commit", "-qm", "fleet"], check=True)
    remote = folder / "remote.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(remote)], check=True)
    return remote


def until(condition: Callable[[], bool], seconds: float, what: str) -> None:
    """Look again until ``condition`` holds (the daemons work in other processes)."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"not in {seconds:.0f}s: {what}"
        time.sleep(0.05)


def _stopped(pid: int) -> bool:
    """Whether process ``pid`` is stopped (state T in /proc)."""
    status = Path(f"/proc/{pid}/stat").read_text()
    return status.rsplit(")", 1)[1].split()[0] == "T"


def events(path: Path) -> list[dict[str, Any]]:
    """The spy's log of one daemon."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@dataclass
class Findings:
    """What one trial saw."""

    point: str
    #: Writes of A that succeeded under an epoch B had fenced before they began.
    fenced_store_writes: list[dict[str, Any]] = field(default_factory=list)
    fenced_file_writes: list[dict[str, Any]] = field(default_factory=list)
    #: A's writes after its pause that the fence refused (by kind of error).
    refused: list[str] = field(default_factory=list)
    #: In ``save``/``flush``: the outcome A reported for the write it was paused before.
    outcome: dict[str, Any] | None = None
    #: Whether B's finished operation and B's snapshot file were left as B left them.
    store_kept: bool = True
    file_kept: bool = True


@dataclass
class Trial:
    """One pause trial (see the module docstring) in ``folder``."""

    folder: Path
    remote: Path
    plugins: Path
    state_url: str
    point: str
    seed: int = 0
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    logs: list[IO[bytes]] = field(default_factory=list)

    @property
    def clusters(self) -> Path:
        return self.folder / "clusters"

    def spy(self, member: str) -> Path:
        return self.folder / f"{member}.jsonl"

    def start(self, member: str, pause_at: str = "") -> subprocess.Popen[bytes]:
        command = [sys.executable, "-m", "reconciler", "daemon", "--repo", str(self.remote)]
        command += [
            "--snapshot",
            f"{self.clusters}/",
            "--snapshot-create",
            "--state",
            self.state_url,
        ]
        command += ["--member", member, "--lease", LEASE, "--interval", "1s"]
        command += ["--workers", "2", "--listen", "127.0.0.1:0"]
        command += ["--cache-dir", str(self.folder / f"cache-{member}")]
        inherited = [os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []
        path = os.pathsep.join([str(self.plugins), *inherited])
        env = {**os.environ, "PYTHONPATH": path, "FENCE_LOG": str(self.spy(member))}
        env["FENCE_PAUSE_AT"], env["FENCE_PAUSE_DIR"] = pause_at, str(self.folder)
        log = (self.folder / f"{member}.log").open("wb")
        self.logs.append(log)
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        self.processes[member] = process
        return process

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
            process.wait(timeout=30)
        for log in self.logs:
            log.close()

    def _store(self) -> StateStore:
        return open_store(self.state_url)

    def _latest(self) -> Operation | None:
        store = self._store()
        try:
            found = store.operations(limit=1)
        finally:
            close = getattr(store, "close", None)
            if close is not None:
                close()
        return found[0] if found else None

    def _finished_by(self, member: str) -> bool:
        latest = self._latest()
        return (
            latest is not None
            and latest.owner == member
            and latest.state is OperationState.SUCCEEDED
        )

    def _seen(self, member: str, event: str, since: int = 0) -> bool:
        return any(e["event"] == event for e in events(self.spy(member))[since:])

    def run(self) -> Findings:
        """Run the trial; the findings (the daemons are killed at the end)."""
        try:
            return self._run()
        finally:
            self.stop()

    def _run(self) -> Findings:
        a = self.start("a", self.point)
        if self.point == "external":
            until(lambda: self._seen("a", "probe"), 120, "member a runs its operation")
            time.sleep(random.Random(self.seed).uniform(0.0, 0.05))  # lands anywhere in the rest
            self._stop_outside_locks(a)
        else:
            until(lambda: self._seen("a", "paused"), 120, "member a reaches its pause point")
            a.send_signal(signal.SIGSTOP)
            until(lambda: _stopped(a.pid), 10, "member a stopped")
        self.start("b")
        until(lambda: self._finished_by("b"), 120, "member b finishes the operation")
        kept_operation, kept_file = self._latest(), self._file()
        mark = len(events(self.spy("a")))
        (self.folder / "release").touch()
        a.send_signal(signal.SIGCONT)
        if self.point == "external":
            until(lambda: self._resumed_and_settled(mark), 60, "member a goes on")
        else:
            until(lambda: self._seen("a", "outcome", mark), 60, "member a's paused write")
        self._stop_outside_locks(a)  # the store is read next: A must not hold its write lock
        findings = self._findings()
        if self.point != "external":
            findings.store_kept = self._latest() == kept_operation
            findings.file_kept = self._file() == kept_file
        return findings

    def _stop_outside_locks(self, process: subprocess.Popen[bytes]) -> None:
        """SIGSTOP ``process``, not while it holds a lock the other member would wait for (a
        database transaction, a snapshot file's lock): stopped inside one, it is let go on a
        moment and stopped again. A paused replica holding a lock stalls the others until it
        resumes; that is a pause of the fleet, not a write of the fenced one, and no trial of
        this bench."""
        for _ in range(200):
            process.send_signal(signal.SIGSTOP)
            if not self._locked():
                return
            process.send_signal(signal.SIGCONT)
            time.sleep(0.005)
        raise AssertionError("member a always held a lock when stopped")

    def _locked(self) -> bool:
        if self.clusters.exists():  # the snapshots' lock (reconciler.cluster.snapshot.file_lock)
            handle = os.open(self.clusters, os.O_RDONLY)
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            finally:
                os.close(handle)
        return self._in_transaction()

    def _in_transaction(self) -> bool:
        if self.state_url.startswith("sqlite:///"):
            db = sqlite3.connect(
                self.state_url.removeprefix("sqlite:///"), timeout=0, isolation_level=None
            )
            try:
                db.execute("BEGIN IMMEDIATE")
                db.execute("ROLLBACK")
            except sqlite3.OperationalError:
                return True
            finally:
                db.close()
            return False
        import psycopg

        with psycopg.connect(self.state_url, autocommit=True) as pg:
            row = pg.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND state IN ('active', 'idle in transaction')"
            ).fetchone()
        return row is not None and int(row[0]) > 0

    def _resumed_and_settled(self, mark: int) -> bool:
        """A's run that was paused ended (it logs its next write or refusal), or A began a
        new epoch's run: a heartbeat in a new epoch shows in the store."""
        later = events(self.spy("a"))[mark:]
        return any(e["event"] == "write" for e in later) or self._epoch("a") > 1

    def _epoch(self, member: str) -> int:
        store = self._store()
        try:
            return next((m.epoch for m in store.members() if m.name == member), 0)
        finally:
            close = getattr(store, "close", None)
            if close is not None:
                close()

    def _file(self) -> bytes:
        files = sorted(self.clusters.glob("*.yaml"))
        return b"".join(f.read_bytes() for f in files)

    def _findings(self) -> Findings:
        fences = [e for e in events(self.spy("b")) if e["event"] == "fence" and e["ok"]]
        fenced_at = {(e["member"], e["fenced_epoch"]): e["end"] for e in fences}
        findings = Findings(self.point)
        for entry in events(self.spy("a")):
            if entry["event"] == "outcome":
                findings.outcome = entry
            if entry["event"] != "write":
                continue
            since = fenced_at.get(("a", entry["epoch"]))
            after_fence = since is not None and entry["start"] > since
            if after_fence and entry["ok"]:
                kind = findings.fenced_file_writes if entry["what"] == "flush" else None
                (kind if kind is not None else findings.fenced_store_writes).append(entry)
            elif after_fence:
                findings.refused.append(f"{entry['what']}: {entry['error']}")
        return findings


def new_state_url(folder: Path, postgres: str) -> str:
    """A state store for one trial: a SQLite file, or a fresh schema of ``postgres``."""
    if not postgres:
        return f"sqlite:///{folder / 'state.db'}"
    import psycopg

    from tests.support.store_backends import with_schema

    schema = f"rc_fence_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres, autocommit=True) as db:
        db.execute(f"CREATE SCHEMA {schema}".encode())
    return with_schema(postgres, schema)
