"""The commit-verdict protocol: a gate over the state store that every new commit passes once.

A new commit is read and validated as a whole (C7), then refused (the last good commit stays
in force and ``/status`` says which file and why), held (the deletion brake, S5), or accepted
and put in force. A commit that cannot be read for a reason that may pass (a fetch cut, an
unreachable channels source: a :class:`~reconciler.errors.TransientError`) waits, PENDING, and
is read again after a backoff, never refused for it.

Every verdict is kept in the state store with its commit, so a restart decides the same: a
held commit stays held until allowed (``--allow-deletions COMMIT``, for that commit only), the
brake counts from the clusters' inventories and what the store knows runs (never from
"nothing" after a start), at the limits of the commit in force when stricter than the judged
commit's (a commit never lifts its own brake), and every commit not in force is judged, one
accepted before included; a commit the daemon died reading twice (a process that stopped
mid-read, not a read that failed) is refused by id instead of crashing it again. Replicas
sharing the store judge a commit once (the first verdict written stands, for all of them) and
move the commit in force by compare-and-set.

The details a verdict carries are the typed values of :mod:`reconciler.daemon.verdicts`,
turned into JSON only at the store's edge (:func:`~reconciler.daemon.verdicts.encode`, and
:func:`~reconciler.daemon.verdicts.detail_of` back).

The gate takes what it uses and nothing else: a ledger (the store's verdicts on commits, its
:class:`~reconciler.operations.store.CommitVerdicts` role), a reader (:class:`CommitReader`: the
source, signatures, channels and validation), a brake (the deletion brake's verdict,
:func:`reconciler.operations.running.fetch_verdict`), a clock, the metrics, a notifier, the
members (who reads a commit), and the ``taken`` callable the daemon hears a commit put in force
by; it changes the daemon's :class:`SourceState` only through its named transitions. Caller:
:class:`reconciler.daemon.service.Daemon` (its poll, under its lock).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from reconciler.core.brake import Allowance, Limits, Verdict
from reconciler.core.diagnostics import Diagnostic
from reconciler.core.head import Head
from reconciler.core.model import ConfigRepo
from reconciler.core.notifications import Notification, Notifier
from reconciler.core.signatures import SignatureVerdict
from reconciler.daemon.logs import Repeats, cause, failure_level, shown, source_failure
from reconciler.daemon.metrics import Metrics
from reconciler.daemon.reading import ReadCommit
from reconciler.daemon.signing import unverified_notification, unverified_status
from reconciler.daemon.source_state import SourceState
from reconciler.daemon.verdicts import (
    Allowed,
    Detail,
    Held,
    Reading,
    Refusal,
    Waiting,
    detail_of,
    encode,
    failed,
    held_notification,
    refused_notification,
)
from reconciler.errors import PermanentError, ReconcilerError, TransientError
from reconciler.operations.engine import owner_alive
from reconciler.operations.model import CommitRecord, CommitVerdict
from reconciler.operations.running import Judged, Running
from reconciler.operations.store import CommitVerdicts

log = logging.getLogger("reconciler.daemon")

#: A commit the daemon stopped reading this many times (a crash while parsing) is refused.
MAX_READ_ATTEMPTS = 2

_UNDECIDED = (None, CommitVerdict.READING, CommitVerdict.PENDING)


class CommitReader(Protocol):
    """Where commits are asked for and read (:class:`reconciler.daemon.reading.SourceReader`)."""

    def check(self) -> str:
        """The config repo's commit now (a :class:`~reconciler.errors.ReconcilerError` when
        it cannot be asked)."""

    def head(self, config: str) -> Head:
        """The head to be in force, given the config repo's commit ``config``."""

    def read(self, head: Head, in_force: CommitRecord | None) -> ReadCommit:
        """Read and validate ``head``, a new commit."""

    def load(self, head: Head) -> ConfigRepo:
        """The repo of ``head``, a commit accepted before."""


