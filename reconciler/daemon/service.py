"""The daemon: follow a git ref, keep every runtime converged, report health and metrics.

:class:`Daemon` holds the wiring; its ticks are plain methods that tests call directly:

- :meth:`Daemon.poll` asks the source whether the ref moved (one ``ls-remote`` per poll for the
  whole fleet), reads and validates a new commit as a whole (C7) and either refuses it (the last
  good commit stays in force and ``/status`` says which file and why), holds it (deletion brake,
  S5), or accepts it and reconciles every runtime. An unreachable remote changes nothing (S3);
  a commit that cannot be read for a reason that may pass (a fetch cut, an unreachable channels
  source: a :class:`~reconciler.errors.TransientError`) waits, PENDING, and is read again after
  a backoff (:mod:`reconciler.daemon.verdicts`), never refused for it.
  Every verdict is kept in the state store with its commit, so a restart decides the same: a
  held commit stays held until allowed (``--allow-deletions COMMIT``, for that commit only), the
  brake counts from the clusters' inventories and what the store knows runs (never from
  "nothing" after a start), at the limits of the commit in force when stricter than the judged
  commit's (a commit never lifts its own brake), and every commit not in force is judged, one
  accepted before included; a commit the daemon died reading twice (a process that stopped
  mid-read, not a read that failed) is refused by id instead of crashing it again. Replicas sharing
  the store judge a commit once (the first verdict written stands, for all of them) and move
  the commit in force by compare-and-set; each takes up the store's commit in force at each
  poll, before it judges anything, and before each reconcile.
  The config repo is asked first and a channels repository (``channelsFrom.git``) second, each
  failure reported on its own; channels that cannot be reached keep their last seen commit.
- :meth:`Daemon.reconcile_all` (after a commit and on the resync interval) runs each runtime's
  operation on a bounded worker pool; one runtime never runs twice at once, slow clusters do not
  hold up the others, and operations that wait are retried at the time their step asked for.

:func:`start_scheduler` puts the ticks on apscheduler 3 (no overlapping runs, coalesced) at the
intervals of ``spec.intervals`` in the commit in force (a commit that changes them reschedules
the jobs), unless the command line gave its own (:class:`DaemonOptions`). Logs name each
failure's cause: its error type and whether it is transient (retried) or permanent;
``reconciler.daemon.http`` serves the endpoints. Callers: ``reconciler daemon``, tests, bench.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from apscheduler.schedulers.background import BackgroundScheduler  # type: ignore[import-untyped]
from apscheduler.schedulers.base import BaseScheduler  # type: ignore[import-untyped]

from reconciler.cluster.api import Cluster
from reconciler.core.brake import (
    Allowance,
    Limits,
    Verdict,
    count_deletions,
    judge,
    limits_for,
    with_unread,
)
from reconciler.core.diagnostics import Diagnostic
from reconciler.core.fleetdiff import FleetDiffer
from reconciler.core.head import Head, head_text
from reconciler.core.model import OUTPUT_API_VERSION, ClusterAccess, ConfigRepo, Settings
from reconciler.core.redaction import mask, mask_all
from reconciler.core.resolve import resolve_runtime
from reconciler.daemon.membership import DEFAULT_LEASE, Membership, fenced
from reconciler.daemon.metrics import Metrics
from reconciler.daemon.pruning import PRUNE_EVERY, Pruning
from reconciler.daemon.verdicts import Held, Reading, Waiting, failed
from reconciler.errors import PermanentError, ReconcilerError, TransientError
from reconciler.operations.crash import place_of
from reconciler.operations.engine import Engine, owner_alive, this_owner
from reconciler.operations.model import (
    CommitRecord,
    CommitVerdict,
    Operation,
    OperationState,
    Retention,
    operation_limits,
)
from reconciler.operations.report import state_text
from reconciler.operations.runner import Connect, Runner
from reconciler.operations.running import fetch_running
from reconciler.operations.store import (
    ALLOWED_DELETIONS,
    StateStore,
    load_status,
    load_statuses,
)
from reconciler.source.git import Revision, redact
from reconciler.source.loader import ChannelsRepository, ReadOptions, channels_repository, load_repo

log = logging.getLogger("reconciler.daemon")

#: A commit the daemon stopped reading this many times (a crash while parsing) is refused.
MAX_READ_ATTEMPTS = 2


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
    refused: dict[str, Any] | None = None
    held: dict[str, Any] | None = None
    #: The newest commit, while reading it fails in a way that may pass (PENDING).
    waiting: Waiting | None = None
    #: The head this replica's git showed at its last poll (None before one, or when reading it
    #: failed and is to be tried again): a commit accepted before and no longer in force is
    #: taken up again (a revert) only when this replica's own git moved to it.
    seen: Head | None = None
    pending_since: datetime | None = None
    #: The channels source (``channelsFrom.git``), asked after the config repo: its own error,
    #: and the last commit each channels source (url, ref, path) was seen at, kept in force
    #: while it cannot be reached.
    channels_error: str = ""
    channels_last_success: datetime | None = None
    channels_seen: dict[tuple[str, str, str], str] = field(default_factory=dict)


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


@dataclass(frozen=True, slots=True)
class Intervals:
    """How often the daemon polls its source and resyncs every runtime."""

    poll: timedelta
    resync: timedelta


class Daemon:
    """See the module docstring."""

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
        self.channels: Source | None = None
        self._channels_key: tuple[str, str, str] | None = None
        self.store = store
        self.connect = connect
        self.clock = clock
        self.options = options or DaemonOptions()
        self.metrics = metrics or Metrics()
        self.state = SourceState()
        self.scheduler: BackgroundScheduler | None = None
        self._pool = ThreadPoolExecutor(
            max_workers=self.options.workers, thread_name_prefix="reconcile"
        )
        self._running: dict[str, Future[None]] = {}
        self._again: set[str] = set()
        #: The runtimes this replica owned at its last heartbeat.
        self._owned: set[str] = set()
        self._lock = threading.Lock()
        self._poll_lock = threading.Lock()
        self.runtime_errors: dict[str, str] = {}
        #: Commits (head text) this process read to the end, whatever came of it: a READING
        #: record of this replica's on one of them is no crash (:meth:`_read_attempts`).
        self._reads_ended: set[str] = set()
        #: The intervals the scheduler's jobs run at (:func:`schedule_jobs`).
        self.scheduled: Intervals | None = None
        #: This replica among those sharing the store: who owns which runtime, fencing.
        self.membership = Membership(
            store,
            self.options.member or this_owner(),
            clock,
            lease=self.options.lease,
            monotonic=monotonic,
        )

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
            before = self.state.repo
            try:
                return self._poll()
            finally:  # once, against the commit the poll ended on (it may follow, then accept)
                self._submit_changed(before)

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
            kept = _shown(self.state.commit)
            log.log(
                _level(error),
                "source %s, keeping commit %s: %s",
                _source_failure(error),
                kept,
                error,
            )
            self.metrics.poll(ok=False)
            self._follow(in_force)
            return False
        self.state.error = ""
        self.state.last_success = now
        self.metrics.poll(ok=True, now=now)
        head = self._head(config)
        seen, self.state.seen = self.state.seen, head
        if self.state.waiting is not None and self.state.waiting.commit != head.text:
            self.state.waiting = None  # git moved on (or back) from the commit that waited
        # the fleet's commit first: a new one is judged (the brake counts) from the one in force
        followed = self._follow(in_force)
        if head in (self.state.commit, in_force.commit if in_force else None):
            self._update_lag(head)
            return followed
        earlier = self.store.commit(head)
        if earlier is not None and self._still_stands(head, earlier):
            self._update_lag(head)
            return False  # the last one accepted stays in force (S3)
        if earlier is not None and earlier.verdict is CommitVerdict.ACCEPTED and head == seen:
            # accepted before, no longer in force, and this replica's git has not moved: the
            # fleet went past it while this replica's fetch lags (a revert moves the git view)
            self._update_lag(head)
            return followed
        self.state.pending_since = self.state.pending_since or now
        return self._consider(head, earlier, in_force)

    def _still_stands(self, head: Head, earlier: CommitRecord) -> bool:
        """A refused commit stays refused, a held one held until allowed (across restarts and
        replicas: the verdict any of them recorded first); a waiting one waits until its next
        read is due."""
        if earlier.verdict is CommitVerdict.PENDING:
            waiting = Waiting.from_json(earlier.detail)
            self.state.waiting = waiting
            return self.clock() < waiting.retry_at
        if earlier.verdict is CommitVerdict.REFUSED:
            self.state.refused = earlier.detail
            return True
        if earlier.verdict is CommitVerdict.HELD and not self._allowed(head):
            self.state.held = earlier.detail
            self.metrics.held(True)
            return True
        return False

    def follow_store(self) -> bool:
        """Take up the commit in force in the store when another replica moved it (before a
        reconcile: every replica works on the same commit); whether it changed here."""
        in_force = self.store.last_accepted()
        if in_force is None or in_force.commit == self.state.commit:
            return False
        with self._poll_lock:
            before = self.state.repo
            followed = self._follow(self.store.last_accepted())
            self._submit_changed(before)
            return followed

    def _follow(self, in_force: CommitRecord | None) -> bool:
        """Put ``in_force`` (the store's commit in force, accepted by this replica or another)
        in force here when it is not yet; whether it changed. The newest commit may be refused
        or held meanwhile (S3): runtimes keep being reconciled against the one in force."""
        if in_force is None or in_force.commit == self.state.commit:
            return False
        head = in_force.commit
        try:
            revision = self.source.revision(head.config)
            options, _ = self._read_options(revision, head, pinned=True)
            validation = load_repo(self.source.path or ".", options, tree=revision.tree)
        except ReconcilerError as error:
            log.warning(
                "cannot read the commit in force %s (%s): %s", head.shown, _cause(error), error
            )
            return False
        if validation.repo is None:
            log.warning("the commit in force %s does not load here", head.shown)
            return False
        self._take(head, validation.repo)
        return True

    def _allowed(self, head: Head) -> bool:
        wanted = self.options.allow_deletions
        return len(wanted) >= 7 and head.text.startswith(wanted)

    def _consider(
        self, head: Head, earlier: CommitRecord | None, in_force: CommitRecord | None
    ) -> bool:
        attempts = 0
        undecided = (None, CommitVerdict.READING, CommitVerdict.PENDING)
        if (earlier.verdict if earlier is not None else None) in undecided:  # not decided yet
            attempts = self._read_attempts(head, earlier)
            if attempts > MAX_READ_ATTEMPTS:
                return self._refuse_unreadable(head, "the daemon stopped twice while reading it")
            reading = Reading(self.membership.name).to_json()
            standing = self._record(head, CommitVerdict.READING, detail=reading, attempts=attempts)
            if standing.verdict is not CommitVerdict.READING:  # another replica decided first
                return self._adopt(head, standing)
        try:
            return self._read_and_judge(head, earlier, in_force)
        except TransientError as error:
            return self._wait(head, error, earlier, attempts, in_force)
        finally:  # whatever the outcome, this read ended here: no crash (see _read_attempts)
            self._reads_ended.add(head.text)

    def _read_and_judge(
        self, head: Head, earlier: CommitRecord | None, in_force: CommitRecord | None
    ) -> bool:
        """Read ``head`` and refuse, hold or accept it. Every commit not in force is judged
        by the brake, one accepted before included (a force-push back to it, S5)."""
        try:
            revision = self.source.revision(head.config)
            options, head = self._read_options(revision, head)
            validation = load_repo(self.source.path or ".", options, tree=revision.tree)
        except TransientError:
            raise
        except PermanentError as error:
            return self._refuse_unreadable(head, str(error))
        except Exception as error:
            return self._refuse_unreadable(head, f"internal error: {type(error).__name__}: {error}")
        if validation.repo is None:
            return self._refuse(head, validation.diagnostics)
        verdict = self._brake(head, validation.repo)
        if verdict.held:
            return self._hold(head, verdict)
        return self._accept(head, validation.repo, in_force)

    def _wait(
        self,
        head: Head,
        error: TransientError,
        earlier: CommitRecord | None,
        attempts: int,
        in_force: CommitRecord | None,
    ) -> bool:
        """Reading ``head`` failed in a way that may pass (S3): it stays PENDING, never
        refused for it, and is read again after a backoff; the commit in force stays."""
        now = self.clock()
        before = self.state.waiting
        failures = before.failures + 1 if before is not None and before.commit == head.text else 1
        if earlier is not None and earlier.verdict is CommitVerdict.PENDING:
            failures = max(failures, Waiting.from_json(earlier.detail).failures + 1)
        waiting = failed(head, str(error), now, error.retry_after, failures)
        self.state.error = str(error)
        self.state.waiting = waiting
        self.state.seen = None  # read again at the next poll, even a revert
        log.warning("%s (%s)", waiting.message, _cause(error))
        if attempts:  # this replica's READING record: its read ended, no crash (attempts - 1)
            self._record(
                head, CommitVerdict.PENDING, waiting.message, waiting.to_json(), attempts - 1
            )
        self._follow(in_force)
        return False

    def _read_attempts(self, head: Head, earlier: CommitRecord | None) -> int:
        """This read's number: one more than the reads that died (a process that stopped while
        reading it). A PENDING record counts those; a READING record of this replica's or of
        one that is gone is one more, unless this very process ended that read (a read that
        failed or was decided is no crash); another live replica reading it is no crash. A
        process on this host that no longer runs is gone before its lease ends (a daemon named
        host:pid that restarts at once after dying on the commit)."""
        if earlier is None:
            return 1
        if earlier.verdict is CommitVerdict.PENDING:
            return earlier.attempts + 1
        reader = Reading.from_json(earlier.detail).reader
        ended_here = reader == self.membership.name and head.text in self._reads_ended
        alive = self.membership.alive(reader) and owner_alive(reader)
        crashed = not ended_here and (reader in ("", self.membership.name) or not alive)
        return earlier.attempts + 1 if crashed else max(earlier.attempts, 1)

    def _adopt(self, head: Head, standing: CommitRecord) -> bool:
        """Act on the verdict another replica recorded on ``head`` first."""
        if self.state.waiting is not None and self.state.waiting.commit == head.text:
            self.state.waiting = None  # decided: it waits no more
        if standing.verdict is CommitVerdict.ACCEPTED:
            return self._follow(self.store.last_accepted())
        if standing.verdict is CommitVerdict.REFUSED:
            self.state.refused = standing.detail
            self.metrics.commit_refused()
        elif standing.verdict is CommitVerdict.HELD:
            self.state.held = standing.detail
            self.metrics.held(True)
        self._update_lag(head)
        self._follow(self.store.last_accepted())
        return False

    def _record(
        self,
        head: Head,
        verdict: CommitVerdict,
        message: str = "",
        detail: dict[str, Any] | None = None,
        attempts: int = 0,
    ) -> CommitRecord:
        """Record a verdict other than ACCEPTED; the one that stands (another replica's when it
        decided first)."""
        record = CommitRecord(head, verdict, self.clock(), message, detail or {}, attempts)
        return self.store.decide_commit(record)

    def _hold(self, head: Head, verdict: Verdict) -> bool:
        message = verdict.message
        held = Held(head.text, verdict, message)
        standing = self._record(head, CommitVerdict.HELD, message, held.to_json())
        if standing.verdict is CommitVerdict.HELD:
            log.warning("commit %s held: %s", head.shown, standing.message)
        return self._adopt(head, standing)

    def _refuse_unreadable(self, head: Head, reason: str) -> bool:
        message = f"commit {head.shown} refused: {reason}; still on {_shown(self.state.commit)}"
        refused = {"commit": head.text, "errors": [], "message": message}
        standing = self._record(head, CommitVerdict.REFUSED, message, refused)
        if standing.verdict is CommitVerdict.REFUSED:
            log.error("%s", standing.message)
        return self._adopt(head, standing)

    def _read_options(
        self, revision: Revision, head: Head, *, pinned: bool = False
    ) -> tuple[ReadOptions, Head]:
        """With ``channelsFrom.git``, the channels come from that repository's commit; the
        head then names both commits. A remote git may not fetch is never asked (validation
        refuses the commit with its place); an unreachable channels source leaves its last seen
        commit in force, so the config repo's commits still apply. ``pinned``: the head's
        channels commit is the one (a commit another replica accepted), never asked anew.
        """
        config, seen = head.config, head.channels
        wanted = channels_repository(self.source.path or ".", revision.tree)
        if wanted is None:
            self.channels = None
            self.state.channels_error = ""
            return self.options.read, Head(config)
        same = self.channels is not None and self._channels_key == _key(wanted)
        channels = self._channels_source(wanted)
        commit = seen if (same or pinned) and seen else self._channels_commit(channels)
        if not commit:
            raise TransientError(
                f"commit {config[:12]} waits for its channels source {channels.shown}: "
                f"{self.state.channels_error}"
            )
        try:
            tree = channels.revision(commit).tree
        except ReconcilerError as error:
            self.state.channels_error = str(error)
            raise
        label = f"{channels.shown}@{commit[:12]}"
        options = replace(self.options.read, channels_tree=tree, channels_label=label)
        return options, Head(config, commit)

    def _channels_source(self, wanted: ChannelsRepository) -> Source:
        key = _key(wanted)
        if self.channels is None or self._channels_key != key:
            try:
                self.channels = self.make_source(wanted.url, wanted.ref, wanted.sub_path)
            except ReconcilerError as error:
                self.state.channels_error = str(error)
                raise
            self._channels_key = key
        return self.channels

    def _channels_commit(self, channels: Source) -> str:
        """The channels source's commit now, or the last one seen when it cannot be asked
        (its error then in ``/status``); ``""`` when never seen."""
        key = self._channels_key or ("", "", "")
        try:
            commit = channels.check()
        except ReconcilerError as error:
            self.state.channels_error = str(error)
            known = self.state.channels_seen.get(key, "")
            kept = known[:12] or "none"
            log.log(
                _level(error),
                "channels source %s, keeping %s: %s",
                _source_failure(error),
                kept,
                error,
            )
            return known
        self.state.channels_error = ""
        self.state.channels_last_success = self.clock()
        self.state.channels_seen[key] = commit
        return commit

    def _head(self, config: str) -> Head:
        """The commit to be in force: the config repo's (asked first, by the caller), and the
        channels repository's when channels live apart (one remote check per source)."""
        if self.channels is None:
            return Head(config)
        return Head(config, self._channels_commit(self.channels) or None)

    def _refuse(self, head: Head, diagnostics: tuple[Diagnostic, ...]) -> bool:
        refused: dict[str, Any] = {
            "commit": head.text,
            "errors": [d.to_json() for d in diagnostics],
            "message": f"commit {head.shown} refused: {len(diagnostics)} error(s); "
            f"still on {_shown(self.state.commit)}",
        }
        message = str(refused["message"])
        standing = self._record(head, CommitVerdict.REFUSED, message, refused)
        if standing.verdict is CommitVerdict.REFUSED:
            for diagnostic in diagnostics:
                log.error("commit %s refused: %s", head.shown, diagnostic.format())
        return self._adopt(head, standing)

    def _accept(self, head: Head, repo: ConfigRepo, in_force: CommitRecord | None) -> bool:
        """Make ``head`` the commit in force, in the store (if no other replica moved it since
        ``in_force`` was read) and here; else take up the one the store has."""
        expected = in_force.commit if in_force is not None else None
        allowed = {ALLOWED_DELETIONS: self.options.allow_deletions} if self._allowed(head) else {}
        record = CommitRecord(head, CommitVerdict.ACCEPTED, self.clock(), detail=allowed)
        now_in_force = self.store.accept_commit(record, expected)
        if now_in_force is None or now_in_force.commit != head:
            standing = self.store.commit(head)
            if standing is not None and standing.verdict is not CommitVerdict.ACCEPTED:
                return self._adopt(head, standing)  # another replica held or refused it first
            log.info(
                "commit %s not taken up: another replica put %s in force meanwhile",
                head.shown,
                now_in_force.commit.shown if now_in_force else "nothing",
            )
            return self._follow(now_in_force)
        self.state.refused = self.state.held = None
        self.state.waiting = None
        self.state.pending_since = None
        self.metrics.held(False)
        self._take(head, repo)
        return True

    def _take(self, head: Head, repo: ConfigRepo) -> None:
        """Put ``head`` in force here (its runtimes are reconciled by :meth:`_submit_changed`
        when the poll ends)."""
        log.info("commit %s in force (was %s)", head.shown, _shown(self.state.commit))
        self.state.commit, self.state.repo = head, repo
        self._update_lag(head)
        self._reschedule()

    def _submit_changed(self, previous: ConfigRepo | None) -> None:
        """Reconcile the runtimes the commit in force changes from ``previous`` (every one
        after a start)."""
        repo = self.state.repo
        if repo is None or repo is previous:
            return
        if previous is None:
            owned = self.targets()
            with self._lock:  # the next heartbeat takes none of these for newly owned
                self._owned = set(owned)
            for name in owned:
                self.submit(name, newer_commit=True)
            return
        # only the runtimes this commit changes; drift elsewhere is the resync's job
        changed = FleetDiffer(previous, repo, self.clock()).diff()
        for runtime in changed.runtimes:
            self.submit(runtime.runtime, newer_commit=True)

    def _reschedule(self) -> None:
        """A commit with other ``spec.intervals`` moves the poll and resync jobs to them."""
        wanted = self.intervals
        if self.scheduler is None or wanted == self.scheduled:
            return
        poll, resync = wanted.poll.total_seconds(), wanted.resync.total_seconds()
        self.scheduler.reschedule_job("poll", trigger="interval", seconds=poll)
        jitter = _jitter(wanted.resync)
        self.scheduler.reschedule_job("resync", trigger="interval", seconds=resync, jitter=jitter)
        self.scheduled = wanted
        log.info("polling every %gs, resyncing every %gs", poll, resync)

    def _brake(self, head: Head, repo: ConfigRepo) -> Verdict:
        """S5, counted from what runs: the clusters' inventories, the store's records and the
        commit in force; at the stricter of the limits of the commit in force and the judged
        commit's own (the defaults when none is in force: a new store)."""
        current = self.state.repo
        settings = current.settings if current is not None else repo.settings
        running = fetch_running(
            self.store,
            repo,
            self.connect,
            system_namespace=settings.system_namespace,
            workers=self.options.workers,
        )
        for name, error in sorted(running.unread.items()):
            log.warning("brake: runtime %s not read, counted from the store: %s", name, error)
        known = running.modules
        if current is not None:
            for name, runtime in current.runtimes.items():
                modules = known.setdefault(name, {})
                for module in resolve_runtime(current, runtime).modules:
                    modules.setdefault(module.name, module.version)
        allowance = Allowance(count=sys.maxsize) if self._allowed(head) else Allowance()
        in_force = Limits.of(current.settings) if current is not None else None
        limits = limits_for(repo.settings, in_force)
        verdict = judge(
            count_deletions(known, repo),
            limits,
            allowance,
            Limits.of(repo.settings),
            allow_with=f"--allow-deletions {head.shown} (the daemon's flag: this commit only)",
        )
        return with_unread(verdict, running.unread)

    def _update_lag(self, head: Head) -> None:
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
        with self._lock:
            new, self._owned = owned - self._owned, owned
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
        """Reconcile ``runtime`` on the pool, or return the run already under way; with
        ``newer_commit`` that run is followed by one more (it may have started on the commit
        before)."""
        with self._lock:
            running = self._running.get(runtime)
            if running is not None:
                if newer_commit:
                    self._again.add(runtime)
                return running
            try:
                future = self._pool.submit(self._reconcile, runtime)
            except RuntimeError:  # the pool is shutting down: the next start reconciles it
                log.info("runtime %s: not started, stopping", runtime)
                stopped: Future[None] = Future()
                stopped.cancel()
                return stopped
            self._running[runtime] = future
            return future

    def wait_idle(self) -> None:
        """Wait until no reconcile is running (tests, benchmarks, shutdown)."""
        while True:
            with self._lock:
                running = list(self._running.values())
            if not running:
                return
            for future in running:
                future.result()

    def _reconcile(self, runtime: str) -> None:
        started = self.clock()
        try:
            self.runtime_errors.pop(runtime, None)
            operation = self.reconcile(runtime)
            if operation is not None:
                self.metrics.operation(operation, self.clock() - started)
        except ReconcilerError as error:
            self._failed(runtime, error, str(error))
        except Exception as error:
            self._failed(runtime, error, f"internal error: {type(error).__name__}: {error}")
            if self.options.debug:
                log.error("runtime %s: traceback", runtime, exc_info=error)
        finally:
            with self._lock:
                self._running.pop(runtime, None)
                if runtime in self._again:
                    self._again.discard(runtime)
                    self._resubmit(runtime)

    def _resubmit(self, runtime: str) -> None:
        try:
            self._running[runtime] = self._pool.submit(self._reconcile, runtime)
        except RuntimeError:  # the pool is shutting down: the next start resumes it
            log.info("runtime %s: not run again, stopping", runtime)

    def _failed(self, runtime: str, error: BaseException, message: str) -> None:
        self.runtime_errors[runtime] = message
        self.metrics.reconcile_failed(runtime, type(error).__name__)
        try:
            operation = self.store.unfinished(runtime)
        except ReconcilerError:  # the store failed too (it is down): the line without the id
            operation = None
        extra = {"runtime": runtime, "operation": operation.id if operation else ""}
        if isinstance(error, ReconcilerError):
            log.error("runtime %s: %s (%s)", runtime, message, _cause(error), extra=extra)
        else:
            log.error("runtime %s: %s", runtime, message, extra=extra)
        if isinstance(error, TransientError):  # retried as it asked, not at the next resync
            self._retry(runtime, self.clock() + timedelta(seconds=error.retry_after))

    def reconcile(self, runtime: str) -> Operation | None:
        """Run (or resume) ``runtime``'s operation once; schedule a retry if it waits."""
        self.follow_store()  # the commit in force for every replica, not only this one's git
        repo = self.state.repo
        member = self.membership.fresh()
        if repo is None or member is None or runtime not in self.membership.mine(self.fleet()):
            return None  # another replica's (or none while the store cannot be reached)
        engine = Engine(
            self.store,
            clock=self.clock,
            disabled=frozenset(repo.settings.disabled_steps),
            limits=operation_limits(repo.settings),
            owner=self.membership.name,
            alive=self.membership.alive,
            fence=lambda: self.membership.fenced(member.epoch),
            token=self.membership.token(member.epoch),
        )
        epoch = member.epoch

        def fenced_connect(access: ClusterAccess, name: str) -> Cluster:
            cluster = self.connect(access, name)
            return fenced(cluster, lambda: self.membership.fenced(epoch))

        commit = self.state.commit
        runner = Runner(self.store, engine, repo, fenced_connect, self.clock, commit)
        outcome = runner.run(runner.operation_for(runtime))
        operation = outcome.operation
        extra = {"runtime": runtime, "operation": operation.id}
        log.info(
            "runtime %s: %s %s %s",
            runtime,
            operation.type,
            operation.id,
            state_text(operation),
            extra=extra,
        )
        _log_module_errors(runtime, operation, extra)
        self._measure(runtime, repo, operation, engine)
        if outcome.retry_at is not None:
            self._retry(runtime, outcome.retry_at)
        elif operation.state is OperationState.FAILED:
            crash = engine.crashes.get(operation.id)
            log.error(
                "runtime %s: operation %s failed: %s",
                runtime,
                operation.id,
                operation.message,
                extra={"runtime": runtime, "operation": operation.id},
                exc_info=crash.error if crash is not None and self.options.debug else None,
            )
            if crash is not None:  # a bug inside a step: shown like one outside
                self.runtime_errors[runtime] = crash.describe()
        return operation

    def _measure(
        self, runtime: str, repo: ConfigRepo, operation: Operation, engine: Engine
    ) -> None:
        """The runtime's state in the metrics, by the rule of ``reconciler status``; a run
        that ended on an error (a failed operation, a step retrying) counted by its type."""
        declared = repo.runtimes.get(runtime)
        in_git = declared.suspend if declared is not None else None
        status = load_status(self.store, runtime, git_suspended=in_git)
        if status is None:
            self.metrics.forget_runtime(runtime)
        else:
            self.metrics.runtime_status(status)
        crash, failure = engine.crashes.get(operation.id), operation.data.failure
        if crash is not None:
            self.metrics.reconcile_failed(runtime, crash.type)
        elif failure is not None:
            self.metrics.reconcile_failed(runtime, failure.error.cause.__name__)

    def _retry(self, runtime: str, when: datetime) -> None:
        if self.scheduler is None:
            return
        self.scheduler.add_job(
            guarded(self, f"runtime {runtime}", self.submit, lambda: "at the next poll or resync"),
            "date",
            run_date=when,
            args=[runtime],
            id=f"retry:{runtime}",
            replace_existing=True,
        )

    # -- status ----------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """``/status``: the source, and every runtime and module with state and reason."""
        # the runtime status of `reconciler status --format json`, plus what only this process
        # knows: the error of its last reconcile of the runtime ("" when none)
        repo = self.state.repo
        in_git = {n: r.suspend for n, r in repo.runtimes.items()} if repo is not None else None
        statuses = load_statuses(self.store, git_suspended=in_git)
        owners = self.membership.owners(sorted({s.current.runtime for s in statuses}))
        runtimes = [
            status.to_json()
            | {
                "error": self.runtime_errors.get(status.current.runtime, ""),
                "owner": owners.get(status.current.runtime, ""),
            }
            for status in statuses
        ]
        source = self.state
        document = {
            "apiVersion": OUTPUT_API_VERSION,
            "kind": "DaemonStatus",
            "source": {
                "url": self.source.shown,
                "path": self.source.path,
                "commit": head_text(source.commit),
                "lastPoll": source.last_poll.isoformat() if source.last_poll else None,
                "lastSuccessfulPoll": source.last_success.isoformat()
                if source.last_success
                else None,
                "error": source.error,
                "refused": source.refused,
                "held": source.held,
                "waiting": source.waiting.to_json() if source.waiting is not None else None,
            },
            "channels": self._channels_status(),
            "ready": self.ready,
            "member": self.membership.name,
            "members": self._members_status(),
            "runtimes": runtimes,
        }
        return mask_all(document)  # S4: whatever an error message carried

    def _members_status(self) -> list[dict[str, Any]]:
        """``/status`` of the replicas sharing the store, each with its last heartbeat."""
        now, lease = self.clock(), self.membership.lease
        return [
            {
                "name": member.name,
                "epoch": member.epoch,
                "heartbeat": member.heartbeat.isoformat(),
                "live": member.live(now, lease),
            }
            for member in self.store.members()
        ]

    def _channels_status(self) -> dict[str, Any] | None:
        """``/status`` of the channels source (``channelsFrom.git``), reported apart."""
        if self.channels is None and not self.state.channels_error:
            return None
        url, ref, path = self._channels_key or ("", "", "")
        last = self.state.channels_last_success
        return {
            "url": self.channels.shown if self.channels is not None else redact(url),
            "ref": ref,
            "path": path,
            "commit": (self.state.commit.channels if self.state.commit else None) or "",
            "lastSuccessfulCheck": last.isoformat() if last else None,
            "error": self.state.channels_error,
        }

    def close(self) -> None:
        """Let running reconciles finish, stop the pool, and leave the members (the other
        replicas take this one's runtimes over at once)."""
        self._pool.shutdown(wait=True)
        if self.membership.member is not None:
            self.membership.leave()


