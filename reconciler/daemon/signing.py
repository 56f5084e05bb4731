"""The daemon's signed-commit check: a new commit is read only when it (and, with
``--verify-every-commit``, every commit since the one in force) carries a good signature from a
key the daemon trusts (``--trusted-ssh-signers``, ``--trusted-openpgp-keys``,
``--trusted-keys-dir``), and so does the commit of its channels repository
(``channelsFrom.git``, the same keys); else it is refused as a whole (C7) and people are told:
the log, the refusal in ``/status`` (with each commit to blame),
``reconciler_commits_unverified_total`` and a ``commit.refused`` notification. The commit in
force stays.

A key that cannot be read (a Secret mount being updated) makes the commit wait, never refused
for it (:class:`~reconciler.errors.TransientError`).

:class:`Signing` takes the trusted keys, a way to fetch a commit into the config repo's git, and
the channels source in force; nothing else of the daemon.

Caller: :class:`reconciler.daemon.commits.CommitGate` (reading a commit).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from reconciler.core.head import Head
from reconciler.core.notifications import Notification
from reconciler.core.signatures import SignatureVerdict
from reconciler.daemon.reading import Source
from reconciler.daemon.verdicts import Refusal, refused_notification
from reconciler.errors import SourceError, TransientError
from reconciler.operations.model import CommitRecord
from reconciler.source.git import Revision
from reconciler.source.signatures import TrustedKeys, has_commit, verify_commits


class Signing:
    """The signed-commit check of one daemon (see the module docstring)."""

    def __init__(
        self,
        keys: TrustedKeys | None,
        fetch: Callable[[str], Revision],
        channels: Callable[[], Source | None],
    ) -> None:
        #: The keys a commit must be signed with (None: any commit is read).
        self.keys = keys
        #: Reads a commit of the config repo (fetching it into this replica's git).
        self.fetch = fetch
        #: The channels source in force (``channelsFrom.git``), if any.
        self.channels = channels

    def verify_head(
        self, revision: Revision, head: Head, in_force: CommitRecord | None
    ) -> SignatureVerdict | None:
        """The signature verdict on ``head`` (read as ``revision``) when the daemon verifies
        commits and it is refused; None when it passes or nothing is verified."""
        keys = self.keys
        since = in_force.commit.config if in_force is not None else None
        if keys is None or not keys.configured or since == head.config:
            return None  # nothing to verify, or the config commit is in force (channels moved)
        if revision.git_dir is None:
            raise SourceError(
                f"commit {head.shown}: not read from git, its signature cannot be checked"
            )
        if since is not None and keys.every_commit:
            self._fetch_in_force(since)
        verdict = verify_commits(revision.git_dir, head.config, keys, since)
        return None if verdict.accepted else verdict

    def verify_channels(
        self, head: Head, in_force: CommitRecord | None
    ) -> tuple[SignatureVerdict, str] | None:
        """The signature verdict on the channels repository's commit of ``head``
        (``channelsFrom.git``, the same trusted keys) when the daemon verifies commits and it
        is refused, with the repository to name (``channels URL: ``); None when it passes, or
        there is nothing to verify. With every commit, those since the channels commit in
        force, when that one is of this repository (else the head alone, as after a start)."""
        keys = self.keys
        source = self.channels()
        since = in_force.commit.channels if in_force is not None else None
        if keys is None or not keys.configured or source is None or head.channels is None:
            return None
        if since == head.channels:
            return None  # in force already (the config repo moved)
        revision = source.revision(head.channels)  # read_options fetched it: no remote call
        if revision.git_dir is None:
            raise SourceError(f"channels commit {head.channels[:12]}: not read from git")
        if since is not None and not has_commit(revision.git_dir, since):
            since = None  # another channels repository was in force
        verdict = verify_commits(revision.git_dir, head.channels, keys, since)
        return None if verdict.accepted else (verdict, f"channels {source.shown}: ")

    def _fetch_in_force(self, since: str) -> None:
        """Make sure the commit in force is in this replica's git (another replica may have
        accepted it): the commits since it are known only then."""
        try:
            self.fetch(since)
        except SourceError as error:
            raise TransientError(
                f"the commits since {since[:12]} (in force) cannot be listed: {error}",
                retry_after=60.0,
            ) from None


def unverified_status(verdict: SignatureVerdict) -> str:
    """The status of the oldest commit to blame (the metric's label)."""
    return str(verdict.bad[-1].status) if verdict.bad else "Unchecked"


def unverified_notification(
    head: Head, refusal: Refusal, verdict: SignatureVerdict, at: datetime
) -> Notification:
    """What people are told of a commit refused for a signature: a refusal's notification, with
    the status, the commit to blame and its key."""
    told = refused_notification(head, refusal, at, verdict.reason)
    details: dict[str, str | int] = {**told.details, "status": unverified_status(verdict)}
    if verdict.bad:
        details["blame"] = verdict.bad[-1].commit
        if verdict.bad[-1].key:
            details["key"] = verdict.bad[-1].key
    return replace(told, details=details)
