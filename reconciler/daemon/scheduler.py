"""The daemon's ticks on apscheduler 3: polls at once and then every poll interval, resyncs every
runtime every resync interval (with up to 10% jitter), beats every third of the lease and prunes
the store every hour; no overlapping runs, coalesced. The intervals are those of
``spec.intervals`` in the commit in force (a commit that changes them reschedules the jobs),
unless the command line gave its own. A runtime whose run waits is retried at the time it asked
for. Every job runs :meth:`Ticks.guarded`: our errors as one line, never a traceback.

:class:`Ticks` takes the jobs it runs (:class:`Jobs`: callables), the intervals in force, the
lease, a clock and the log's repeats; it knows nothing else of the daemon.

Callers: :class:`reconciler.daemon.service.Daemon` (its wiring), its worker pool and HTTP port,
tests, bench.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from apscheduler.schedulers.background import BackgroundScheduler  # type: ignore[import-untyped]
from apscheduler.schedulers.base import BaseScheduler  # type: ignore[import-untyped]

from reconciler.daemon.logs import Repeats, cause
from reconciler.daemon.pruning import PRUNE_EVERY
from reconciler.errors import ReconcilerError, TransientError
from reconciler.operations.crash import place_of

log = logging.getLogger("reconciler.daemon")


@dataclass(frozen=True, slots=True)
class Intervals:
    """How often the daemon polls its source and resyncs every runtime."""

    poll: timedelta
    resync: timedelta


@dataclass(frozen=True, slots=True)
class Jobs:
    """What the scheduler runs: a poll, a resync of every runtime, a heartbeat, a look at the
    rollouts, a pruning of the store, and a runtime's run (its retries)."""

    poll: Callable[[], object]
    resync: Callable[[], object]
    heartbeat: Callable[[], object]
    rollouts: Callable[[], object]
    prune: Callable[[], object]
    submit: Callable[[str], object]