def _shown(head: Head | None) -> str:
    return head.shown if head is not None else "nothing"


def _cause(error: ReconcilerError) -> str:
    """What kind of failure ``error`` is, for logs: its type, and whether retrying helps."""
    if isinstance(error, TransientError):
        return f"{type(error).__name__}, transient: retried"
    return f"{type(error).__name__}, permanent: needs a fix"


def _source_failure(error: ReconcilerError) -> str:
    """``unreachable (ServerError, transient: retried)`` or ``failed (SourceError, ...)``."""
    what = "unreachable" if isinstance(error, TransientError) else "failed"
    return f"{what} ({_cause(error)})"


def _level(error: ReconcilerError) -> int:
    return logging.WARNING if isinstance(error, TransientError) else logging.ERROR


def _log_module_errors(runtime: str, operation: Operation, extra: dict[str, str]) -> None:
    """Each module in Error, with its error's type, permanence and asked delay."""
    for module in operation.data.modules:
        if module.error is not None:
            level = logging.ERROR if module.error.permanent else logging.WARNING
            cause = module.error.describe()
            log.log(
                level,
                "runtime %s: module %s: %s: %s",
                runtime,
                module.module,
                cause,
                module.error.message,
                extra=extra,
            )


def _key(wanted: ChannelsRepository) -> tuple[str, str, str]:
    return (wanted.url, wanted.ref, wanted.sub_path)


