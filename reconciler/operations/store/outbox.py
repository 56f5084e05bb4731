"""The notifications outbox in SQL, once for both databases, and its JSON at the store's edge.

One row per notification bound for one receiver (:class:`~reconciler.core.outbox.Outgoing`):
its id, state (waiting, delivered, given up), time queued, the claim (owner and lease), when it
finished, and the notification with its endpoint and tries as JSON. A row is written before the
notification is sent and marked after; the insertion order is the order of sending. Claims are
taken one claimer at a time (:data:`~reconciler.operations.store.base.OUTBOX_LOCK`; SQLite's
write transactions exclude each other), so two replicas never send one row. Finished rows are
removed by the daemon's pruning job (:meth:`OutboxTables.prune_notifications`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from reconciler.core.endpoints import Endpoint, EndpointType, SecretRef
from reconciler.core.notifications import Notification, NotificationKind
from reconciler.core.outbox import Outgoing
from reconciler.operations.store.base import OUTBOX_LOCK, SqlBase, marks

#: A row's states: waiting to be sent (claimed or not), delivered, given up.
WAITING, DELIVERED, GIVEN_UP = "waiting", "delivered", "failed"
_WAITING_ROWS = (
    "SELECT id, owner, lease_until, data FROM notifications WHERE state = ? "
    "ORDER BY {order} LIMIT ?"
)


class OutboxTables(SqlBase):
    """:class:`~reconciler.operations.store.contract.NotificationOutbox`, the outbox part of
    :class:`~reconciler.operations.store.contract.StateStore` (see
    :class:`~reconciler.core.outbox.Outbox`)."""

    def add_notifications(self, items: Sequence[Outgoing], now: datetime) -> None:
        """See :class:`Outbox`."""
        rows = [(item.id, WAITING, self.time(now), encode_outgoing(item)) for item in items]
        with self.transaction() as statements:
            statements.run_many(
                "INSERT INTO notifications (id, state, created, data) VALUES (?, ?, ?, ?)", rows
            )

    def claim_notifications(
        self,
        owner: str,
        now: datetime,
        lease_until: datetime,
        alive: Callable[[str], bool],
        limit: int,
    ) -> list[Outgoing]:
        """See :class:`Outbox`: the holders' liveness is asked before the transaction (it may
        read the store), the claim made in it."""
        held = {
            row["owner"]
            for row in self.query(_WAITING_ROWS, (WAITING, limit))
            if self._held(row, owner, now)
        }
        dead = {holder for holder in held if not alive(holder)}
        with self.transaction() as statements:
            self.serialise(statements, OUTBOX_LOCK)
            claimed: list[Any] = []
            for row in statements.run(_WAITING_ROWS, (WAITING, limit)).fetchall():
                if self._held(row, owner, now) and row["owner"] not in dead:
                    break  # another live sender's, and those after it wait for it
                claimed.append(row)
            if claimed:
                statements.run(
                    f"UPDATE notifications SET owner = ?, lease_until = ? "  # noqa: S608 (marks)
                    f"WHERE id IN ({marks(len(claimed))})",
                    (owner, self.time(lease_until), *(row["id"] for row in claimed)),
                )
        return [decode_outgoing(row["id"], row["data"]) for row in claimed]

    def _held(self, row: Any, owner: str, now: datetime) -> bool:
        """Whether ``row`` is claimed by someone other than ``owner``, within the claim."""
        lease = self.read_time(row["lease_until"])
        return row["owner"] not in ("", owner) and lease is not None and lease > now

    def finish_notification(self, item_id: str, owner: str, delivered: bool, now: datetime) -> bool:
        """See :class:`Outbox`."""
        with self.transaction() as statements:
            written = statements.run(
                "UPDATE notifications SET state = ?, finished = ?, lease_until = NULL "
                "WHERE id = ? AND owner = ? AND state = ?",
                (DELIVERED if delivered else GIVEN_UP, self.time(now), item_id, owner, WAITING),
            )
            return written.rowcount == 1

    def release_notifications(self, owner: str, item_ids: Sequence[str]) -> None:
        """See :class:`Outbox`."""
        if not item_ids:
            return
        with self.transaction() as statements:
            statements.run(
                "UPDATE notifications SET owner = '', lease_until = NULL "  # noqa: S608 (marks)
                f"WHERE owner = ? AND state = ? AND id IN ({marks(len(item_ids))})",
                (owner, WAITING, *item_ids),
            )

    def waiting_notifications(self) -> int:
        """See :class:`Outbox`."""
        rows = self.query("SELECT count(*) AS n FROM notifications WHERE state = ?", (WAITING,))
        return int(rows[0]["n"])

    def prune_notifications(self, now: datetime) -> int:
        """Remove the notifications delivered or given up before ``now``; how many."""
        with self.transaction() as statements:
            return statements.run(
                "DELETE FROM notifications WHERE state <> ? AND finished < ?",
                (WAITING, self.time(now)),
            ).rowcount


def encode_outgoing(item: Outgoing) -> str:
    """The JSON of a row's notification, endpoint and tries."""
    notification = item.notification
    return json.dumps(
        {
            "kind": notification.kind.value,
            "commit": notification.commit,
            "summary": notification.summary,
            "at": notification.at.isoformat(),
            "key": notification.key,
            "details": dict(notification.details),
            "endpoint": _endpoint_json(item.endpoint) if item.endpoint is not None else None,
            "attempts": item.attempts,
        },
        separators=(",", ":"),
    )


def decode_outgoing(item_id: str, text: str) -> Outgoing:
    """The :class:`Outgoing` of a row (its id and the JSON of :func:`encode_outgoing`)."""
    data = json.loads(text)
    notification = Notification(
        NotificationKind(data["kind"]),
        data["commit"],
        data["summary"],
        datetime.fromisoformat(data["at"]),
        data["key"],
        data["details"],
    )
    return Outgoing(item_id, notification, _endpoint(data["endpoint"]), int(data["attempts"]))


def _endpoint_json(endpoint: Endpoint) -> dict[str, Any]:
    """An endpoint's fields by name (written out: :func:`dataclasses.asdict` took half of a
    :meth:`~reconciler.notify.delivery.Delivery.notify`)."""
    return {
        "name": endpoint.name,
        "type": endpoint.type.value,
        "url": endpoint.url,
        "url_from": _ref_json(endpoint.url_from),
        "token_from": _ref_json(endpoint.token_from),
        "repository": endpoint.repository,
        "context": endpoint.context,
        "target_url": endpoint.target_url,
        "status_on": endpoint.status_on,
        "events": list(endpoint.events),
    }


def _ref_json(ref: SecretRef | None) -> dict[str, str | None] | None:
    return {"file": ref.file, "secret": ref.secret, "key": ref.key} if ref is not None else None


def _endpoint(data: dict[str, Any] | None) -> Endpoint | None:
    if data is None:
        return None
    refs = {
        name: SecretRef(**data[name]) if data[name] is not None else None
        for name in ("url_from", "token_from")
    }
    fields = data | refs | {"type": EndpointType(data["type"]), "events": tuple(data["events"])}
    return Endpoint(**fields)
