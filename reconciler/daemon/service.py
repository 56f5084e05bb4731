"""The daemon: follow a git ref, keep every runtime converged, report health and metrics.

:class:`Daemon` holds the wiring and the ticks tests call directly; each job lives in its own
module:

- :meth:`Daemon.poll` asks the source whether the ref moved (one ``ls-remote`` per poll for the
  whole fleet) and hands a new commit to the verdict protocol (:mod:`reconciler.daemon.commits`:
  refused, held by the deletion brake, waiting, or accepted; typed details in
  :mod:`reconciler.daemon.verdicts`). An unreachable remote changes nothing (S3). Replicas
  sharing the store move the commit in force by compare-and-set; each takes up the store's
  commit in force at each poll, before it judges anything, and before each reconcile. The
  config repo is asked first and a channels repository (``channelsFrom.git``,
  :mod:`reconciler.daemon.channels`) second, each failure reported on its own.
- :meth:`Daemon.reconcile_all` (after a commit and on the resync interval) runs each runtime's
  operation on the worker pool (:mod:`reconciler.daemon.workers`); :meth:`Daemon.heartbeat`
  keeps this replica a member (:mod:`reconciler.daemon.membership`) and runs the runtimes it
  comes to own.
- :mod:`reconciler.daemon.rollouts` rolls a changing commit out in waves (``spec.rollout``):
  started when the commit is put in force, gating each runtime's reconcile, moved on by its
  own job.
- :mod:`reconciler.daemon.scheduler` puts the ticks on apscheduler; :mod:`reconciler.daemon.status`
  builds ``/status``; ``reconciler.daemon.http`` serves the endpoints.

Callers: ``reconciler daemon``, tests, bench.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from apscheduler.schedulers.background import BackgroundScheduler  # type: ignore[import-untyped]

from reconciler.core.fleetdiff import FleetDiffer
from reconciler.core.head import Head
from reconciler.core.model import ConfigRepo, Settings
from reconciler.core.notifications import NoNotifier, Notifier
from reconciler.core.redaction import mask
from reconciler.core.templates import RenderCache, TemplateRenderer
from reconciler.core.unchanged import UnchangedSince
from reconciler.daemon.channels import Channels
from reconciler.daemon.commits import CommitGate
from reconciler.daemon.logs import Repeats, cause, failure_level, shown, source_failure
from reconciler.daemon.membership import DEFAULT_LEASE, Membership
from reconciler.daemon.metrics import Metrics
from reconciler.daemon.rollouts import Rollouts
from reconciler.daemon.scheduler import (
    guarded,
    poll_now,
    reschedule,
    schedule_jobs,
    start_scheduler,
)
from reconciler.daemon.status import status_document
from reconciler.daemon.verdicts import Held, Refusal, Waiting
from reconciler.daemon.watches import Watches
from reconciler.daemon.workers import Workers, run_runtime
from reconciler.errors import ReconcilerError, SourceError, TransientError
from reconciler.operations.engine import this_owner
from reconciler.operations.model import CommitRecord, CommitVerdict, Operation, Retention
from reconciler.operations.runner import Connect
from reconciler.operations.store import StateStore
from reconciler.render import default_renderer
from reconciler.source.git import Revision
from reconciler.source.loader import ReadOptions, load_repo
from reconciler.source.signatures import TrustedKeys

__all__ = [
    "Daemon",
    "DaemonOptions",
    "Intervals",
    "Source",
    "SourceState",
    "guarded",
    "poll_now",
    "schedule_jobs",
    "start_scheduler",
]

log = logging.getLogger("reconciler.daemon")


class Source(Protocol):
    """Where commits come from (:class:`reconciler.source.git.RemoteSource`)."""

    path: str

    @property
    def shown(self) -> str:
        """The source's URL without credentials."""

    def check(self) -> str:
        """The commit the followed ref points to now."""

    def revision(self, commit: str) -> Revision:
        """The tree of ``commit``."""


@dataclass(slots=True)
class SourceState:
    """What the daemon knows of its source."""

    commit: Head | None = None
    repo: ConfigRepo | None = None
    last_poll: datetime | None = None
    last_success: datetime | None = None
    error: str = ""
    refused: Refusal | None = None
    held: Held | None = None
    #: The newest commit, while reading it fails in a way that may pass (PENDING).
    waiting: Waiting | None = None
    #: The head this replica's git showed at its last poll (None before one, or when reading it
    #: failed and is to be tried again): a commit accepted before and no longer in force is
    #: taken up again (a revert) only when this replica's own git moved to it.
    seen: Head | None = None
    pending_since: datetime | None = None
    #: The commits each runtime's desired state stayed the same through (the status page shows
    #: a runtime the newer ones did not change in sync at the commit in force).
    unchanged: UnchangedSince = field(default_factory=UnchangedSince)


