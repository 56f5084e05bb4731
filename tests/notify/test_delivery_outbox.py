"""Notifications kept in the state store's outbox (a real SQLite file) and delivered to a real
HTTP receiver on 127.0.0.1: a daemon process killed with SIGKILL while its notifications wait
(the receiver failing until then) leaves them in the store, and the next start sends each once,
in order, to every endpoint; two replicas sharing the store send each once between them; a
stop keeps what it could not send for the next start; a store that fails when a notification
is queued sends it from memory; the daemon's pruning job removes what was sent; the store
keeps where an endpoint's secrets are, never their values (S4).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest

from reconciler.core.endpoints import Endpoint, EndpointType, NotificationSettings, SecretRef
from reconciler.core.notifications import Notification, NotificationKind
from reconciler.core.outbox import Outgoing
from reconciler.daemon.pruning import Pruning
from reconciler.errors import StoreError
from reconciler.notify.delivery import Delivery
from reconciler.notify.outbox import Claimant
from reconciler.notify.secrets import SecretReader, TokenHosts
from reconciler.operations.engine import owner_alive
from reconciler.operations.model import Retention
from reconciler.operations.store import SqliteStore
from tests.support.daemons import until
from tests.support.receiver import Receiver, Trickler, loopback_transport

ROOT = Path(__file__).resolve().parents[2]
AT = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
COUNT = 5
#: A daemon's notifier in a process of its own: it keeps COUNT notifications for two endpoints
#: in the store, says so, and goes on trying to deliver (the receiver fails) until killed.
CHILD = """
import sys, threading
from datetime import UTC, datetime
from pathlib import Path
from reconciler.core.endpoints import Endpoint, EndpointType, NotificationSettings, SecretRef
from reconciler.core.notifications import Notification, NotificationKind
from reconciler.notify.delivery import Delivery
from reconciler.notify.outbox import Claimant
from reconciler.notify.secrets import SecretReader, TokenHosts
from reconciler.operations.engine import owner_alive, this_owner
from tests.support.receiver import loopback_transport
from reconciler.operations.store import SqliteStore

store_path, url, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = SqliteStore(Path(store_path))
hooks = tuple(Endpoint(n, EndpointType.WEBHOOK, url=f"{url}/{n}") for n in ("a", "b"))
settings = NotificationSettings(hooks, attempts=10, kubernetes_events=False)
outbox = Claimant(store, this_owner(), owner_alive, lambda: datetime.now(UTC))
delivery = Delivery(lambda: settings, SecretReader(), outbox=outbox, transport=loopback_transport())
at = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
for n in range(count):
    kind = NotificationKind.WAVE_STARTED
    delivery.notify(Notification(kind, "a" * 40, f"wave {n}", at, str(n), {"wave": n}))
