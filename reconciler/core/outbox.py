"""Notifications on their way out, as values (pure): the outbox's entries and its interface.

An :class:`Outgoing` is one notification bound for one receiver (an endpoint of the settings in
force when it was queued, or the daemon's Kubernetes Event), with the tries its delivery gets.
The daemon keeps them in its state store (the outbox) before it sends them and marks each
delivered after, so a crash or a restart loses none and sends none twice; replicas sharing the
store claim them (:meth:`Outbox.claim_notifications`) so that one sends each.

Callers: the delivery (``reconciler.notify.delivery``), the state store that implements
:class:`Outbox` (``reconciler.operations.store``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from reconciler.core.endpoints import Endpoint, NotificationSettings
from reconciler.core.notifications import Notification


@dataclass(frozen=True, slots=True)
class Outgoing:
    """``notification`` bound for ``endpoint`` (``None``: the daemon's Kubernetes Event),
    tried up to ``attempts`` times; ``id`` names it in the outbox. Nothing here is secret: an
    endpoint names where its secrets are kept, never their values."""

    id: str
    notification: Notification
    endpoint: Endpoint | None
    attempts: int


def outgoing(
    notification: Notification,
    settings: NotificationSettings,
    events: bool,
    new_id: Callable[[], str],
) -> list[Outgoing]:
    """``notification`` for each endpoint of ``settings`` that wants its kind, in their order,
    then for the Kubernetes Event when ``settings`` asks for one and ``events`` (the daemon
    records Events); ids from ``new_id``."""
    made = [
        Outgoing(new_id(), notification, endpoint, settings.attempts)
        for endpoint in settings.endpoints
        if endpoint.wants(notification.kind)
    ]
    if settings.kubernetes_events and events:
        made.append(Outgoing(new_id(), notification, None, settings.attempts))
    return made


class Outbox(Protocol):
    """Where notifications wait until they are delivered (the state store)."""

    def add_notifications(self, items: Sequence[Outgoing], now: datetime) -> None:
        """Keep ``items``, in their order, after every one kept before (one transaction)."""

    def claim_notifications(
        self,
        owner: str,
        now: datetime,
        lease_until: datetime,
        alive: Callable[[str], bool],
        limit: int,
    ) -> list[Outgoing]:
        """The oldest waiting notifications, at most ``limit``, now ``owner``'s until
        ``lease_until``: those nobody holds, ``owner`` held, or whose holder's claim ran out or
        who is not ``alive``; up to the first one another live holder keeps (so that they go
        out in order, one sender at a time). Two claimers never get the same one."""

    def finish_notification(self, item_id: str, owner: str, delivered: bool, now: datetime) -> bool:
        """Mark ``owner``'s claimed notification delivered (or given up) at ``now``; whether it
        was still ``owner``'s to mark."""

    def release_notifications(self, owner: str, item_ids: Sequence[str]) -> None:
        """Give ``owner``'s claims of ``item_ids`` up, not sent: anyone may send them now."""

    def waiting_notifications(self) -> int:
        """How many notifications wait to be sent (claimed or not)."""
