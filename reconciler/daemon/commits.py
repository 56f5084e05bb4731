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
:func:`~reconciler.daemon.verdicts.detail_of` back). Caller:
:class:`reconciler.daemon.service.Daemon` (its poll).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from reconciler.core.brake import (
    Allowance,
    Limits,
    Verdict,
    count_deletions,
    judge,
    limits_for,
    shipped_by,
    with_unread,
)
from reconciler.core.diagnostics import Diagnostic
from reconciler.core.head import Head
from reconciler.core.model import ConfigRepo
from reconciler.core.notifications import Notification
from reconciler.core.resolve import resolve_runtime
from reconciler.core.signatures import SignatureVerdict
from reconciler.daemon.logs import cause, shown
from reconciler.daemon.signing import unverified_notification, unverified_status
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
from reconciler.errors import PermanentError, TransientError
from reconciler.operations.engine import owner_alive
from reconciler.operations.model import CommitRecord, CommitVerdict
from reconciler.operations.running import fetch_running
from reconciler.source.loader import load_repo

if TYPE_CHECKING:
    from reconciler.daemon.service import Daemon

log = logging.getLogger("reconciler.daemon")

#: A commit the daemon stopped reading this many times (a crash while parsing) is refused.
MAX_READ_ATTEMPTS = 2

_UNDECIDED = (None, CommitVerdict.READING, CommitVerdict.PENDING)


