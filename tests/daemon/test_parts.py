"""The daemon's parts built on their own, each from the collaborators it takes: the
worker pool with a ``run`` callable, the rollouts with a real SQLite store and membership,
``/status`` with a store, a watches part and a source state, and the ticks with their jobs on a
paused scheduler; no daemon, no git server, no thread but the pool's and the scheduler's.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from apscheduler.schedulers.background import BackgroundScheduler  # type: ignore[import-untyped]

from reconciler.core.head import Head
from reconciler.core.model import ConfigRepo, Settings
from reconciler.core.notifications import NoNotifier, Notification
from reconciler.core.rollouts import RolloutState
from reconciler.core.status import ModuleState, Reason
from reconciler.daemon.channels import Channels
from reconciler.daemon.logs import Repeats
from reconciler.daemon.membership import Membership
from reconciler.daemon.metrics import Metrics
from reconciler.daemon.rollouts import Rollouts
from reconciler.daemon.scheduler import Intervals, Jobs, Ticks
from reconciler.daemon.status import Status
from reconciler.daemon.watches import Watches
from reconciler.daemon.workers import Workers
from reconciler.errors import ReconcilerError, SourceError, TransientError
from reconciler.operations.model import Operation, RuntimeRecord
from reconciler.operations.store import SqliteStore
from reconciler.source.git import RemoteSource
from reconciler.source.loader import ReadOptions, load_repo
from tests.support.fleet_history import (
    CANARY_SETTINGS,
    channel_yaml,
    default_yaml,
    manifest_yaml,
    module_yaml,
    tiered_runtime_yaml,
    write_tree,
)

T0 = datetime(2026, 12, 8, 1, 0, tzinfo=UTC)
OLD, NEW = Head("1" * 40), Head("2" * 40)
#: The runtimes the new commit changes (widget 1.0.0 to 2.0.0): all three.
CHANGED = ("dev", "prod-1", "prod-2")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    made = SqliteStore(tmp_path / "state.db")
    try:
        yield made
    finally:
        made.close()


# -- the worker pool --------------------------------------------------------------------------


@dataclass
class Runs:
    """The ``run`` a pool is given: each call noted; ``slow`` waits until released, ``flaky``
    fails as a cluster away does."""

    calls: list[str] = field(default_factory=list)
    started: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    def __call__(self, runtime: str) -> Operation | None:
        self.calls.append(runtime)
        if runtime == "slow" and len(self.calls) == 1:
            self.started.set()
            self.release.wait(30)
        if runtime == "flaky":
            raise TransientError("cluster flaky is away", 30)
        return None


def _pool(store: SqliteStore, runs: Runs, retries: list[tuple[str, datetime]]) -> Workers:
    return Workers(
        runs,
        2,
        store=store,
        clock=lambda: T0,
        metrics=Metrics(),
        repeats=Repeats(),
        retry=lambda runtime, when: retries.append((runtime, when)),
        stopping=threading.Event(),
    )


def test_the_pool_runs_a_runtime_once_at_a_time_and_once_more_for_a_newer_commit(
    store: SqliteStore,
) -> None:
    runs, retries = Runs(), list[tuple[str, datetime]]()
    pool = _pool(store, runs, retries)
    try:
        first = pool.submit("slow")
        assert runs.started.wait(30)
        assert pool.submit("slow", newer_commit=True) is first  # the run under way
        runs.release.set()
        pool.wait_idle()
    finally:
        pool.close()

    assert runs.calls == ["slow", "slow"]  # and once more, on the newer commit
    assert retries == []


def test_the_pool_keeps_a_failed_runs_error_and_asks_for_its_retry(store: SqliteStore) -> None:
    runs, retries = Runs(), list[tuple[str, datetime]]()
    pool = _pool(store, runs, retries)
    try:
        pool.submit("flaky").result()
    finally:
        pool.close()

    assert str(pool.errors["flaky"]) == "cluster flaky is away"
    assert retries == [("flaky", T0 + timedelta(seconds=30))]


def test_a_stopping_pool_starts_no_run(store: SqliteStore) -> None:
    runs, retries = Runs(), list[tuple[str, datetime]]()
    pool = _pool(store, runs, retries)
    pool.stopping.set()
    try:
        assert pool.submit("a").cancelled()
    finally:
        pool.close()
    assert runs.calls == []


# -- the rollouts -----------------------------------------------------------------------------


def _repo(root: Path, widget: str) -> ConfigRepo:
    """A fleet of three runtimes (``dev`` the canary) on widget ``widget``, read from files."""
    files: dict[str, str | None] = {
        "fleet/reconciler.yaml": CANARY_SETTINGS,
        "fleet/modules/widget/module.yaml": module_yaml("widget"),
        "channels/regular.yaml": channel_yaml("regular", {"widget": widget}),
        "fleet/runtimes/dev.yaml": tiered_runtime_yaml("dev", "dev"),
        "fleet/runtimes/prod-1.yaml": tiered_runtime_yaml("prod-1", "prod"),
        "fleet/runtimes/prod-2.yaml": tiered_runtime_yaml("prod-2", "prod"),
    }
    for version in ("1.0.0", "2.0.0"):
        files[f"fleet/modules/widget/{version}/manifest.yaml"] = manifest_yaml("widget", version)
        files[f"fleet/modules/widget/{version}/default.yaml"] = default_yaml("widget")
    write_tree(root, files)
    repo = load_repo(root / "fleet").repo
    assert repo is not None
    return repo


@dataclass
class Told:
    """A notifier that keeps what it is told."""

    told: list[Notification] = field(default_factory=list)

    def notify(self, notification: Notification) -> None:
        self.told.append(notification)


@dataclass
class Fleet:
    old: ConfigRepo
    new: ConfigRepo
    store: SqliteStore
    told: Told = field(default_factory=Told)
    reruns: list[str] = field(default_factory=list)
    loaded: list[Head] = field(default_factory=list)

    def rollouts(self, readable: bool = True) -> Rollouts:
        """A replica's rollouts on the store: it reads the old commit only when ``readable``."""
        membership = Membership(self.store, "replica-a", lambda: T0, monotonic=lambda: 0.0)
        membership.beat()

        def load(head: Head) -> ConfigRepo:
            self.loaded.append(head)
            if not readable:
                raise SourceError(f"commit {head.shown}: the remote is away")
            return self.old

        return Rollouts(
            self.store,
            membership,
            lambda: T0,
            Metrics(),
            self.told,
            self.reruns.append,
            load=load,
            lock=threading.Lock(),
        )