print("kept", flush=True)
threading.Event().wait()
"""


def _notification(key: str) -> Notification:
    return Notification(NotificationKind.WAVE_STARTED, "a" * 40, f"wave {key}", AT, key)


def _delivery(
    store: SqliteStore,
    endpoints: Sequence[Endpoint],
    owner: str = "restarted",
    pause: Callable[[float], None] | None = None,
) -> Delivery:
    """A daemon's delivery on ``store``; the backoff's waits asked of ``pause`` (none: the
    delivery's own, which a stop ends)."""
    settings = NotificationSettings(tuple(endpoints), kubernetes_events=False)
    outbox = Claimant(store, owner, owner_alive, lambda: datetime.now(UTC))
    return Delivery(
        lambda: settings,
        SecretReader(),
        outbox=outbox,
        pause=pause,
        transport=loopback_transport(),
    )


def _hooks(receiver: Receiver, *names: str) -> list[Endpoint]:
    return [Endpoint(n, EndpointType.WEBHOOK, url=f"{receiver.url}/{n}") for n in names]


def _got(receiver: Receiver) -> list[tuple[str, str]]:
    return [(r.path, r.body["key"]) for r in receiver.accepted]


def test_a_killed_daemons_notifications_are_sent_once_in_order_after_a_restart(
    receiver: Receiver, tmp_path: Path
) -> None:
    receiver.status = 503  # every try fails until the daemon is killed
    path = tmp_path / "state.db"
    SqliteStore(path).close()
    with subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), receiver.url, str(COUNT)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    ) as child:
        try:
            assert child.stdout is not None
            assert child.stdout.readline() == "kept\n"  # every notify() returned: all kept
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
    assert child.returncode == -signal.SIGKILL
    assert receiver.accepted == []
    receiver.status = None

    store = SqliteStore(path)  # the next start, under a name of its own
    assert store.waiting_notifications() == 2 * COUNT
    delivery = _delivery(store, _hooks(receiver, "a", "b"))
    assert delivery.status()["queued"] == 2 * COUNT  # /status counts what waits in the store
    delivery.start()
    delivery.drain()
    delivery.close()
    assert delivery.status()["queued"] == 0

    for endpoint in "ab":  # each once, in order, in its endpoint's lane
        got = [key for path, key in _got(receiver) if path == f"/{endpoint}"]
        assert got == [str(n) for n in range(COUNT)]
    assert len(receiver.accepted) == 2 * COUNT
    assert store.waiting_notifications() == 0
    assert Pruning(store, Retention(), lambda: datetime.now(UTC)).tick() == 0
    assert store.query("SELECT count(*) AS n FROM notifications")[0]["n"] == 0  # pruned


def test_two_replicas_on_one_store_send_each_notification_once(
    receiver: Receiver, tmp_path: Path
) -> None:
    first = _delivery(SqliteStore(tmp_path / "state.db"), _hooks(receiver, "a"), "replica-a")
    second = _delivery(SqliteStore(tmp_path / "state.db"), _hooks(receiver, "a"), "replica-b")

    for n in range(COUNT):
        first.notify(_notification(f"first-{n}"))
        second.notify(_notification(f"second-{n}"))
    first.drain()
    second.drain()
    first.drain()
    first.close()
    second.close()

    keys = [key for _, key in _got(receiver)]
    assert sorted(keys) == sorted(f"{r}-{n}" for r in ("first", "second") for n in range(COUNT))
    assert [k for k in keys if k.startswith("first")] == [f"first-{n}" for n in range(COUNT)]


def test_a_stop_keeps_what_it_could_not_send_for_the_next_start(
    receiver: Receiver, tmp_path: Path
) -> None:
    receiver.status = 503
    store = SqliteStore(tmp_path / "state.db")
    stopping = _delivery(store, _hooks(receiver, "a"), "replica-a")
    stopping.close()  # stopped first: each is tried once, without waiting
    for n in range(3):
        stopping.notify(_notification(str(n)))  # a stopped delivery takes nothing more
    assert store.waiting_notifications() == 0

    running = _delivery(store, _hooks(receiver, "a"), "replica-a")
    for n in range(3):
        running.notify(_notification(str(n)))
    running.close(grace=10)  # its backoff's wait ends at the stop: tried once, then kept
    assert store.waiting_notifications() == 3  # kept, not given up
    receiver.status = None

    again = _delivery(store, _hooks(receiver, "a"), "replica-b")
    again.start()
    again.drain()
    again.close()
    assert _got(receiver) == [("/a", "0"), ("/a", "1"), ("/a", "2")]


