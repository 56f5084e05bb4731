"""The daemon's ticks on apscheduler 3: polls at once and then every poll interval, resyncs every
runtime every resync interval (with up to 10% jitter), beats every third of the lease and prunes
the store every hour; no overlapping runs, coalesced. The intervals are those of
``spec.intervals`` in the commit in force (a commit that changes them reschedules the jobs),
unless the command line gave its own. A runtime whose run waits is retried at the time it asked
for. Every job runs :func:`guarded`: our errors as one line, never a traceback.

Callers: ``reconciler daemon``, :class:`reconciler.daemon.service.Daemon`, tests, bench.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from apscheduler.schedulers.background import BackgroundScheduler  # type: ignore[import-untyped]
from apscheduler.schedulers.base import BaseScheduler  # type: ignore[import-untyped]

from reconciler.daemon.logs import cause
from reconciler.daemon.pruning import PRUNE_EVERY, Pruning
from reconciler.errors import ReconcilerError, TransientError
from reconciler.operations.crash import place_of

if TYPE_CHECKING:
    from reconciler.daemon.service import Daemon

log = logging.getLogger("reconciler.daemon")


def start_scheduler(daemon: Daemon) -> BackgroundScheduler:
    """A background scheduler running the daemon's ticks (:func:`schedule_jobs`), started."""
    scheduler = BackgroundScheduler(
        job_defaults={"max_instances": 1, "coalesce": True, "misfire_grace_time": None}
    )
    schedule_jobs(daemon, scheduler)
    scheduler.start()
    daemon.watches.start()
    return scheduler


def guarded(
    daemon: Daemon, name: str, job: Callable[..., object], retry: Callable[[], str]
) -> Callable[..., None]:
    """``job`` as the scheduler runs it: our errors as one line (a transient one with when it
    is tried again, ``retry()``), a bug as one ``internal error`` line with its place; never a
    traceback (unless ``--debug``), never an exception left to the scheduler."""

    def run(*args: object) -> None:
        repeats = daemon.repeats  # the same failure at each run of the job: logged once
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
                exc_info=error if daemon.options.debug else None,
            )
        else:
            if repeats.recovered(name):
                log.info("%s works again", name)

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
    scheduler.add_job(
        guarded(daemon, "rollouts", daemon.rollouts.tick, lambda: f"in {poll:g}s"),
        "interval",
        seconds=poll,
        id="rollouts",
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


def reschedule(daemon: Daemon) -> None:
    """A commit with other ``spec.intervals`` moves the poll and resync jobs to them."""
    wanted = daemon.intervals
    scheduler = daemon.scheduler
    if scheduler is None or wanted == daemon.scheduled:
        return
    poll, resync = wanted.poll.total_seconds(), wanted.resync.total_seconds()
    scheduler.reschedule_job("poll", trigger="interval", seconds=poll)
    jitter = _jitter(wanted.resync)
    scheduler.reschedule_job("resync", trigger="interval", seconds=resync, jitter=jitter)
    daemon.scheduled = wanted
    log.info("polling every %gs, resyncing every %gs", poll, resync)


def retry(daemon: Daemon, runtime: str, when: datetime) -> None:
    """Reconcile ``runtime`` again at ``when`` (one retry per runtime: a later one replaces
    it); nothing without a scheduler (tests drive the ticks)."""
    if daemon.scheduler is None:
        return
    daemon.scheduler.add_job(
        guarded(daemon, f"runtime {runtime}", daemon.submit, lambda: "at the next poll or resync"),
        "date",
        run_date=when,
        args=[runtime],
        id=f"retry:{runtime}",
        replace_existing=True,
    )


def _jitter(resync: timedelta) -> int:
    return max(1, int(resync.total_seconds() * 0.1))


def poll_now(daemon: Daemon) -> None:
    """Start a poll at once (a webhook, or ``sync`` asking a running daemon)."""
    if daemon.scheduler is not None:
        daemon.scheduler.modify_job("poll", next_run_time=daemon.clock())
    else:
        poll = guarded(daemon, "poll", daemon.poll, lambda: "at the next poll")
        threading.Thread(target=poll, daemon=True).start()