@pytest.fixture
def fleet(tmp_path: Path, store: SqliteStore) -> Fleet:
    return Fleet(_repo(tmp_path / "old", "1.0.0"), _repo(tmp_path / "new", "2.0.0"), store)


def test_rollouts_start_waves_and_hold_the_later_waves_on_the_commit_before(
    fleet: Fleet,
) -> None:
    rollouts = fleet.rollouts()

    rollouts.begin(fleet.old, OLD, fleet.new, NEW, CHANGED)

    saved = fleet.store.latest_rollout()
    assert saved is not None
    assert (saved.commit, saved.state) == (NEW.text, RolloutState.PROGRESSING)
    assert [(w.name, sorted(w.runtimes)) for w in saved.waves] == [
        ("canary", ["dev"]),
        ("everyone", ["prod-1", "prod-2"]),
    ]
    assert [str(n.kind) for n in fleet.told.told] == ["rollout.scheduled", "rollout.wave_started"]
    assert rollouts.desired("dev", fleet.new, NEW) == (fleet.new, NEW)
    assert rollouts.desired("prod-1", fleet.new, NEW) == (fleet.old, OLD)  # remembered
    assert fleet.loaded == []


def test_a_replica_reads_the_base_a_held_back_runtime_keeps_and_never_lets_it_through(
    fleet: Fleet,
) -> None:
    fleet.rollouts().begin(fleet.old, OLD, fleet.new, NEW, CHANGED)
    restarted, unreadable = fleet.rollouts(), fleet.rollouts(readable=False)

    assert restarted.desired("prod-2", fleet.new, NEW) == (fleet.old, OLD)
    with pytest.raises(TransientError, match="held back by a rollout on commit 111111111111"):
        unreadable.desired("prod-2", fleet.new, NEW)
    assert fleet.loaded == [OLD, OLD]