class CommitGate:
    """The verdicts of one daemon (see the module docstring); it reads the daemon's wiring
    (store, source, clusters) at each use, as the daemon has it then."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        #: Commits (head text) this process read to the end, whatever came of it: a READING
        #: record of this replica's on one of them is no crash (:meth:`_read_attempts`).
        self._reads_ended: set[str] = set()

    def allowed(self, head: Head) -> bool:
        """Whether ``--allow-deletions`` names ``head`` (a prefix of 7 characters at least)."""
        wanted = self.daemon.options.allow_deletions
        return len(wanted) >= 7 and head.text.startswith(wanted)

    def still_stands(self, head: Head, earlier: CommitRecord) -> bool:
        """A refused commit stays refused, a held one held until allowed (across restarts and
        replicas: the verdict any of them recorded first); a waiting one waits until its next
        read is due."""
        state, detail = self.daemon.state, detail_of(earlier)
        if isinstance(detail, Waiting):
            state.waiting = detail
            return self.daemon.clock() < detail.retry_at
        if isinstance(detail, Refusal):
            state.refused = detail
            return True
        if isinstance(detail, Held) and not self.allowed(head):
            state.held = detail
            self.daemon.metrics.held(True)
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
            reading = Reading(self.daemon.membership.name)
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
        daemon = self.daemon
        try:
            revision = daemon.source.revision(head.config)
            unverified = daemon.signing.verify_head(revision, head, in_force)
            if unverified is not None:
                return self._refuse_unverified(head, unverified)
            options, head = daemon.channels_repo.read_options(revision, head)
            channels_unverified = daemon.signing.verify_channels(head, in_force)
            if channels_unverified is not None:
                return self._refuse_unverified(head, *channels_unverified)
            validation = load_repo(
                daemon.source.path or ".", options, tree=revision.tree, renderer=daemon.renderer
            )
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
        return self.accept(head, validation.repo, in_force)

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
        state = self.daemon.state
        before = state.waiting
        failures = before.failures + 1 if before is not None and before.commit == head.text else 1
        if earlier is not None:
            detail = detail_of(earlier)
            if isinstance(detail, Waiting):
                failures = max(failures, detail.failures + 1)
        waiting = failed(head, str(error), self.daemon.clock(), error.retry_after, failures)
        state.error = str(error)
        state.waiting = waiting
        state.seen = None  # read again at the next poll, even a revert
        log.warning("%s (%s)", waiting.message, cause(error))
        if attempts:  # this replica's READING record: its read ended, no crash (attempts - 1)
            self._record(head, CommitVerdict.PENDING, waiting.message, waiting, attempts - 1)
        self.daemon.follow(in_force)
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
        membership = self.daemon.membership
        reader = detail.reader
        ended_here = reader == membership.name and head.text in self._reads_ended
        alive = membership.alive(reader) and owner_alive(reader)
        crashed = not ended_here and (reader in ("", membership.name) or not alive)
        return earlier.attempts + 1 if crashed else max(earlier.attempts, 1)

    def _adopt(self, head: Head, standing: CommitRecord) -> bool:
        """Act on the verdict another replica recorded on ``head`` first."""
        daemon, state = self.daemon, self.daemon.state
        if state.waiting is not None and state.waiting.commit == head.text:
            state.waiting = None  # decided: it waits no more
        if standing.verdict is CommitVerdict.ACCEPTED:
            return daemon.follow(daemon.store.last_accepted())
        detail = detail_of(standing)
        if isinstance(detail, Refusal):
            state.refused = detail
            daemon.metrics.commit_refused()
        elif isinstance(detail, Held):
            state.held = detail
            daemon.metrics.held(True)
        daemon.update_lag(head)
        daemon.follow(daemon.store.last_accepted())
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
        now = self.daemon.clock()
        record = CommitRecord(head, verdict, now, message, encode(detail), attempts)
        standing = self.daemon.store.decide_commit(record)
        return standing, standing is record

    def _hold(self, head: Head, verdict: Verdict) -> bool:
        held = Held.of(head.text, verdict, verdict.message)
        standing, decided = self._decide(head, CommitVerdict.HELD, held.message, held)
        if standing.verdict is CommitVerdict.HELD:
            log.warning("commit %s held: %s", head.shown, standing.message)
        if decided:
            self._tell(held_notification(head, held, self.daemon.clock()))
        return self._adopt(head, standing)

    def _refuse_unreadable(self, head: Head, reason: str) -> bool:
        in_force = shown(self.daemon.state.commit)
        message = f"commit {head.shown} refused: {reason}; still on {in_force}"
        refusal = Refusal(head.text, (), message)
        standing, decided = self._decide(head, CommitVerdict.REFUSED, message, refusal)
        if standing.verdict is CommitVerdict.REFUSED:
            log.error("%s", standing.message)
        if decided:
            self._tell(refused_notification(head, refusal, self.daemon.clock(), reason))
        return self._adopt(head, standing)

    def _refuse_unverified(self, head: Head, verdict: SignatureVerdict, where: str = "") -> bool:
        """Refuse ``head``: it, or a commit since the one in force, lacks a good signature from
        a trusted key (:mod:`reconciler.daemon.signing`); ``where``: which repository, when
        not the config repo's."""
        message = (
            f"commit {head.shown} refused: {where}{verdict.reason}; "
            f"still on {shown(self.daemon.state.commit)}"
        )
        refusal = Refusal(head.text, (), message, tuple(verdict.to_json()))
        standing, decided = self._decide(head, CommitVerdict.REFUSED, message, refusal)
        if standing.verdict is CommitVerdict.REFUSED:
            log.error("%s", standing.message)
        if decided:
            self.daemon.metrics.commit_unverified(unverified_status(verdict))
            self._tell(unverified_notification(head, refusal, verdict, self.daemon.clock()))
        return self._adopt(head, standing)

    def _refuse(self, head: Head, diagnostics: tuple[Diagnostic, ...]) -> bool:
        message = (
            f"commit {head.shown} refused: {len(diagnostics)} error(s); "
            f"still on {shown(self.daemon.state.commit)}"
        )
        refusal = Refusal(head.text, tuple(d.to_json() for d in diagnostics), message)
        standing, decided = self._decide(head, CommitVerdict.REFUSED, message, refusal)
        if standing.verdict is CommitVerdict.REFUSED:
            for diagnostic in diagnostics:
                log.error("commit %s refused: %s", head.shown, diagnostic.format())
        if decided:
            first = diagnostics[0].format() if diagnostics else ""
            self._tell(refused_notification(head, refusal, self.daemon.clock(), first))
        return self._adopt(head, standing)

    def _tell(self, notification: Notification) -> None:
        """Hand ``notification`` to the daemon's notifier (it queues; it never raises for a
        delivery, and a notifier's bug never changes a verdict)."""
        try:
            self.daemon.notifier.notify(notification)
        except Exception as error:
            log.error("notification %s not queued: %s", notification.kind.value, error)

    def accept(self, head: Head, repo: ConfigRepo, in_force: CommitRecord | None) -> bool:
        """Make ``head`` the commit in force, in the store (if no other replica moved it since
        ``in_force`` was read) and here; else take up the one the store has."""
        daemon, state = self.daemon, self.daemon.state
        expected = in_force.commit if in_force is not None else None
        allowed = Allowed(daemon.options.allow_deletions if self.allowed(head) else "")
        record = CommitRecord(head, CommitVerdict.ACCEPTED, daemon.clock(), detail=encode(allowed))
        now_in_force = daemon.store.accept_commit(record, expected)
        if now_in_force is None or now_in_force.commit != head:
            standing = daemon.store.commit(head)
            if standing is not None and standing.verdict is not CommitVerdict.ACCEPTED:
                return self._adopt(head, standing)  # another replica held or refused it first
            log.info(
                "commit %s not taken up: another replica put %s in force meanwhile",
                head.shown,
                now_in_force.commit.shown if now_in_force else "nothing",
            )
            return daemon.follow(now_in_force)
        state.refused = state.held = None
        state.waiting = None
        state.pending_since = None
        daemon.metrics.held(False)
        daemon.take(head, repo)
        return True

    def _brake(self, head: Head, repo: ConfigRepo) -> Verdict:
        """S5, counted from what runs: the clusters' inventories, the store's records and the
        commit in force (its modules, and the CRDs it ships: a chart's render for each runtime
        included); at the stricter of the limits of the commit in force and the judged
        commit's own (the defaults when none is in force: a new store)."""
        daemon = self.daemon
        current = daemon.state.repo
        settings = current.settings if current is not None else repo.settings
        running = fetch_running(
            daemon.store,
            repo,
            daemon.connect,
            system_namespace=settings.system_namespace,
            workers=daemon.options.workers,
        )
        for name, error in sorted(running.unread.items()):
            log.warning("brake: runtime %s not read, counted from the store: %s", name, error)
        known, crds = running.modules, _crds_of(running.crds)
        if current is not None:
            for name, runtime in current.runtimes.items():
                modules = known.setdefault(name, {})
                for module in resolve_runtime(current, runtime).modules:
                    modules.setdefault(module.name, module.version)
            for name, shipped in shipped_by(current).items():
                for module_name, names in shipped.items():
                    crds.setdefault(name, {}).setdefault(module_name, set()).update(names)
        allowance = Allowance(count=sys.maxsize) if self.allowed(head) else Allowance()
        in_force = Limits.of(current.settings) if current is not None else None
        verdict = judge(
            count_deletions(known, repo, crds=crds),
            limits_for(repo.settings, in_force),
            allowance,
            Limits.of(repo.settings),
            allow_with=f"--allow-deletions {head.shown} (the daemon's flag: this commit only)",
        )
        return with_unread(verdict, running.unread)


def _crds_of(listed: Mapping[str, Mapping[str, frozenset[str]]]) -> dict[str, dict[str, set[str]]]:
    """The CRDs the inventories list (runtime -> module -> names), to add those of the commit in
    force to."""
    return {name: {m: set(c) for m, c in modules.items()} for name, modules in listed.items()}
