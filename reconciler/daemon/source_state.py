"""What the daemon knows of its source, changed only through named transitions.

The commit-verdict protocol (:mod:`reconciler.daemon.commits`) is the one writer: a poll is
recorded (:meth:`SourceState.polled`), the source found unreachable or reached, a new commit
waits, is refused, held or accepted, and a commit is followed (put in force here). Every field
is read-only to everyone else (``/status``, the status page, the metrics), so a reader never
sees a half-made verdict written by hand elsewhere.

Callers: :mod:`reconciler.daemon.commits` (writes) and :mod:`reconciler.daemon.service` (its
wiring; ``/status``, the status page and the metrics read it there).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import datetime

from reconciler.core.head import Head
from reconciler.core.model import ConfigRepo
from reconciler.core.unchanged import UnchangedSince
from reconciler.daemon.verdicts import Held, Refusal, Waiting


class SourceState:
    """What the daemon knows of its source: the commit in force and its repo, the last poll
    and successful check, the source's error, and the newest commit's verdict while it is not
    in force (refused, held, or waiting)."""

    __slots__ = (
        "_commit",
        "_error",
        "_held",
        "_last_poll",
        "_last_success",
        "_pending_since",
        "_refused",
        "_repo",
        "_seen",
        "_unchanged",
        "_waiting",
    )

    def __init__(self) -> None:
        self._commit: Head | None = None
        self._repo: ConfigRepo | None = None
        self._last_poll: datetime | None = None
        self._last_success: datetime | None = None
        self._error = ""
        self._refused: Refusal | None = None
        self._held: Held | None = None
        self._waiting: Waiting | None = None
        self._seen: Head | None = None
        self._pending_since: datetime | None = None
        self._unchanged = UnchangedSince()

    # -- what is known ----------------------------------------------------------------------------

    @property
    def commit(self) -> Head | None:
        """The commit in force here."""
        return self._commit

    @property
    def repo(self) -> ConfigRepo | None:
        """The repo of the commit in force."""
        return self._repo

    @property
    def last_poll(self) -> datetime | None:
        """When the source was last asked."""
        return self._last_poll

    @property
    def last_success(self) -> datetime | None:
        """When the source last answered."""
        return self._last_success

    @property
    def error(self) -> str:
        """Why the source could not be asked or a commit not read ("" when it could)."""
        return self._error

    @property
    def refused(self) -> Refusal | None:
        """The newest commit's refusal, while the last good one stays in force."""
        return self._refused

    @property
    def held(self) -> Held | None:
        """The newest commit held by the deletion brake."""
        return self._held

    @property
    def waiting(self) -> Waiting | None:
        """The newest commit, while reading it fails in a way that may pass (PENDING)."""
        return self._waiting

    @property
    def seen(self) -> Head | None:
        """The head this replica's git showed at its last poll (None before one, or when
        reading it failed and is to be tried again): a commit accepted before and no longer in
        force is taken up again (a revert) only when this replica's own git moved to it."""
        return self._seen

    @property
    def pending_since(self) -> datetime | None:
        """Since when a newer commit than the one in force waits to be put in force."""
        return self._pending_since

    @property
    def unchanged(self) -> UnchangedSince:
        """The commits each runtime's desired state stayed the same through (the status page
        shows a runtime the newer ones did not change in sync at the commit in force)."""
        return self._unchanged

    # -- transitions ------------------------------------------------------------------------------

    def polled(self, now: datetime) -> None:
        """A poll starts at ``now``."""
        self._last_poll = now

    def unreachable(self, error: str) -> None:
        """The source could not be asked: ``error`` is reported, the commit in force stays."""
        self._error = error

    def reached(self, head: Head, now: datetime) -> Head | None:
        """The source answered ``head`` at ``now``; the head seen before. A commit that waited
        and is no longer the head waits no more (git moved on, or back)."""
        seen, self._seen = self._seen, head
        self._error = ""
        self._last_success = now
        if self._waiting is not None and self._waiting.commit != head.text:
            self._waiting = None
        return seen

    def pending(self, now: datetime) -> None:
        """A newer commit than the one in force is to be judged (since ``now`` unless it was
        already)."""
        self._pending_since = self._pending_since or now

    def wait(self, waiting: Waiting, error: str | None = None) -> None:
        """The newest commit waits (PENDING): reading it failed now with ``error``, a reason
        that may pass, and it is read again at the next poll (even a revert: nothing counts as
        seen); without ``error``, the wait recorded before stands."""
        self._waiting = waiting
        if error is not None:
            self._error = error
            self._seen = None

    def decided(self, head: Head) -> None:
        """``head`` has a verdict: it waits no more."""
        if self._waiting is not None and self._waiting.commit == head.text:
            self._waiting = None

    def refuse(self, refusal: Refusal) -> None:
        """The newest commit is refused; the last good one stays in force."""
        self._refused = refusal

    def hold(self, held: Held) -> None:
        """The newest commit is held by the deletion brake."""
        self._held = held

    def accept(self) -> None:
        """The newest commit was accepted here: no refusal, hold or wait stands any more."""
        self._refused = self._held = self._waiting = None
        self._pending_since = None

    def follow(self, head: Head, repo: ConfigRepo) -> None:
        """``head`` (of ``repo``) is in force here."""
        self._commit, self._repo = head, repo

    def unchanged_through(
        self, before: Head, head: Head, runtimes: Iterable[str], changed: Collection[str]
    ) -> None:
        """``head`` followed ``before``; of ``runtimes`` (every one of ``head``) it changes
        ``changed``."""
        self._unchanged = self._unchanged.advance(before.text, head.text, runtimes, changed)