def test_with_the_outbox_a_slow_endpoint_holds_up_only_its_own(
    receiver: Receiver, tmp_path: Path
) -> None:
    """The rows of a trickling endpoint stay claimed (in flight in its lane) while another
    endpoint's rows are claimed after them and sent; each endpoint's stay in order."""
    trickler = Trickler(pause=0.2, seconds=120)
    store = SqliteStore(tmp_path / "state.db")
    slow = Endpoint("slow", EndpointType.WEBHOOK, url=trickler.url + "/slow")
    settings = NotificationSettings((slow, *_hooks(receiver, "a")), kubernetes_events=False)
    outbox = Claimant(store, "replica-a", owner_alive, lambda: datetime.now(UTC))
    delivery = Delivery(
        lambda: settings, SecretReader(), outbox=outbox, transport=loopback_transport(5.0)
    )
    try:
        for n in range(COUNT):
            delivery.notify(_notification(str(n)))
        until(lambda: len(receiver.accepted) == COUNT, seconds=20)  # the slow one: 5 s a try
        assert _got(receiver) == [("/a", str(n)) for n in range(COUNT)]
        assert trickler.requests >= 1
        assert store.waiting_notifications() == COUNT  # the slow endpoint's, still waiting
    finally:
        delivery.close(grace=0)
        trickler.close()


class _Down:
    """An outbox whose database is down (the seam: :class:`~reconciler.core.outbox.Outbox`)."""

    def add_notifications(self, items: Sequence[Outgoing], now: datetime) -> None:
        raise StoreError("connection refused")

    def claim_notifications(self, *args: object) -> list[Outgoing]:
        raise StoreError("connection refused")

    def finish_notification(self, *args: object) -> bool:
        raise StoreError("connection refused")

    def release_notifications(self, *args: object) -> None:
        raise StoreError("connection refused")

    def waiting_notifications(self) -> int:
        raise StoreError("connection refused")


def test_a_store_that_fails_sends_from_memory_and_says_so_once(
    receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    settings = NotificationSettings(tuple(_hooks(receiver, "a")), kubernetes_events=False)
    outbox = Claimant(_Down(), "replica-a", owner_alive, lambda: datetime.now(UTC))
    delivery = Delivery(
        lambda: settings, SecretReader(), outbox=outbox, transport=loopback_transport()
    )

    for n in range(3):
        delivery.notify(_notification(str(n)))
    delivery.drain()
    delivery.close()

    assert _got(receiver) == [("/a", "0"), ("/a", "1"), ("/a", "2")]
    assert delivery.status()["queued"] == 0
    kept = [r for r in caplog.records if "not kept in the state store" in r.getMessage()]
    assert len(kept) == 1
    assert "sent from memory: a crash before it is sent loses it" in kept[0].getMessage()


def test_the_outbox_keeps_where_secrets_are_never_their_values(
    receiver: Receiver, tmp_path: Path
) -> None:
    (tmp_path / "chat-url").write_text(receiver.url + "/services/T0/B0/s3cr3t\n")
    (tmp_path / "token").write_text("tok-9f8e7d6c\n")
    chat = Endpoint(
        "chat",
        EndpointType.SLACK,
        url_from=SecretRef(file="chat-url"),
        token_from=SecretRef(file="token"),
    )
    settings = NotificationSettings((chat,), kubernetes_events=False)
    store = SqliteStore(tmp_path / "state.db")
    outbox = Claimant(store, "replica-a", owner_alive, lambda: datetime.now(UTC))
    hosts = TokenHosts((receiver.host,))
    delivery = Delivery(
        lambda: settings,
        SecretReader(tmp_path),
        outbox=outbox,
        token_hosts=hosts,
        transport=loopback_transport(),
    )

    delivery.notify(_notification("0"))
    kept = store.query("SELECT data FROM notifications")[0]["data"]
    delivery.drain()
    delivery.close()

    assert '"url_from":{"file":"chat-url"' in kept
    assert "s3cr3t" not in kept
    assert "tok-9f8e7d6c" not in kept
    assert [r.path for r in receiver.accepted] == ["/services/T0/B0/s3cr3t"]
    for file in tmp_path.glob("state.db*"):  # the database and its write-ahead log
        assert b"s3cr3t" not in file.read_bytes()
        assert b"tok-9f8e7d6c" not in file.read_bytes()
