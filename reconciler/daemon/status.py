"""The daemon's ``/status`` document: the source (commit in force, last poll, a refused, held or
waiting commit and why), the channels source, this replica and its fellow members, and every
runtime with its modules, state and reason (as ``reconciler status --format json`` shows it),
plus what only this process knows: the error of its last reconcile of each runtime and the
runtime's owner, the kinds its watches could not open everywhere (narrowed to some namespaces,
or refused: why and the grant that fixes it), how the notifications go, and the newest
rollouts with their waves, progress and halt reason. Masked whole on its way out (S4).

Caller: :meth:`reconciler.daemon.service.Daemon.status`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reconciler.core.head import head_text
from reconciler.core.model import OUTPUT_API_VERSION
from reconciler.core.redaction import mask_all
from reconciler.notify.delivery import Delivery
from reconciler.operations.rollouts import rollout_document
from reconciler.operations.store import load_statuses

if TYPE_CHECKING:
    from reconciler.daemon.service import Daemon


def status_document(daemon: Daemon) -> dict[str, Any]:
    """``/status`` of ``daemon`` now."""
    return mask_all(  # S4: whatever an error message carried
        {
            "apiVersion": OUTPUT_API_VERSION,
            "kind": "DaemonStatus",
            "source": _source(daemon),
            "channels": daemon.channels_repo.status(daemon.state.commit),
            "ready": daemon.ready,
            "member": daemon.membership.name,
            "members": _members(daemon),
            "runtimes": _runtimes(daemon),
            "notifications": _notifications(daemon),
            "rollouts": [rollout_document(r) for r in daemon.store.rollout_summaries(limit=5)],
        }
    )


def _notifications(daemon: Daemon) -> dict[str, Any] | None:
    """How the notifications go (each endpoint's last outcome); ``None`` without a delivery."""
    notifier = daemon.notifier
    return notifier.status() if isinstance(notifier, Delivery) else None


def _source(daemon: Daemon) -> dict[str, Any]:
    state = daemon.state
    return {
        "url": daemon.source.shown,
        "path": daemon.source.path,
        "commit": head_text(state.commit),
        "lastPoll": state.last_poll.isoformat() if state.last_poll else None,
        "lastSuccessfulPoll": state.last_success.isoformat() if state.last_success else None,
        "error": state.error,
        "refused": state.refused.to_json() if state.refused is not None else None,
        "held": state.held.to_json() if state.held is not None else None,
        "waiting": state.waiting.to_json() if state.waiting is not None else None,
    }


def _runtimes(daemon: Daemon) -> list[dict[str, Any]]:
    """Each runtime's status, with the error of this process's last reconcile of it ("" when
    none) and its owner among the members."""
    repo = daemon.state.repo
    in_git = {n: r.suspend for n, r in repo.runtimes.items()} if repo is not None else None
    statuses = load_statuses(daemon.store, git_suspended=in_git)
    owners = daemon.membership.owners(sorted({s.current.runtime for s in statuses}))
    errors = daemon.runtime_errors
    documents = []
    for status in statuses:
        runtime = status.current.runtime
        error = errors.get(runtime)
        documents.append(
            status.to_json()
            | {"error": str(error) if error is not None else "", "owner": owners.get(runtime, "")}
            | {"drift": daemon.watches.status(runtime)}
            | {"watches": daemon.watches.problems(runtime)}
        )
    return documents


def _members(daemon: Daemon) -> list[dict[str, Any]]:
    """The replicas sharing the store, each with its last heartbeat."""
    now, lease = daemon.clock(), daemon.membership.lease
    return [
        {
            "name": member.name,
            "epoch": member.epoch,
            "heartbeat": member.heartbeat.isoformat(),
            "live": member.live(now, lease),
        }
        for member in daemon.store.members()
    ]
