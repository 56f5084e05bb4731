"""A daemon's git source for tests that never reach git: the daemon is built, its state set by
hand, and asked for its status or to reconcile what it already holds."""

from __future__ import annotations

from reconciler.source.git import Revision


class UnusedSource:
    """A source that is never asked: ``check`` and ``revision`` raise."""

    path = "fleet"
    shown = "git://127.0.0.1/remote.git"

    def check(self) -> str:
        raise NotImplementedError

    def revision(self, commit: str) -> Revision:
        raise NotImplementedError
