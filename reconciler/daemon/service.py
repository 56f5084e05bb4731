"""The daemon: follow a git ref, keep every runtime converged, report health and metrics.

:class:`Daemon` holds the wiring and the ticks tests call directly; each job lives in its own
module:

- :meth:`Daemon.poll` holds the source's lock while the commit-verdict gate
  (:mod:`reconciler.daemon.commits`, built here from its parts: the store's verdicts, the
  commit reader of :mod:`reconciler.daemon.reading`, the deletion brake) asks the source whether
  the ref moved (one ``ls-remote`` per poll for the whole fleet) and judges a new commit:
  refused, held by the deletion brake, waiting, or accepted (typed details in
  :mod:`reconciler.daemon.verdicts`; the daemon's :mod:`~reconciler.daemon.source_state`
  changed only through its transitions). An unreachable remote changes nothing (S3). Replicas
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
from functools import partial
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler  # type: ignore[import-untyped]

from reconciler.core.brake import Verdict
from reconciler.core.fleetdiff import FleetDiffer
from reconciler.core.head import Head
from reconciler.core.model import ConfigRepo, Settings
from reconciler.core.notifications import NoNotifier, Notifier
from reconciler.core.redaction import mask
from reconciler.core.templates import RenderCache, TemplateRenderer
from reconciler.daemon.channels import Channels
from reconciler.daemon.commits import CommitGate, GateParts
from reconciler.daemon.logs import Repeats
from reconciler.daemon.membership import DEFAULT_LEASE, Membership
from reconciler.daemon.metrics import Metrics
from reconciler.daemon.reading import Source, SourceReader
from reconciler.daemon.rollouts import Rollouts
from reconciler.daemon.scheduler import (
    guarded,
    poll_now,
    reschedule,
    schedule_jobs,
    start_scheduler,
)
from reconciler.daemon.signing import verify_channels, verify_head
from reconciler.daemon.source_state import SourceState
from reconciler.daemon.status import status_document
from reconciler.daemon.watches import Watches
from reconciler.daemon.workers import Workers, run_runtime
from reconciler.errors import ReconcilerError, TransientError
from reconciler.operations.engine import this_owner
from reconciler.operations.model import Operation, Retention
from reconciler.operations.runner import Connect
from reconciler.operations.running import Judged, Running, fetch_verdict
from reconciler.operations.store import StateStore
from reconciler.render import default_renderer
from reconciler.source.loader import ReadOptions
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
    ``make_source``, ``notifier``, ``renderer``) may be replaced after it is made (tests
    interleave a store): the commit gate is handed the new one, the other parts read it from
    here at each use."""

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
        self._source = source
        self.make_source = make_source or _no_second_source
        self._store = store
        self.connect = connect
        self.clock = clock
        self.options = options or DaemonOptions()
        self.metrics = metrics or Metrics()
        #: Who is told about rollouts and refused or held commits (none until configured).
        self._notifier: Notifier = NoNotifier()
        #: Renders the chart modules of each commit read (core.templates).
        self._renderer: TemplateRenderer = default_renderer()
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
        self.reader = SourceReader(
            source,
            self.channels_repo,
            self._renderer,
            partial(verify_head, self),
            partial(verify_channels, self),
        )
        self.gate = CommitGate(self.state, self._gate_parts())

    def _gate_parts(self) -> GateParts:
        """What the commit gate uses (the verdicts' protocol, :mod:`reconciler.daemon.commits`)."""
        return GateParts(
            ledger=self._store,
            reader=self.reader,
            brake=self._brake,
            clock=self.clock,
            metrics=self.metrics,
            notifier=self._notifier,
            members=self.membership,
            repeats=self.repeats,
            allow_deletions=self.options.allow_deletions,
            taken=self._taken,
        )

    # -- wiring the commit gate follows when it is replaced ------------------------------------

    @property
    def store(self) -> StateStore:
        """The state store."""
        return self._store

    @store.setter
    def store(self, store: StateStore) -> None:
        self._store = self.gate.parts.ledger = store

    @property
    def source(self) -> Source:
        """Where commits come from."""
        return self._source

    @source.setter
    def source(self, source: Source) -> None:
        self._source = self.reader.source = source

    @property
    def notifier(self) -> Notifier:
        """Who is told about rollouts and refused or held commits (none until configured)."""
        return self._notifier

    @notifier.setter
    def notifier(self, notifier: Notifier) -> None:
        self._notifier = self.gate.parts.notifier = notifier

    @property
    def renderer(self) -> TemplateRenderer:
        """Renders the chart modules of each commit read (core.templates)."""
        return self._renderer

    @renderer.setter
    def renderer(self, renderer: TemplateRenderer) -> None:
        self._renderer = self.reader.renderer = renderer

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
        """One poll (:meth:`CommitGate.poll`); True when a new commit was put in force here
        (accepted by this replica or, seen in git, by another) and the runtimes it changes
        were submitted."""
        with self._poll_lock:
            before, before_head = self.state.repo, self.state.commit
            try:
                return self.gate.poll()
            finally:  # once, against the commit the poll ended on (it may follow, then accept)
                self._submit_changed(before, before_head)

    def follow_store(self) -> bool:
        """Take up the commit in force in the store when another replica moved it (before a
        reconcile: every replica works on the same commit); whether it changed here."""
        in_force = self.store.last_accepted()
        if in_force is None or in_force.commit == self.state.commit:
            return False
        with self._poll_lock:
            before, before_head = self.state.repo, self.state.commit
            followed = self.gate.follow(self.store.last_accepted())
            self._submit_changed(before, before_head)
            return followed

    def load_commit(self, head: Head) -> ConfigRepo:
        """The repo of ``head``, a commit accepted before (the commit in force, or the one a
        runtime held back by a rollout keeps)."""
        return self.reader.load(head)

    def _taken(self, head: Head, repo: ConfigRepo) -> None:
        """``head`` was put in force here: its rollout remembers its repo, the scheduler takes
        up its intervals (its runtimes are reconciled by :meth:`_submit_changed` when the poll
        ends)."""
        self.rollouts.remember(head, repo)
        reschedule(self)

    def _brake(self, judged: Judged) -> tuple[Verdict, Running]:
        """The deletion brake's verdict, over the store and clusters wired now."""
        return fetch_verdict(self.store, self.connect, judged, workers=self.options.workers)

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
            self.state.unchanged_through(before, head, repo.runtimes, names)
        for runtime in changed.runtimes:
            self.submit(runtime.runtime, newer_commit=True)

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
