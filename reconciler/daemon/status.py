"""The daemon's ``/status`` document: the source (commit in force, last poll, a refused, held or
waiting commit and why), the channels source, this replica and its fellow members, and every
runtime with its modules, state and reason (as ``reconciler status --format json`` shows it),
plus what only this process knows: the error of its last reconcile of each runtime and the
runtime's owner, the kinds its watches could not open everywhere (narrowed to some namespaces,
or refused: why and the grant that fixes it), how the notifications go, and the newest
rollouts with their waves, progress and halt reason. Masked whole on its way out (S4).

It takes the store, this replica's membership, a clock, the config source, the state of the
source and the channels source, whether the daemon is ready, each runtime's last error, the
watches and the notifier; nothing else of the daemon.

Caller: :meth:`reconciler.daemon.service.Daemon.status`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Protocol

from reconciler.core.head import Head, head_text
from reconciler.core.model import OUTPUT_API_VERSION, ConfigRepo
from reconciler.core.notifications import Notifier
from reconciler.core.redaction import mask_all
from reconciler.daemon.channels import Channels
from reconciler.daemon.membership import Membership
from reconciler.daemon.reading import Source
from reconciler.daemon.verdicts import Held, Refusal, Waiting
from reconciler.daemon.watches import Watches
from reconciler.errors import ReconcilerError
from reconciler.notify.delivery import Delivery
from reconciler.operations.rollouts import rollout_document
from reconciler.operations.store import MemberLeases, RolloutRecords, StatusReader, load_statuses


class StatusStore(StatusReader, RolloutRecords, MemberLeases, Protocol):
    """What ``/status`` reads of the store: the runtimes' statuses, the newest rollouts and
    the members."""


class SourceView(Protocol):
    """What ``/status`` reads of the daemon's source state (its commit in force and repo, its
    polls, and the newest commit's verdict while it is not in force)."""

    @property
    def commit(self) -> Head | None:
        """The commit in force here."""

    @property
    def repo(self) -> ConfigRepo | None:
        """The repo of the commit in force."""

    @property
    def last_poll(self) -> datetime | None:
        """When the source was last asked."""

    @property
    def last_success(self) -> datetime | None:
        """When the source last answered."""

    @property
    def error(self) -> str:
        """Why the source could not be asked ("" when it could)."""

    @property
    def refused(self) -> Refusal | None:
        """The newest commit's refusal."""

    @property
    def held(self) -> Held | None:
        """The newest commit held by the deletion brake."""

    @property
    def waiting(self) -> Waiting | None:
        """The newest commit, while reading it fails in a way that may pass."""


class Status:
    """``/status`` of one daemon (see the module docstring)."""

    def __init__(
        self,
        store: StatusStore,
        membership: Membership,
        clock: Callable[[], datetime],
        *,
        source: Source,
        state: Callable[[], SourceView],
        ready: Callable[[], bool],
        channels: Channels,
        errors: Mapping[str, ReconcilerError],
        watches: Watches,
        notifier: Notifier,
    ) -> None:
        self.store = store
        self.membership = membership
        self.clock = clock
        #: The config source (its URL without credentials, and path).
        self.source = source
        #: The source's state now.
        self.state = state
        #: Whether the daemon is ready (``/readyz``).
        self.ready = ready
        self.channels = channels
        #: The error of this process's last run of each runtime.
        self.errors = errors
        self.watches = watches
        #: How the notifications go, when it is a delivery.
        self.notifier = notifier

    def document(self) -> dict[str, Any]:
        """``/status`` now."""
        state = self.state()
        return mask_all(  # S4: whatever an error message carried
            {
                "apiVersion": OUTPUT_API_VERSION,
                "kind": "DaemonStatus",
                "source": self._source(state),
                "channels": self.channels.status(state.commit),
                "ready": self.ready(),
                "member": self.membership.name,
                "members": self._members(),
                "runtimes": self._runtimes(state),
                "notifications": self._notifications(),
                "rollouts": [rollout_document(r) for r in self.store.rollout_summaries(limit=5)],
            }
        )

    def _notifications(self) -> dict[str, Any] | None:
        """How the notifications go (each endpoint's last outcome); ``None`` without a
        delivery."""
        notifier = self.notifier
        return notifier.status() if isinstance(notifier, Delivery) else None

    def _source(self, state: SourceView) -> dict[str, Any]:
        return {
            "url": self.source.shown,
            "path": self.source.path,
            "commit": head_text(state.commit),
            "lastPoll": state.last_poll.isoformat() if state.last_poll else None,
            "lastSuccessfulPoll": state.last_success.isoformat() if state.last_success else None,
            "error": state.error,
            "refused": state.refused.to_json() if state.refused is not None else None,
            "held": state.held.to_json() if state.held is not None else None,
            "waiting": state.waiting.to_json() if state.waiting is not None else None,
        }

    def _runtimes(self, state: SourceView) -> list[dict[str, Any]]:
        """Each runtime's status, with the error of this process's last reconcile of it (""
        when none) and its owner among the members."""
        repo = state.repo
        in_git = {n: r.suspend for n, r in repo.runtimes.items()} if repo is not None else None
        statuses = load_statuses(self.store, git_suspended=in_git)
        owners = self.membership.owners(sorted({s.current.runtime for s in statuses}))
        errors = self.errors
        documents = []
        for status in statuses:
            runtime = status.current.runtime
            error = errors.get(runtime)
            documents.append(
                status.to_json()
                | {
                    "error": str(error) if error is not None else "",
                    "owner": owners.get(runtime, ""),
                }
                | {"drift": self.watches.status(runtime)}
                | {"watches": self.watches.problems(runtime)}
            )
        return documents

    def _members(self) -> list[dict[str, Any]]:
        """The replicas sharing the store, each with its last heartbeat."""
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