@dataclass(slots=True)
class DaemonOptions:
    """Settings given on the command line."""

    workers: int = 4
    #: A commit id (or prefix of one): that commit, and no other, passes the deletion brake.
    allow_deletions: str = ""
    read: ReadOptions = field(default_factory=ReadOptions)
    #: Log the traceback of an internal error (``--debug``); one line without.
    debug: bool = False
    #: ``--interval``/``--resync-interval`` when given: they override ``spec.intervals``.
    poll_interval: timedelta | None = None
    resync_interval: timedelta | None = None
    #: This replica's member name (``--member``; default host:pid) and the members' lease.
    member: str = ""
    lease: timedelta = DEFAULT_LEASE
    #: ``--keep-operations`` and ``--keep-failures``: what the pruning job keeps.
    retention: Retention = field(default_factory=Retention)
    #: ``--watch/--no-watch`` (``--no-watch``: pure polling) and ``--debounce`` (how long
    #: wakes gather before a run) when given: they override ``spec.watch`` and
    #: ``spec.intervals.debounce``.
    watch: bool | None = None
    debounce: timedelta | None = None
    #: ``--trusted-*``: the keys a commit must be signed with (None: any commit is read).
    trusted_keys: TrustedKeys | None = None


@dataclass(frozen=True, slots=True)
class Intervals:
    """How often the daemon polls its source and resyncs every runtime."""

    poll: timedelta
    resync: timedelta