class Ticks:
    """The jobs of one daemon on a scheduler (none until :meth:`start` or :meth:`schedule`:
    tests drive the ticks themselves)."""

    def __init__(
        self,
        jobs: Jobs,
        intervals: Callable[[], Intervals],
        lease: timedelta,
        clock: Callable[[], datetime],
        repeats: Repeats,
        *,
        debug: bool = False,
    ) -> None:
        self.jobs = jobs
        #: The intervals in force now (they move with the commit in force).
        self.intervals = intervals
        self.lease = lease
        self.clock = clock
        #: The failure last logged of each job: the same failure at each run is logged once.
        self.repeats = repeats
        #: Log the traceback of an internal error (``--debug``).
        self.debug = debug
        self.scheduler: BaseScheduler | None = None
        #: The intervals the scheduler's jobs run at (:meth:`schedule`).
        self.scheduled: Intervals | None = None

    def start(self) -> BackgroundScheduler:
        """A background scheduler running the jobs (:meth:`schedule`), started."""
        scheduler = BackgroundScheduler(
            job_defaults={"max_instances": 1, "coalesce": True, "misfire_grace_time": None}
        )
        self.schedule(scheduler)
        scheduler.start()
        return scheduler

    def guarded(
        self, name: str, job: Callable[..., object], retry: Callable[[], str]
    ) -> Callable[..., None]:
        """``job`` as the scheduler runs it: our errors as one line (a transient one with when
        it is tried again, ``retry()``), a bug as one ``internal error`` line with its place;
        never a traceback (unless ``--debug``), never an exception left to the scheduler."""
        repeats, debug = self.repeats, self.debug

        def run(*args: object) -> None:
            try:
                job(*args)
            except TransientError as error:
                kind = type(error).__name__
                level = repeats.level(name, str(error), logging.WARNING)
                log.log(level, "%s: %s (%s, transient: retried %s)", name, error, kind, retry())
            except ReconcilerError as error:
                log.log(
                    repeats.level(name, str(error), logging.ERROR),
                    "%s: %s (%s)",
                    name,
                    error,
                    cause(error),
                )
            except Exception as error:
                log.log(
                    repeats.level(name, f"{type(error).__name__}: {error}", logging.ERROR),
                    "%s: internal error: %s: %s (at %s)",
                    name,
                    type(error).__name__,
                    error,
                    place_of(error),
                    exc_info=error if debug else None,
                )
            else:
                if repeats.recovered(name):
                    log.info("%s works again", name)

        return run

    def schedule(self, scheduler: BaseScheduler) -> None:
        """Polls at once and then every poll interval, resyncs every runtime every resync
        interval (with up to 10% jitter), at the :attr:`intervals` in force; an accepted commit
        with other ``spec.intervals`` reschedules both (unless the command line set them)."""
        jobs, clock = self.jobs, self.clock
        intervals = self.intervals()
        poll, resync = intervals.poll.total_seconds(), intervals.resync.total_seconds()
        scheduler.add_job(
            self.guarded("poll", jobs.poll, lambda: f"at the next poll ({self.intervals().poll})"),
            "interval",
            seconds=poll,
            id="poll",
            next_run_time=clock(),
        )
        scheduler.add_job(
            self.guarded("resync", jobs.resync, lambda: "at the next poll or resync"),
            "interval",
            seconds=resync,
            id="resync",
            jitter=_jitter(intervals.resync),
            next_run_time=clock() + intervals.resync,
        )
        beat = self.lease.total_seconds() / 3
        scheduler.add_job(
            self.guarded("heartbeat", jobs.heartbeat, lambda: f"in {beat:g}s"),
            "interval",
            seconds=beat,
            id="heartbeat",
            next_run_time=clock(),
        )
        scheduler.add_job(
            self.guarded("rollouts", jobs.rollouts, lambda: f"in {poll:g}s"),
            "interval",
            seconds=poll,
            id="rollouts",
            next_run_time=clock(),
        )
        scheduler.add_job(
            jobs.prune,
            "interval",
            seconds=PRUNE_EVERY.total_seconds(),
            id="prune",
            next_run_time=clock(),
        )
        self.scheduler = scheduler
        self.scheduled = intervals

    def reschedule(self) -> None:
        """A commit with other ``spec.intervals`` moves the poll and resync jobs to them."""
        wanted = self.intervals()
        scheduler = self.scheduler
        if scheduler is None or wanted == self.scheduled:
            return
        poll, resync = wanted.poll.total_seconds(), wanted.resync.total_seconds()
        scheduler.reschedule_job("poll", trigger="interval", seconds=poll)
        jitter = _jitter(wanted.resync)
        scheduler.reschedule_job("resync", trigger="interval", seconds=resync, jitter=jitter)
        self.scheduled = wanted
        log.info("polling every %gs, resyncing every %gs", poll, resync)

    def retry(self, runtime: str, when: datetime) -> None:
        """Reconcile ``runtime`` again at ``when`` (one retry per runtime: a later one replaces
        it); nothing without a scheduler (tests drive the ticks)."""
        if self.scheduler is None:
            return
        self.scheduler.add_job(
            self.guarded(
                f"runtime {runtime}", self.jobs.submit, lambda: "at the next poll or resync"
            ),
            "date",
            run_date=when,
            args=[runtime],
            id=f"retry:{runtime}",
            replace_existing=True,
        )

    def poll_now(self) -> None:
        """Start a poll at once (a webhook, or ``sync`` asking a running daemon)."""
        if self.scheduler is not None:
            self.scheduler.modify_job("poll", next_run_time=self.clock())
        else:
            poll = self.guarded("poll", self.jobs.poll, lambda: "at the next poll")
            threading.Thread(target=poll, daemon=True).start()


def _jitter(resync: timedelta) -> int:
    return max(1, int(resync.total_seconds() * 0.1))