def _no_second_source(url: str, ref: str, path: str) -> Source:
    raise TransientError(
        f"channels come from {mask(url)}, but this daemon cannot fetch a second source"
    )


def start_scheduler(daemon: Daemon) -> BackgroundScheduler:
    """A background scheduler running the daemon's ticks (:func:`schedule_jobs`), started."""
    scheduler = BackgroundScheduler(
        job_defaults={"max_instances": 1, "coalesce": True, "misfire_grace_time": None}
    )
    schedule_jobs(daemon, scheduler)
    scheduler.start()
    return scheduler


def guarded(
    daemon: Daemon, name: str, job: Callable[..., object], retry: Callable[[], str]
) -> Callable[..., None]:
    """``job`` as the scheduler runs it: our errors as one line (a transient one with when it
    is tried again, ``retry()``), a bug as one ``internal error`` line with its place; never a
    traceback (unless ``--debug``), never an exception left to the scheduler."""

    def run(*args: object) -> None:
        try:
            job(*args)
        except TransientError as error:
            kind = type(error).__name__
            log.warning("%s: %s (%s, transient: retried %s)", name, error, kind, retry())
        except ReconcilerError as error:
            log.error("%s: %s (%s)", name, error, _cause(error))
        except Exception as error:
            log.error(
                "%s: internal error: %s: %s (at %s)",
                name,
                type(error).__name__,
                error,
                place_of(error),
                exc_info=error if daemon.options.debug else None,
            )

    return run


