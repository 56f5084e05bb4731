"""The delivery's side of the outbox (:class:`~reconciler.core.outbox.Outbox`, the daemon's
state store): :class:`Claimant`, the outbox and who this worker is among the replicas sharing
it; :class:`OutboxSender`, which sends what it claims from it, in order, marking each sent (or
given up) right after, and gives back what a stop cut short.

Callers: :mod:`reconciler.notify.delivery`; ``reconciler daemon``, which builds one from its
store and membership.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from reconciler.core.outbox import Outbox, Outgoing
from reconciler.errors import ReconcilerError

log = logging.getLogger("reconciler.notify")

#: How long a claim on notifications holds; a sender claims again (renewing it) once half of
#: it has gone, so that a slow endpoint's notifications are never sent by two replicas.
CLAIM_LEASE = timedelta(minutes=10)
#: Notifications claimed at once.
BATCH = 20
#: Seconds between the worker's looks at the outbox while nothing is notified here: what a
#: crashed or stopped replica left is sent by another within this.
RESCAN = 30.0
#: What a send returns when a stop cut it short: the row stays in the outbox, given back.
KEPT = "kept"
#: What a send returns when it was delivered (anything else but :data:`KEPT`: given up).
DELIVERED = "delivered"


@dataclass(frozen=True, slots=True)
class Claimant:
    """The outbox, and who claims its notifications: ``owner`` (the daemon's member name),
    ``alive`` (whether another owner may still be sending: a live member, or a process of
    this host that exists), ``clock`` (claims' times)."""

    outbox: Outbox
    owner: str
    alive: Callable[[str], bool]
    clock: Callable[[], datetime]


class OutboxSender:
    """Sends what :attr:`claimant` claims from the outbox with ``send`` (one row: to its
    endpoint, or as the Kubernetes Event; :data:`DELIVERED`, :data:`KEPT` or given up), until
    nothing is left to claim or ``stopping`` is set. A claim is taken again (renewed) once half
    its lease has gone. A store that fails is logged: a row it could not mark stays claimed
    and is sent again once the claim runs out."""

    def __init__(
        self,
        claimant: Claimant,
        send: Callable[[Outgoing], str],
        stopping: threading.Event,
    ) -> None:
        self.claimant = claimant
        self.send = send
        self.stopping = stopping

    def send_claimable(self) -> None:
        """One pass: claim, send, mark, until nothing is left that this sender may claim."""
        claimant = self.claimant
        while not self.stopping.is_set():
            try:
                now = claimant.clock()
                claimed = claimant.outbox.claim_notifications(
                    claimant.owner, now, now + CLAIM_LEASE, claimant.alive, BATCH
                )
            except ReconcilerError as error:
                log.warning("notifications waiting in the state store not read: %s", error)
                return
            if not claimed:
                return
            self._send_claimed(claimed)

    def _send_claimed(self, claimed: list[Outgoing]) -> None:
        renew_at = time.monotonic() + CLAIM_LEASE.total_seconds() / 2
        for index, item in enumerate(claimed):
            if self.stopping.is_set():  # the rest goes to the next start, or another replica
                self._release([i.id for i in claimed[index:]])
                return
            if time.monotonic() > renew_at:  # still this sender's: claimed again, renewed
                return
            result = self.send(item)
            if result == KEPT:
                self._release([item.id])
            else:
                self._finish(item, delivered=result == DELIVERED)

    def _finish(self, item: Outgoing, *, delivered: bool) -> None:
        """Mark ``item`` sent (or given up)."""
        claimant = self.claimant
        try:
            mine = claimant.outbox.finish_notification(
                item.id, claimant.owner, delivered, claimant.clock()
            )
        except ReconcilerError as error:
            log.warning("notification outbox not updated: %s", error)
            return
        if not mine:
            log.warning(
                "notification %s was sent after its claim ran out (another replica may send "
                "it too)",
                item.notification.kind.value,
            )

    def _release(self, item_ids: list[str]) -> None:
        """Give claims up, not sent."""
        try:
            self.claimant.outbox.release_notifications(self.claimant.owner, item_ids)
        except ReconcilerError as error:
            log.warning("notification outbox not updated: %s", error)
