"""The notifications outbox, on SQLite and PostgreSQL alike: kept in order with its endpoint and
tries, read back by another connection (a restart, another replica); claimed by one sender at a
time (never the same row by two, also when they claim at once), in order; taken over from a
holder whose claim ran out or who is gone; marked delivered or given up only by its holder;
released at a stop; pruned once finished; a store of schema 8 gains the table.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

from reconciler.core.endpoints import Endpoint, EndpointType, SecretRef
from reconciler.core.notifications import Notification, NotificationKind
from reconciler.core.outbox import Outgoing
from tests.store_contract.conftest import Backend

T0 = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
LEASE = T0 + timedelta(minutes=10)
HOOK = Endpoint(
    "hook",
    EndpointType.GITHUB,
    url="https://git.example.com/api",
    token_from=SecretRef(secret="tokens", key="github"),
    repository="a/b",
    events=("rollout.*", "commit.held"),
)


def _items(count: int, prefix: str = "n") -> list[Outgoing]:
    return [
        Outgoing(
            f"{prefix}{i:03d}",
            Notification(
                NotificationKind.WAVE_STARTED, "a" * 40, f"wave {i}", T0, f"r/{i}", {"wave": i}
            ),
            HOOK if i % 2 == 0 else None,
            3,
        )
        for i in range(count)
    ]


def _everyone_alive(owner: str) -> bool:
    return True


def test_notifications_are_kept_in_order_and_read_back_elsewhere(backend: Backend) -> None:
    items = _items(5)
    backend.open().add_notifications(items[:3], T0)
    backend.open().add_notifications(items[3:], T0)

    other = backend.open()  # a restart, or another replica
    assert other.waiting_notifications() == 5
    assert other.claim_notifications("b", T0, LEASE, _everyone_alive, 10) == items


def test_a_claimed_notification_goes_to_one_sender_until_its_claim_runs_out(
    backend: Backend,
) -> None:
    first, second = backend.open(), backend.open()
    first.add_notifications(_items(3), T0)
    claimed = first.claim_notifications("a", T0, LEASE, _everyone_alive, 2)
    assert [i.id for i in claimed] == ["n000", "n001"]

    # the third waits behind the first sender's, to go out in order
    assert second.claim_notifications("b", T0, LEASE, _everyone_alive, 10) == []
    assert [i.id for i in first.claim_notifications("a", T0, LEASE, _everyone_alive, 10)] == [
        "n000",
        "n001",
        "n002",
    ]  # its own again (a restart under the same member name), and the next
    later = LEASE + timedelta(seconds=1)
    assert (
        len(
            second.claim_notifications(
                "b", later, later + timedelta(minutes=10), _everyone_alive, 10
            )
        )
        == 3
    )


def test_a_gone_holders_claims_are_taken_over_at_once(backend: Backend) -> None:
    store = backend.open()
    store.add_notifications(_items(2), T0)
    store.claim_notifications("crashed:1", T0, LEASE, _everyone_alive, 10)

    taken = store.claim_notifications("b", T0, LEASE, lambda owner: owner != "crashed:1", 10)

    assert [i.id for i in taken] == ["n000", "n001"]
    assert not store.finish_notification("n000", "crashed:1", True, T0)  # no longer its own


def test_finished_notifications_are_not_sent_again_and_are_pruned(backend: Backend) -> None:
    store = backend.open()
    store.add_notifications(_items(3), T0)
    store.claim_notifications("a", T0, LEASE, _everyone_alive, 10)

    assert store.finish_notification("n000", "a", True, T0)
    assert store.finish_notification("n001", "a", False, T0)  # given up
    assert not store.finish_notification("n001", "a", True, T0)  # once
    assert [i.id for i in store.claim_notifications("a", T0, LEASE, _everyone_alive, 10)] == [
        "n002"
    ]
    assert store.waiting_notifications() == 1

    assert store.prune_notifications(T0) == 0  # finished at T0: not before it
    assert store.prune_notifications(T0 + timedelta(seconds=1)) == 2
    assert store.waiting_notifications() == 1


def test_released_notifications_go_to_the_next_sender_at_once(backend: Backend) -> None:
    store, other = backend.open(), backend.open()
    store.add_notifications(_items(3), T0)
    store.claim_notifications("a", T0, LEASE, _everyone_alive, 10)

    store.release_notifications("a", ["n001", "n002"])
    assert other.claim_notifications("b", T0, LEASE, _everyone_alive, 10) == []  # n000 first
    store.release_notifications("a", ["n000"])

    assert len(other.claim_notifications("b", T0, LEASE, _everyone_alive, 10)) == 3


def test_senders_claiming_at_once_never_get_the_same_notification(backend: Backend) -> None:
    backend.open().add_notifications(_items(40), T0)
    stores = [backend.open() for _ in range(3)]
    got: dict[str, list[str]] = {}
    start = threading.Barrier(len(stores))

    def send(name: str, index: int) -> None:
        store = stores[index]
        start.wait()
        mine = got.setdefault(name, [])
        while claimed := store.claim_notifications(name, T0, LEASE, _everyone_alive, 1):
            for item in claimed:
                assert store.finish_notification(item.id, name, True, T0)
                mine.append(item.id)

    threads = [threading.Thread(target=send, args=(f"s{i}", i)) for i in range(len(stores))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    sent = [item for ids in got.values() for item in ids]
    assert sorted(sent) == [i.id for i in _items(40)]  # each once


def test_a_store_of_schema_8_gains_the_outbox(backend: Backend) -> None:
    backend.create_at_version(8)
    store = backend.open()

    store.add_notifications(_items(1), T0)

    assert store.waiting_notifications() == 1
