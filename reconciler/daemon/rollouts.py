"""The daemon's rollouts: starting one per changing commit, gating each runtime's reconcile by
it, and moving it on (its job), as ``spec.rollout`` of the commit in force asks.

- :meth:`Rollouts.begin` (when a new commit is put in force here): the runtimes the commit
  changes (and those an earlier rollout had not reached) get waves, by the policy in force
  before it (:func:`~reconciler.core.rollouts.governing_policy`: a commit never sets its own
  rollout; one that drops or loosens ``spec.rollout`` is still rolled out in the waves in
  force, also out of a halted or paused rollout); the rollout is saved in the state store (one
  per commit: the replica that saves it first tells people about it); a progressing or paused
  rollout it takes runtimes from is superseded, and gates nothing from then on, here at once.
- :meth:`Rollouts.desired` (each runtime's reconcile): the commit and repo the runtime is
  reconciled on: its previous commit while its wave has not started (it does not get the new
  versions yet), the commit in force otherwise. A base commit that cannot be read holds the
  runtime back (a transient error), never lets it through.
- :meth:`Rollouts.tick` (a scheduler job, on every replica): reads the newest rollout from the
  store, reconciles the runtimes whose wave started since this replica last looked, moves the
  rollout by its members' health (:func:`~reconciler.core.rollout_steps.advance`) and saves it
  over the version read (of several replicas one moves it; the others see it at their next
  tick), and keeps the metrics.
- :meth:`Rollouts.command`: ``reconciler rollout pause|resume|cancel|promote`` through the
  daemon's HTTP port.

Every write of the replica's own (starting, superseding, moving on) carries its lease token
(:class:`~reconciler.operations.model.FenceToken`, taken before the rollout is read): checked
here right before the write (:meth:`Membership.fenced`), and by the store in the statement that
writes. A replica whose lease lapsed and that another member fenced writes nothing, even when
its compare-and-set on the version would match; the refusal is logged once per epoch and the
others carry on. A person's command carries no token: it is read and written again at once
(compare-and-set alone), whichever replica relays it, and a lapsed lease does not make it stale.

Every moment (scheduled, wave started, wave healthy, halted, completed, canceled) goes to
``daemon.notifier`` once, from the replica whose save made it.

Caller: :class:`reconciler.daemon.service.Daemon`.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Collection
from typing import TYPE_CHECKING

from reconciler.core.head import Head, head_text
from reconciler.core.model import ConfigRepo
from reconciler.core.notifications import Notification, NotificationKind
from reconciler.core.rollout_steps import Health, Moment, RolloutCommand, advance, supersede
from reconciler.core.rollouts import (
    Rollout,
    RolloutState,
    bases_after,
    desired_head,
    governing_policy,
    held_back,
    policy_of,
    start_rollout,
)
from reconciler.core.status import Reason
from reconciler.errors import FencedError, ReconcilerError, TransientError
from reconciler.operations.model import FenceToken
from reconciler.operations.rollouts import command_rollout
from reconciler.operations.store import load_statuses

if TYPE_CHECKING:
    from reconciler.daemon.service import Daemon

#: A module whose upgrade waits for the runtime's maintenance window (L10).
WAITING_FOR_WINDOW = str(Reason.WAITING_FOR_MAINTENANCE_WINDOW)

log = logging.getLogger("reconciler.daemon")
#: Commits whose repo is kept in memory for runtimes held back on them.
_KEPT_REPOS = 4


class Rollouts:
    """The rollouts of one daemon (see the module docstring)."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self._repos: OrderedDict[str, ConfigRepo] = OrderedDict()
        self._lock = threading.Lock()
        #: The newest rollout as this replica last read or wrote it (None: none, or not read).
        self.newest: Rollout | None = None
        self._read = False
        #: The token (or member epoch) whose refusal was logged last: one line per epoch.
        self._refused: object = None

    # -- gating ----------------------------------------------------------------------------------

    def remember(self, head: Head, repo: ConfigRepo) -> None:
        """Keep ``repo`` as the repo of ``head`` (the commit in force, or a base)."""
        with self._lock:
            self._repos[head.text] = repo
            self._repos.move_to_end(head.text)
            while len(self._repos) > _KEPT_REPOS:
                self._repos.popitem(last=False)

    def current(self) -> Rollout | None:
        """The newest rollout, read from the store the first time."""
        if not self._read:
            self.refresh()
        return self.newest

    def refresh(self) -> Rollout | None:
        """The newest rollout, read from the store now."""
        self.newest, self._read = self.daemon.store.latest_rollout(), True
        return self.newest

    def desired(
        self, runtime: str, repo: ConfigRepo, commit: Head | None
    ) -> tuple[ConfigRepo, Head | None]:
        """The repo and commit ``runtime`` is reconciled on (see the module docstring)."""
        wanted = desired_head(self.current(), runtime)
        if wanted is None or commit is None or wanted == commit.text:
            return repo, commit
        head = Head.parse(wanted)
        assert head is not None
        return self._repo_of(head, runtime), head

    def _repo_of(self, head: Head, runtime: str) -> ConfigRepo:
        with self._lock:
            kept = self._repos.get(head.text)
        if kept is not None:
            return kept
        try:
            with self.daemon.source_lock:  # the git source is read by one thread at a time
                with self._lock:
                    kept = self._repos.get(head.text)
                repo = kept if kept is not None else self.daemon.load_commit(head)
        except ReconcilerError as error:
            raise TransientError(
                f"runtime {runtime} is held back by a rollout on commit {head.shown}, "
                f"which cannot be read now: {error}",
                60,
            ) from error
        self.remember(head, repo)
        return repo

    # -- starting --------------------------------------------------------------------------------

    def begin(
        self,
        previous: ConfigRepo,
        before: Head | None,
        repo: ConfigRepo,
        head: Head,
        changed: Collection[str],
    ) -> None:
        """The rollout of ``head`` after ``before`` (see the module docstring): of the
        runtimes ``changed`` (the fleet diff of ``previous`` and ``repo``, made once by the
        caller) and those an earlier rollout had not reached."""
        self.remember(head, repo)
        if before is not None:
            self.remember(before, previous)
        try:
            token = self.token()
        except FencedError as error:
            self._refused_now(None, error)
            return
        latest = self.refresh()
        if latest is not None and latest.commit == head.text:
            return  # another replica started it, or a restart took the commit up again
        under_way = policy_of(latest) if latest is not None and latest.state.gates else None
        own = repo.settings.rollout
        policy = governing_policy(own, previous.settings.rollout, under_way)
        if policy is None or before is None:
            self._supersede(latest, head, token)  # no waves any more: every runtime takes it
            return
        now = self.daemon.clock()
        names = sorted(
            name
            for name in set(changed).intersection(previous.runtimes).union(held_back(latest))
            if name in repo.runtimes
        )
        suspended = frozenset(n for n in names if repo.runtimes[n].suspend) | frozenset(
            self.daemon.store.suspensions()
        ).intersection(names)
        bases = bases_after(latest, before.text, names)
        made = start_rollout(
            policy, head.text, [repo.runtimes[n] for n in names], bases, suspended, now
        )
        if made is None:
            return
        saved = self._put(made, token)
        if saved is None:  # another replica saved it first (it tells people), or fenced
            self.refresh()
            return
        self.newest = saved
        self._supersede(latest, head, token)
        skipped = sorted(suspended)
        waves = ", ".join(f"{w.name} ({len(w.runtimes)})" for w in saved.waves)
        note = f"; skipped (suspended): {', '.join(skipped)}" if skipped else ""
        if own != policy:
            note += (
                "; by the rollout policy in force, not this commit's own spec.rollout "
                "(it applies to the rollouts after this one)"
            )
        summary = f"rollout {saved.id} of commit {head.shown} scheduled: waves {waves}{note}"
        log.info("%s", summary)
        first = Moment(NotificationKind.ROLLOUT_SCHEDULED, 0, summary)
        started = Moment(
            NotificationKind.WAVE_STARTED,
            0,
            f"rollout {saved.id}: wave {saved.waves[0].name} started "
            f"({len(saved.waves[0].runtimes)} runtime(s), wave 1 of {len(saved.waves)})",
        )
        self.tell(saved, [first, started])

    def _supersede(self, latest: Rollout | None, head: Head, token: FenceToken) -> None:
        """``latest`` superseded by the rollout of ``head`` (or by ``head`` at once, then
        gating nothing from now on: this replica's next reconciles take ``head``)."""
        if latest is None or latest.state not in (RolloutState.PROGRESSING, RolloutState.PAUSED):
            return
        saved = self._put(supersede(latest, head.text, self.daemon.clock()), token)
        if saved is None:
            self.refresh()
            return
        log.info("rollout %s superseded by commit %s", latest.id, head.shown)
        if self.newest is not None and self.newest.id == saved.id:
            self.newest = saved

    # -- fencing ---------------------------------------------------------------------------------

    def token(self) -> FenceToken:
        """The lease token this replica's rollout writes carry (beating first when due), taken
        before the rollout is read; :class:`FencedError` when it may not write now."""
        membership = self.daemon.membership
        member = membership.fresh()
        if member is None:
            raise FencedError("not a member: the state store did not take its heartbeat")
        reason = membership.fenced(member.epoch)
        if reason is not None:
            raise FencedError(reason)
        return membership.token(member.epoch)

    def _put(self, rollout: Rollout, token: FenceToken) -> Rollout | None:
        """Save ``rollout`` under ``token``, checked here right before and by the store; the
        saved rollout, or ``None`` when another writer came first or the write was refused
        (logged once per epoch)."""
        try:
            reason = self.daemon.membership.fenced(token.epoch)
            if reason is not None:
                raise FencedError(reason)
            return self.daemon.store.put_rollout(rollout, token)
        except FencedError as error:
            self._refused_now(rollout, error, token)
            return None

    def _refused_now(
        self, rollout: Rollout | None, error: FencedError, token: FenceToken | None = None
    ) -> None:
        """Log a refused write once per lapsed epoch (the next heartbeat begins a new one)."""
        member = self.daemon.membership.member
        key = (token,) if token is not None else (member.epoch if member is not None else 0, "")
        if key == self._refused:
            return
        self._refused = key
        what = f"rollout {rollout.id}" if rollout is not None else "rollouts"
        log.warning(
            "%s: not written by this replica (%s): %s; the other replicas carry on",
            what,
            type(error).__name__,
            error,
        )

    # -- moving on -------------------------------------------------------------------------------

    def tick(self) -> Rollout | None:
        """One look at the newest rollout (see the module docstring); the rollout after it."""
        before = self.newest
        try:
            token = self.token()
        except FencedError as error:
            self._refused_now(None, error)
            return self.refresh()
        rollout = self.refresh()
        if rollout is None:
            return None
        self._submit_released(before, rollout)
        if rollout.state is RolloutState.PROGRESSING:
            health = self._health(rollout)
            moved, moments = advance(rollout, health, self.daemon.clock())
            if moved is not rollout:
                saved = self._put(moved, token)
                if saved is not None:
                    self.newest = saved
                    self.tell(saved, moments)
                    self._submit_released(rollout, saved)
                else:
                    self.refresh()
        self.daemon.metrics.rollouts(self.daemon.store.rollout_summaries(limit=5))
        return self.newest

    def _health(self, rollout: Rollout) -> dict[str, Health]:
        """Each released member's state by the rule of ``reconciler status`` (an operation
        that retries on an error is Error), with the commit it is on."""
        released = [m.runtime for m in rollout.members if m.state.released]
        return {
            status.current.runtime: Health(
                status.current.state,
                head_text(status.current.commit),
                deferred=any(m.reason == WAITING_FOR_WINDOW for m in status.current.modules),
            )
            for status in load_statuses(self.daemon.store, released)
        }

    def command(self, rollout_id: str, command: RolloutCommand, why: str = "") -> Rollout:
        """A person's command (through the daemon); the rollout after it."""
        before = self.current()
        saved, moments = command_rollout(
            self.daemon.store, rollout_id, command, self.daemon.clock(), why
        )
        if command is RolloutCommand.CANCEL:
            summary = f"rollout {saved.id} canceled: {saved.message}"
            moments = [*moments, Moment(NotificationKind.ROLLOUT_CANCELED, saved.wave, summary)]
        log.info("rollout %s: %s (%s)", saved.id, command, saved.state)
        self.tell(saved, moments)
        latest = self.refresh()
        if latest is not None and latest.id == saved.id and before is not None:
            self._submit_released(before if before.id == saved.id else None, latest)
        self.daemon.metrics.rollouts(self.daemon.store.rollout_summaries(limit=5))
        return saved

    def _submit_released(self, before: Rollout | None, after: Rollout) -> None:
        """Reconcile the members ``after`` released that ``before`` (the same rollout) had
        not (each replica reconciles those it owns)."""
        if not after.state.gates:
            return
        was = before if before is not None and before.id == after.id else None
        if was is None:  # a first look (a start): the resync reconciles everyone
            return
        for member in after.members:
            earlier = was.member(member.runtime)
            if member.state.released and (earlier is None or not earlier.state.released):
                self.daemon.submit(member.runtime, newer_commit=True)

    def tell(self, rollout: Rollout, moments: list[Moment]) -> None:
        """Hand ``moments`` of ``rollout`` to the notifier."""
        now = self.daemon.clock()
        for moment in moments:
            wave = rollout.waves[moment.wave].name
            self.daemon.notifier.notify(
                Notification(
                    kind=moment.kind,
                    commit=rollout.commit,
                    summary=moment.summary,
                    at=now,
                    key=f"{rollout.id}/{moment.wave}/{moment.kind}",
                    details={
                        "rollout": rollout.id,
                        "wave": wave,
                        "state": str(rollout.state),
                        "reason": str(rollout.reason or ""),
                    },
                )
            )