def schedule_jobs(daemon: Daemon, scheduler: BaseScheduler) -> None:
    """Polls at once and then every poll interval, resyncs every runtime every resync interval
    (with up to 10% jitter), at the daemon's :attr:`~Daemon.intervals`; an accepted commit with
    other ``spec.intervals`` reschedules both (unless the command line set them)."""
    intervals = daemon.intervals
    poll, resync = intervals.poll.total_seconds(), intervals.resync.total_seconds()
    scheduler.add_job(
        guarded(daemon, "poll", daemon.poll, lambda: f"at the next poll ({daemon.intervals.poll})"),
        "interval",
        seconds=poll,
        id="poll",
        next_run_time=daemon.clock(),
    )
    scheduler.add_job(
        guarded(daemon, "resync", daemon.reconcile_all, lambda: "at the next poll or resync"),
        "interval",
        seconds=resync,
        id="resync",
        jitter=_jitter(intervals.resync),
        next_run_time=daemon.clock() + intervals.resync,
    )
    beat = daemon.membership.lease.total_seconds() / 3
    scheduler.add_job(
        guarded(daemon, "heartbeat", daemon.heartbeat, lambda: f"in {beat:g}s"),
        "interval",
        seconds=beat,
        id="heartbeat",
        next_run_time=daemon.clock(),
    )
    pruning = Pruning(daemon.store, daemon.options.retention, daemon.clock)
    scheduler.add_job(
        pruning.tick,
        "interval",
        seconds=PRUNE_EVERY.total_seconds(),
        id="prune",
        next_run_time=daemon.clock(),
    )
    daemon.scheduler = scheduler
    daemon.scheduled = intervals


def _jitter(resync: timedelta) -> int:
    return max(1, int(resync.total_seconds() * 0.1))


def poll_now(daemon: Daemon) -> None:
    """Start a poll at once (a webhook, or ``sync`` asking a running daemon)."""
    if daemon.scheduler is not None:
        daemon.scheduler.modify_job("poll", next_run_time=daemon.clock())
    else:
        poll = guarded(daemon, "poll", daemon.poll, lambda: "at the next poll")
        threading.Thread(target=poll, daemon=True).start()