class Members(Protocol):
    """This replica among those sharing the store
    (:class:`~reconciler.daemon.membership.Membership`)."""

    @property
    def name(self) -> str:
        """This replica's member name."""

    def alive(self, owner: str) -> bool:
        """Whether member ``owner`` is alive."""


#: The deletion brake's verdict on what is judged, with what was read for it
#: (:func:`reconciler.operations.running.fetch_verdict` over the daemon's store and clusters).
Brake = Callable[[Judged], tuple[Verdict, Running]]


@dataclass(slots=True)
class GateParts:
    """What the gate uses besides its state (see the module docstring); the daemon may
    replace ``ledger`` and ``notifier`` after it is made (tests interleave a store)."""

    ledger: CommitVerdicts
    reader: CommitReader
    brake: Brake
    clock: Callable[[], datetime]
    metrics: Metrics
    notifier: Notifier
    members: Members
    #: The failure last logged of each subject (a repeated one is logged once).
    repeats: Repeats
    #: ``--allow-deletions``: a commit id (or prefix) that passes the brake.
    allow_deletions: str
    #: Told each commit put in force here, with its repo (rollouts, the scheduler's intervals).
    taken: Callable[[Head, ConfigRepo], None]


class CommitGate:
    """The verdicts of one daemon (see the module docstring)."""

    def __init__(self, state: SourceState, parts: GateParts) -> None:
        self.state = state
        self.parts = parts
        #: Commits (head text) this process read to the end, whatever came of it: a READING
        #: record of this replica's on one of them is no crash (:meth:`_read_attempts`).
        self._reads_ended: set[str] = set()

    # -- a poll ----------------------------------------------------------------------------------

    def poll(self) -> bool:
        """Ask the source whether the ref moved and judge a new commit; True when a commit was
        put in force here (accepted by this replica or, seen in git, by another)."""
        parts, state = self.parts, self.state
        now = parts.clock()
        state.polled(now)
        # the commit in force, read before asking git: accepting another one is a compare-and-set
        # on it, so a replica whose git is behind another's never moves the fleet back
        in_force = parts.ledger.last_accepted()
        try:
            config = parts.reader.check()  # the config repo first: a revert needs nothing else
        except ReconcilerError as error:
            self._unreachable(error)
            self.follow(in_force)
            return False
        if parts.repeats.recovered("source"):
            log.info("source works again")
        parts.metrics.poll(ok=True, now=now)
        head = parts.reader.head(config)
        seen = state.reached(head, now)
        # the fleet's commit first: a new one is judged (the brake counts) from the one in force
        followed = self.follow(in_force)
        if head in (state.commit, in_force.commit if in_force else None):
            self.update_lag(head)
            return followed
        earlier = parts.ledger.commit(head)
        if earlier is not None and self.still_stands(head, earlier):
            self.update_lag(head)
            return False  # the last one accepted stays in force (S3)
        if earlier is not None and earlier.verdict is CommitVerdict.ACCEPTED and head == seen:
            # accepted before, no longer in force, and this replica's git has not moved: the
            # fleet went past it while this replica's fetch lags (a revert moves the git view)
            self.update_lag(head)
            return followed
        state.pending(now)
        return self.consider(head, earlier, in_force)

    def _unreachable(self, error: ReconcilerError) -> None:
        """The source could not be asked (S3): said once per failure, the commit in force
        stays."""
        self.state.unreachable(str(error))
        log.log(
            self.parts.repeats.level("source", str(error), failure_level(error)),
            "source %s, keeping commit %s: %s",
            source_failure(error),
            shown(self.state.commit),
            error,
        )
        self.parts.metrics.poll(ok=False)

    def follow(self, in_force: CommitRecord | None) -> bool:
        """Put ``in_force`` (the store's commit in force, accepted by this replica or another)
        in force here when it is not yet; whether it changed. The newest commit may be refused
        or held meanwhile (S3): runtimes keep being reconciled against the one in force."""
        if in_force is None or in_force.commit == self.state.commit:
            return False
        head = in_force.commit
        try:
            repo = self.parts.reader.load(head)
        except ReconcilerError as error:
            log.warning(
                "cannot read the commit in force %s (%s): %s", head.shown, cause(error), error
            )
            return False
        self._take(head, repo)
        return True

    def _take(self, head: Head, repo: ConfigRepo) -> None:
        """Put ``head`` in force here (its runtimes are reconciled when the poll ends)."""
        log.info("commit %s in force (was %s)", head.shown, shown(self.state.commit))
        self.state.follow(head, repo)
        self.update_lag(head)
        self.parts.taken(head, repo)

    def update_lag(self, head: Head) -> None:
        """How long ``head`` waits to be in force, in the metrics (0 once it is)."""
        since = self.state.pending_since
        behind = head != self.state.commit and since is not None
        seconds = (self.parts.clock() - since).total_seconds() if behind and since else 0.0
        self.parts.metrics.source_lag(seconds)

    # -- the verdicts ----------------------------------------------------------------------------

    def allowed(self, head: Head) -> bool:
        """Whether ``--allow-deletions`` names ``head`` (a prefix of 7 characters at least)."""
        wanted = self.parts.allow_deletions
        return len(wanted) >= 7 and head.text.startswith(wanted)

    def still_stands(self, head: Head, earlier: CommitRecord) -> bool:
        """A refused commit stays refused, a held one held until allowed (across restarts and
        replicas: the verdict any of them recorded first); a waiting one waits until its next
        read is due."""
        detail = detail_of(earlier)
        if isinstance(detail, Waiting):
            self.state.wait(detail)
            return self.parts.clock() < detail.retry_at
        if isinstance(detail, Refusal):
            self.state.refuse(detail)
            return True
        if isinstance(detail, Held) and not self.allowed(head):
            self.state.hold(detail)
            self.parts.metrics.held(True)
            return True
        return False

    def consider(
        self, head: Head, earlier: CommitRecord | None, in_force: CommitRecord | None
    ) -> bool:
        """Judge ``head`` (not decided yet, or decided and due again): whether it was put in
        force here."""
        attempts = 0
        if (earlier.verdict if earlier is not None else None) in _UNDECIDED:
            attempts = self._read_attempts(head, earlier)
            if attempts > MAX_READ_ATTEMPTS:
                return self._refuse_unreadable(head, "the daemon stopped twice while reading it")
            reading = Reading(self.parts.members.name)
            standing = self._record(head, CommitVerdict.READING, detail=reading, attempts=attempts)
            if standing.verdict is not CommitVerdict.READING:  # another replica decided first
                return self._adopt(head, standing)
        try:
            return self._read_and_judge(head, in_force)
        except TransientError as error:
            return self._wait(head, error, earlier, attempts, in_force)
        finally:  # whatever the outcome, this read ended here: no crash (see _read_attempts)
            self._reads_ended.add(head.text)

    def _read_and_judge(self, head: Head, in_force: CommitRecord | None) -> bool:
        """Read ``head`` and refuse, hold or accept it. Every commit not in force is judged
        by the brake, one accepted before included (a force-push back to it, S5)."""
        try:
            read = self.parts.reader.read(head, in_force)
        except TransientError:
            raise
        except PermanentError as error:
            return self._refuse_unreadable(head, str(error))
        except Exception as error:
            return self._refuse_unreadable(head, f"internal error: {type(error).__name__}: {error}")
        head = read.head
        if read.unverified is not None:
            return self._refuse_unverified(head, read.unverified, read.where)
        if read.repo is None:
            return self._refuse(head, read.diagnostics)
        verdict = self._brake(head, read.repo)
        if verdict.held:
            return self._hold(head, verdict)
        return self.accept(head, read.repo, in_force)

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
        before = self.state.waiting
        failures = before.failures + 1 if before is not None and before.commit == head.text else 1
        if earlier is not None:
            detail = detail_of(earlier)
            if isinstance(detail, Waiting):
                failures = max(failures, detail.failures + 1)
        waiting = failed(head, str(error), self.parts.clock(), error.retry_after, failures)
        self.state.wait(waiting, str(error))
        log.warning("%s (%s)", waiting.message, cause(error))
        if attempts:  # this replica's READING record: its read ended, no crash (attempts - 1)
            self._record(head, CommitVerdict.PENDING, waiting.message, waiting, attempts - 1)
        self.follow(in_force)
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
        detail = detail_of(earlier)
        if not isinstance(detail, Reading):
            return earlier.attempts + 1
        members = self.parts.members
        reader = detail.reader
        ended_here = reader == members.name and head.text in self._reads_ended
        alive = members.alive(reader) and owner_alive(reader)
        crashed = not ended_here and (reader in ("", members.name) or not alive)
        return earlier.attempts + 1 if crashed else max(earlier.attempts, 1)

    def _adopt(self, head: Head, standing: CommitRecord) -> bool:
        """Act on the verdict another replica recorded on ``head`` first."""
        parts = self.parts
        self.state.decided(head)  # it waits no more
        if standing.verdict is CommitVerdict.ACCEPTED:
            return self.follow(parts.ledger.last_accepted())
        detail = detail_of(standing)
        if isinstance(detail, Refusal):
            self.state.refuse(detail)
            parts.metrics.commit_refused()
        elif isinstance(detail, Held):
            self.state.hold(detail)
            parts.metrics.held(True)
        self.update_lag(head)
        self.follow(parts.ledger.last_accepted())
        return False

    def _record(
        self,
        head: Head,
        verdict: CommitVerdict,
        message: str = "",
        detail: Detail | None = None,
        attempts: int = 0,
    ) -> CommitRecord:
        """Record a verdict other than ACCEPTED; the one that stands (another replica's when it
        decided first)."""
        return self._decide(head, verdict, message, detail, attempts)[0]

    def _decide(
        self,
        head: Head,
        verdict: CommitVerdict,
        message: str,
        detail: Detail | None,
        attempts: int = 0,
    ) -> tuple[CommitRecord, bool]:
        """:meth:`_record`, and whether this replica's record is the one that stands (it
        decided: it tells people, once for all replicas)."""
        now = self.parts.clock()
        record = CommitRecord(head, verdict, now, message, encode(detail), attempts)
        standing = self.parts.ledger.decide_commit(record)
        return standing, standing is record

    def _hold(self, head: Head, verdict: Verdict) -> bool:
        held = Held.of(head.text, verdict, verdict.message)
        standing, decided = self._decide(head, CommitVerdict.HELD, held.message, held)
        if standing.verdict is CommitVerdict.HELD:
            log.warning("commit %s held: %s", head.shown, standing.message)
        if decided:
            self._tell(held_notification(head, held, self.parts.clock()))
        return self._adopt(head, standing)

    def _refuse_unreadable(self, head: Head, reason: str) -> bool:
        in_force = shown(self.state.commit)
        message = f"commit {head.shown} refused: {reason}; still on {in_force}"
        refusal = Refusal(head.text, (), message)
        standing, decided = self._decide(head, CommitVerdict.REFUSED, message, refusal)
        if standing.verdict is CommitVerdict.REFUSED:
            log.error("%s", standing.message)
        if decided:
            self._tell(refused_notification(head, refusal, self.parts.clock(), reason))
        return self._adopt(head, standing)

    def _refuse_unverified(self, head: Head, verdict: SignatureVerdict, where: str = "") -> bool:
        """Refuse ``head``: it, or a commit since the one in force, lacks a good signature from
        a trusted key (:mod:`reconciler.daemon.signing`); ``where``: which repository, when
        not the config repo's."""
        message = (
            f"commit {head.shown} refused: {where}{verdict.reason}; "
            f"still on {shown(self.state.commit)}"
        )
        refusal = Refusal(head.text, (), message, tuple(verdict.to_json()))
        standing, decided = self._decide(head, CommitVerdict.REFUSED, message, refusal)
        if standing.verdict is CommitVerdict.REFUSED:
            log.error("%s", standing.message)
        if decided:
            self.parts.metrics.commit_unverified(unverified_status(verdict))
            self._tell(unverified_notification(head, refusal, verdict, self.parts.clock()))
        return self._adopt(head, standing)

    def _refuse(self, head: Head, diagnostics: tuple[Diagnostic, ...]) -> bool:
        message = (
            f"commit {head.shown} refused: {len(diagnostics)} error(s); "
            f"still on {shown(self.state.commit)}"
        )
        refusal = Refusal(head.text, tuple(d.to_json() for d in diagnostics), message)
        standing, decided = self._decide(head, CommitVerdict.REFUSED, message, refusal)
        if standing.verdict is CommitVerdict.REFUSED:
            for diagnostic in diagnostics:
                log.error("commit %s refused: %s", head.shown, diagnostic.format())
        if decided:
            first = diagnostics[0].format() if diagnostics else ""
            self._tell(refused_notification(head, refusal, self.parts.clock(), first))
        return self._adopt(head, standing)

    def _tell(self, notification: Notification) -> None:
        """Hand ``notification`` to the daemon's notifier (it queues; it never raises for a
        delivery, and a notifier's bug never changes a verdict)."""
        try:
            self.parts.notifier.notify(notification)
        except Exception as error:
            log.error("notification %s not queued: %s", notification.kind.value, error)

    def accept(self, head: Head, repo: ConfigRepo, in_force: CommitRecord | None) -> bool:
        """Make ``head`` the commit in force, in the store (if no other replica moved it since
        ``in_force`` was read) and here; else take up the one the store has."""
        parts = self.parts
        expected = in_force.commit if in_force is not None else None
        allowed = Allowed(parts.allow_deletions if self.allowed(head) else "")
        record = CommitRecord(head, CommitVerdict.ACCEPTED, parts.clock(), detail=encode(allowed))
        now_in_force = parts.ledger.accept_commit(record, expected)
        if now_in_force is None or now_in_force.commit != head:
            standing = parts.ledger.commit(head)
            if standing is not None and standing.verdict is not CommitVerdict.ACCEPTED:
                return self._adopt(head, standing)  # another replica held or refused it first
            log.info(
                "commit %s not taken up: another replica put %s in force meanwhile",
                head.shown,
                now_in_force.commit.shown if now_in_force else "nothing",
            )
            return self.follow(now_in_force)
        self.state.accept()
        parts.metrics.held(False)
        self._take(head, repo)
        return True

    def _brake(self, head: Head, repo: ConfigRepo) -> Verdict:
        """S5, counted from what runs: the clusters' inventories, the store's records and the
        commit in force (its modules, and the CRDs it ships: a chart's render for each runtime
        included); at the stricter of the limits of the commit in force and the judged
        commit's own (the defaults when none is in force: a new store). Only the clusters of
        the runtimes ``repo`` changes from the commit in force are read (every one when none
        is in force)."""
        current = self.state.repo
        allowance = Allowance(count=sys.maxsize) if self.allowed(head) else Allowance()
        judged = Judged(
            repo,
            allowance,
            Limits.of(current.settings) if current is not None else None,
            current,
            allow_with=f"--allow-deletions {head.shown} (the daemon's flag: this commit only)",
        )
        verdict, running = self.parts.brake(judged)
        for name, error in sorted(running.unread.items()):
            log.warning("brake: runtime %s not read, counted from the store: %s", name, error)
        return verdict