# -- /status ----------------------------------------------------------------------------------


@dataclass(slots=True)
class Known:
    """What the daemon knows of its source (a :class:`~reconciler.daemon.status.SourceView`)."""

    commit: Head | None = None
    repo: ConfigRepo | None = None
    last_poll: datetime | None = None
    last_success: datetime | None = None
    error: str = ""
    refused: None = None
    held: None = None
    waiting: None = None


def test_status_reports_the_source_members_and_runtimes_from_its_collaborators(
    tmp_path: Path, store: SqliteStore
) -> None:
    url = "https://git.example.invalid/fleet.git"
    source = RemoteSource(url, "main", "fleet", tmp_path / "cache")
    membership = Membership(store, "replica-a", lambda: T0, monotonic=lambda: 0.0)
    membership.beat()
    store.put_runtime(RuntimeRecord("a", ModuleState.READY, Reason.READY, "", OLD, T0))
    errors: dict[str, ReconcilerError] = {"a": TransientError("cluster a is away", 30)}
    watches = Watches(Settings, Metrics(), Repeats(), lambda _runtime: None)
    known = Known(commit=OLD, last_poll=T0, last_success=T0)

    def second_source(url: str, ref: str, path: str) -> RemoteSource:
        return RemoteSource(url, ref, path, tmp_path / "channels")

    status = Status(
        store,
        membership,
        lambda: T0,
        source=source,
        state=lambda: known,
        ready=lambda: True,
        channels=Channels("fleet", ReadOptions(), second_source, lambda: T0),
        errors=errors,
        watches=watches,
        notifier=NoNotifier(),
    )

    document = status.document()

    assert (document["source"]["url"], document["source"]["path"]) == (url, "fleet")
    assert document["source"]["commit"] == OLD.text
    assert document["source"]["lastPoll"] == T0.isoformat()
    assert document["channels"] is None  # the channels come from the config repo
    assert (document["ready"], document["member"]) == (True, "replica-a")
    assert [(m["name"], m["live"]) for m in document["members"]] == [("replica-a", True)]
    (runtime,) = document["runtimes"]
    assert (runtime["error"], runtime["owner"]) == ("cluster a is away", "replica-a")
    assert runtime["drift"] == []
    assert runtime["watches"] == {"narrowed": [], "refused": []}
    assert (document["notifications"], document["rollouts"]) == (None, [])


# -- the ticks --------------------------------------------------------------------------------


def test_the_ticks_schedule_the_jobs_they_are_given_at_the_intervals_in_force() -> None:
    ran: list[str] = []
    jobs = Jobs(
        poll=lambda: ran.append("poll"),
        resync=lambda: ran.append("resync"),
        heartbeat=lambda: ran.append("heartbeat"),
        rollouts=lambda: ran.append("rollouts"),
        prune=lambda: ran.append("prune"),
        submit=ran.append,
    )
    intervals = Intervals(timedelta(seconds=30), timedelta(minutes=5))
    ticks = Ticks(jobs, lambda: intervals, timedelta(seconds=60), lambda: T0, Repeats())
    ticks.retry("a", T0)  # no scheduler yet: the tests drive the ticks
    scheduler = BackgroundScheduler()
    ticks.schedule(scheduler)
    scheduler.start(paused=True)
    try:
        ticks.retry("a", T0 + timedelta(minutes=1))
        every = {job.id: job.trigger for job in scheduler.get_jobs()}
        intervals = Intervals(timedelta(minutes=2), timedelta(hours=1))  # a commit moved them
        ticks.reschedule()
        moved = {job.id: job.trigger for job in scheduler.get_jobs()}
    finally:
        scheduler.shutdown(wait=False)

    assert sorted(every) == ["heartbeat", "poll", "prune", "resync", "retry:a", "rollouts"]
    assert (every["poll"].interval, every["resync"].interval) == (
        timedelta(seconds=30),
        timedelta(minutes=5),
    )
    assert every["heartbeat"].interval == timedelta(seconds=20)  # a third of the lease
    assert (moved["poll"].interval, moved["resync"].interval) == (
        timedelta(minutes=2),
        timedelta(hours=1),
    )
    assert ticks.scheduled == intervals
    assert ran == []  # paused: nothing ran
