"""The delivery's side of the outbox (:class:`~reconciler.core.outbox.Outbox`, the daemon's
state store): :class:`Claimant`, the outbox and who this worker is among the replicas sharing
it; :class:`OutboxSender`, which hands what it claims from it to the endpoints' lanes, in order,
marking each sent (or given up) once its lane is done with it, and gives back what a stop cut
short.

Callers: :mod:`reconciler.notify.delivery`; ``reconciler daemon``, which builds one from its
store and membership.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from reconciler.core.outbox import Outbox, Outgoing
from reconciler.errors import ReconcilerError

log = logging.getLogger("reconciler.notify")

#: How long a claim on notifications holds; the sender's looks at the outbox (at least every
#: :data:`RESCAN` seconds) claim its rows in flight again, renewing it, so that a slow
#: endpoint's notifications are never sent by two replicas.
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


#: Where a send says how it ended: the row and :data:`DELIVERED`, :data:`KEPT` or given up.
Done = Callable[[Outgoing, str], None]


class OutboxSender:
    """Hands what :attr:`claimant` claims from the outbox to ``send`` (one row: to its
    endpoint's lane, or as the Kubernetes Event), which calls back :meth:`done` when the row
    was sent, kept or given up (at once, or later from the endpoint's lane), until nothing new
    is left to claim or ``stopping`` is set. Rows handed over and not done yet are this
    sender's *in flight*: every claim takes them again (which renews their claim) and hands
    them to no one twice. A store that fails is logged: a row it could not mark stays claimed
    and is sent again once the claim runs out."""

    def __init__(
        self,
        claimant: Claimant,
        send: Callable[[Outgoing, Done], None],
        stopping: threading.Event,
    ) -> None:
        self.claimant = claimant
        self.send = send
        self.stopping = stopping
        self._in_flight: set[str] = set()
        self._lock = threading.Lock()

    def send_claimable(self) -> None:
        """One pass: claim and hand over, until nothing new is left that this sender may
        claim."""
        claimant = self.claimant
        while not self.stopping.is_set():
            with self._lock:
                busy = set(self._in_flight)
            try:
                now = claimant.clock()
                claimed = claimant.outbox.claim_notifications(
                    claimant.owner, now, now + CLAIM_LEASE, claimant.alive, BATCH + len(busy)
                )
            except ReconcilerError as error:
                log.warning("notifications waiting in the state store not read: %s", error)
                return
            fresh = [item for item in claimed if item.id not in busy]
            if not fresh:
                return
            self._hand_over(fresh)

    def _hand_over(self, claimed: list[Outgoing]) -> None:
        for index, item in enumerate(claimed):
            if self.stopping.is_set():  # the rest goes to the next start, or another replica
                self._release([i.id for i in claimed[index:]])
                return
            with self._lock:
                self._in_flight.add(item.id)
            self.send(item, self.done)

    def done(self, item: Outgoing, result: str) -> None:
        """``item`` was sent (:data:`DELIVERED`), given up, or kept for later (:data:`KEPT`):
        marked so in the outbox."""
        if result == KEPT:
            self._release([item.id])
        else:
            self._finish(item, delivered=result == DELIVERED)
        with self._lock:  # only now: a claim before the mark would hand it over again
            self._in_flight.discard(item.id)

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