class Daemon:
    """See the module docstring. Its wiring (``source``, ``store``, ``connect``,
    ``make_source``) may be replaced after it is made (tests interleave a store): its parts
    read it from here at each use."""

    def __init__(
        self,
        source: Source,
        store: StateStore,
        connect: Connect,
        clock: Callable[[], datetime],
        options: DaemonOptions | None = None,
        metrics: Metrics | None = None,
        make_source: Callable[[str, str, str], Source] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.source = source
        self.make_source = make_source or _no_second_source
        self.store = store
        self.connect = connect
        self.clock = clock
        self.options = options or DaemonOptions()
        self.metrics = metrics or Metrics()
        #: Who is told about rollouts and refused or held commits (none until configured).
        self.notifier: Notifier = NoNotifier()
        #: Renders the chart modules of each commit read (core.templates).
        self.renderer: TemplateRenderer = default_renderer()
        #: The charts of each run rendered again for what its cluster serves (a cache across
        #: runs: an unchanged cluster renders nothing twice; operations.capabilities).
        self.chart_renders = RenderCache()
        self.state = SourceState()
        #: The failure last logged of each subject: a repeated one is logged once.
        self.repeats = Repeats()
        #: Set first by :meth:`close`: waits within a run end at once, no new run or step starts.
        self.stopping = threading.Event()
        self.scheduler: BackgroundScheduler | None = None
        #: The intervals the scheduler's jobs run at (:func:`schedule_jobs`).
        self.scheduled: Intervals | None = None
        self.channels_repo = Channels(self)
        self.gate = CommitGate(self)
        self.rollouts = Rollouts(self)
        self.workers = Workers(self, self.options.workers)
        #: Event-driven reconciliation: watches on the owned runtimes' clusters.
        self.watches = Watches(self, monotonic=monotonic)
        #: The runtimes this replica owned at its last heartbeat.
        self._owned: set[str] = set()
        self._owned_lock = threading.Lock()
        self._poll_lock = threading.Lock()
        #: This replica among those sharing the store: who owns which runtime, fencing.
        self.membership = Membership(
            store,
            self.options.member or this_owner(),
            clock,
            lease=self.options.lease,
            monotonic=monotonic,
        )

    @property
    def source_lock(self) -> threading.Lock:
        """Held while the source is read (a poll, or a commit loaded for a rollout)."""
        return self._poll_lock

    @property
    def channels(self) -> Source | None:
        """The channels source of the commit in force (``channelsFrom.git``), if it has one."""
        return self.channels_repo.source

    @property
    def runtime_errors(self) -> dict[str, ReconcilerError]:
        """The error of each runtime's last reconcile here (none when it ended without one)."""
        return self.workers.errors

    @property
    def ready(self) -> bool:
        """Ready once a valid commit is loaded, and not while fenced (its heartbeat to the
        state store lapsed: it writes nothing then)."""
        member = self.membership.member
        fenced = member is not None and self.membership.fenced(member.epoch) is not None
        return self.state.repo is not None and not fenced

    @property
    def intervals(self) -> Intervals:
        """The intervals in force: the command line's when given, else ``spec.intervals`` of
        the commit in force (its defaults before one is loaded)."""
        settings = self.state.repo.settings if self.state.repo is not None else Settings()
        return Intervals(
            self.options.poll_interval or settings.poll_interval,
            self.options.resync_interval or settings.resync_interval,
        )

    # -- polling ---------------------------------------------------------------------------------

    def poll(self) -> bool:
        """One poll; True when a new commit was put in force here (accepted by this replica or,
        seen in git, by another) and the runtimes it changes were submitted."""
        with self._poll_lock:
            before, before_head = self.state.repo, self.state.commit
            try:
                return self._poll()
            finally:  # once, against the commit the poll ended on (it may follow, then accept)
                self._submit_changed(before, before_head)

    def _poll(self) -> bool:
        now = self.clock()
        self.state.last_poll = now
        # the commit in force, read before asking git: accepting another one is a compare-and-set
        # on it, so a replica whose git is behind another's never moves the fleet back
        in_force = self.store.last_accepted()
        try:
            config = self.source.check()  # the config repo first: a revert needs nothing else
        except ReconcilerError as error:
            self.state.error = str(error)
            kept = shown(self.state.commit)
            log.log(
                self.repeats.level("source", str(error), failure_level(error)),
                "source %s, keeping commit %s: %s",
                source_failure(error),
                kept,
                error,
            )
            self.metrics.poll(ok=False)
            self.follow(in_force)
            return False
        if self.repeats.recovered("source"):
            log.info("source works again")
        self.state.error = ""
        self.state.last_success = now
        self.metrics.poll(ok=True, now=now)
        head = self.channels_repo.head(config)
        seen, self.state.seen = self.state.seen, head
        if self.state.waiting is not None and self.state.waiting.commit != head.text:
            self.state.waiting = None  # git moved on (or back) from the commit that waited
        # the fleet's commit first: a new one is judged (the brake counts) from the one in force
        followed = self.follow(in_force)
        if head in (self.state.commit, in_force.commit if in_force else None):
            self.update_lag(head)
            return followed
        earlier = self.store.commit(head)
        if earlier is not None and self.gate.still_stands(head, earlier):
            self.update_lag(head)
            return False  # the last one accepted stays in force (S3)
        if earlier is not None and earlier.verdict is CommitVerdict.ACCEPTED and head == seen:
            # accepted before, no longer in force, and this replica's git has not moved: the
            # fleet went past it while this replica's fetch lags (a revert moves the git view)
            self.update_lag(head)
            return followed
        self.state.pending_since = self.state.pending_since or now
        return self.gate.consider(head, earlier, in_force)

    def follow_store(self) -> bool:
        """Take up the commit in force in the store when another replica moved it (before a
        reconcile: every replica works on the same commit); whether it changed here."""
        in_force = self.store.last_accepted()
        if in_force is None or in_force.commit == self.state.commit:
            return False
        with self._poll_lock:
            before, before_head = self.state.repo, self.state.commit
            followed = self.follow(self.store.last_accepted())
            self._submit_changed(before, before_head)
            return followed

    def follow(self, in_force: CommitRecord | None) -> bool:
        """Put ``in_force`` (the store's commit in force, accepted by this replica or another)
        in force here when it is not yet; whether it changed. The newest commit may be refused
        or held meanwhile (S3): runtimes keep being reconciled against the one in force."""
        if in_force is None or in_force.commit == self.state.commit:
            return False
        head = in_force.commit
        try:
            repo = self.load_commit(head)
        except ReconcilerError as error:
            log.warning(
                "cannot read the commit in force %s (%s): %s", head.shown, cause(error), error
            )
            return False
        self.take(head, repo)
        return True

    def load_commit(self, head: Head) -> ConfigRepo:
        """The repo of ``head``, a commit accepted before (the commit in force, or the one a
        runtime held back by a rollout keeps)."""
        revision = self.source.revision(head.config)
        options, _ = self.channels_repo.read_options(revision, head, pinned=True)
        validation = load_repo(
            self.source.path or ".", options, tree=revision.tree, renderer=self.renderer
        )
        if validation.repo is None:
            raise SourceError(f"commit {head.shown} does not load here")
        return validation.repo

    def take(self, head: Head, repo: ConfigRepo) -> None:
        """Put ``head`` in force here (its runtimes are reconciled by :meth:`_submit_changed`
        when the poll ends)."""
        log.info("commit %s in force (was %s)", head.shown, shown(self.state.commit))
        self.state.commit, self.state.repo = head, repo
        self.rollouts.remember(head, repo)
        self.update_lag(head)
        reschedule(self)

    def _submit_changed(self, previous: ConfigRepo | None, before: Head | None = None) -> None:
        """Reconcile the runtimes the commit in force changes from ``previous`` (of commit
        ``before``; every one after a start), after starting its rollout."""
        repo, head = self.state.repo, self.state.commit
        if repo is None or repo is previous:
            return
        if previous is None:
            owned = self.targets()
            with self._owned_lock:  # the next heartbeat takes none of these for newly owned
                self._owned = set(owned)
            for name in owned:
                self.submit(name, newer_commit=True)
            return
        # only the runtimes this commit changes (one fleet diff, its rollout's too); drift
        # elsewhere is the resync's job
        changed = FleetDiffer(previous, repo, self.clock()).diff()
        names = {runtime.runtime for runtime in changed.runtimes}
        if head is not None:
            self.rollouts.begin(previous, before, repo, head, names)
        if before is not None and head is not None:
            self.state.unchanged = self.state.unchanged.advance(
                before.text, head.text, repo.runtimes, names
            )
        for runtime in changed.runtimes:
            self.submit(runtime.runtime, newer_commit=True)

    def update_lag(self, head: Head) -> None:
        """How long ``head`` waits to be in force, in the metrics (0 once it is)."""
        since = self.state.pending_since
        behind = head != self.state.commit and since is not None
        seconds = (self.clock() - since).total_seconds() if behind and since else 0.0
        self.metrics.source_lag(seconds)

    # -- reconciling -----------------------------------------------------------------------------

    def targets(self) -> list[str]:
        """The runtimes this replica owns (all of them when it runs alone) among those in git
        and those the store knows that git dropped."""
        everyone = self.fleet()
        if not everyone or self.membership.fresh() is None:
            return []
        return self.membership.mine(everyone)

    def heartbeat(self) -> None:
        """Beat in the store; runtimes this replica has come to own (a member died or left)
        are reconciled at once, not at the next resync."""
        self.membership.beat()
        owned = set(self.targets())
        live = len(self.membership.live_members())
        self.metrics.membership(self.membership.name, live, len(owned))
        with self._owned_lock:
            new, lost, self._owned = owned - self._owned, self._owned - owned, owned
        for runtime in sorted(lost):  # its watches move with it to its new owner
            self.watches.release(runtime)
        for runtime in sorted(new):
            self.submit(runtime)

    def fleet(self) -> list[str]:
        """Runtimes in git and runtimes the store knows that git dropped, whoever owns them."""
        repo = self.state.repo
        if repo is None:
            return []
        return sorted(set(repo.runtimes).union(self.store.runtime_names()))

    def reconcile_all(self, wait: bool = False) -> list[Future[None]]:
        """Submit every runtime to the worker pool; a runtime already running is not submitted
        again (its run is waited for with ``wait``)."""
        futures = [self.submit(name) for name in self.targets()]
        if wait:
            for future in futures:
                future.result()
        return futures

    def submit(self, runtime: str, *, newer_commit: bool = False) -> Future[None]:
        """Reconcile ``runtime`` on the pool (see :meth:`Workers.submit`)."""
        return self.workers.submit(runtime, newer_commit=newer_commit)

    def wait_idle(self) -> None:
        """Wait until no reconcile is running (tests, benchmarks, shutdown)."""
        self.workers.wait_idle()

    def reconcile(self, runtime: str) -> Operation | None:
        """Run (or resume) ``runtime``'s operation once; schedule a retry if it waits."""
        return run_runtime(self, runtime)

    def status(self) -> dict[str, Any]:
        """``/status``: the source, and every runtime and module with state and reason."""
        return status_document(self)

    def close(self) -> None:
        """Stop: a run waiting within a pass (for CRDs or operators) stops waiting and a
        running operation starts no further step, each resumed at the next start (O2); runs
        not yet started are dropped; then the pool stops, and this replica leaves the members
        (the other replicas take its runtimes over at once)."""
        self.stopping.set()
        self.watches.close()
        self.workers.close()
        if self.membership.member is not None:
            self.membership.leave()


def _no_second_source(url: str, ref: str, path: str) -> Source:
    raise TransientError(
        f"channels come from {mask(url)}, but this daemon cannot fetch a second source"
    )
