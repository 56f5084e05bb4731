"""Notifications benchmark: what :meth:`Delivery.notify` costs its caller (a reconcile, a poll)
while every endpoint is stuck, and how fast the worker delivers to local endpoints; each with
the notifications in memory only and kept in a SQLite state store's outbox (as the daemon
does: written before they are sent, marked after).

1. ``notify`` while the receiver holds every answer: the calls' cost per notification
   (queueing, or one short transaction into the outbox; the worker waits on the first request).
2. Delivery of ``--count`` notifications (at most the queue's capacity, 1,000: a burst past it
   is dropped, by design) to ``--endpoints`` webhook endpoints of one receiver on
   127.0.0.1 (real HTTP, a connection per request, each endpoint in its own lane), in order:
   notifications per second and milliseconds per request.

    python bench/notify_bench.py --count 1000 --endpoints 3
    python bench/notify_bench.py --state postgresql://USER@HOST/DB   # the outbox in PostgreSQL
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reconciler.core.endpoints import Endpoint, EndpointType, NotificationSettings  # noqa: E402
from reconciler.core.notifications import Notification, NotificationKind  # noqa: E402
from reconciler.notify.delivery import CAPACITY, Delivery  # noqa: E402
from reconciler.notify.outbox import Claimant  # noqa: E402
from reconciler.notify.secrets import SecretReader  # noqa: E402
from reconciler.operations.store import open_store  # noqa: E402
from tests.support.receiver import Receiver, loopback_transport  # noqa: E402


def _notification(n: int) -> Notification:
    at = datetime.now(UTC)
    return Notification(NotificationKind.WAVE_STARTED, "a" * 40, f"wave {n}", at, str(n))


def _delivery(receiver: Receiver, endpoints: int, store: str | None) -> Delivery:
    hooks = tuple(
        Endpoint(f"hook-{i}", EndpointType.WEBHOOK, f"{receiver.url}/{i}") for i in range(endpoints)
    )
    settings = NotificationSettings(hooks, kubernetes_events=False)
    outbox = None
    if store is not None:
        outbox = Claimant(open_store(store), "bench", lambda _: True, lambda: datetime.now(UTC))
    return Delivery(lambda: settings, SecretReader(), outbox=outbox, transport=loopback_transport())


def stuck_cost(count: int, store: str | None) -> float:
    """Microseconds per notify() while the endpoint holds its answer."""
    receiver = Receiver().start()
    receiver.gate.clear()
    delivery = _delivery(receiver, 1, store)
    count = min(count, CAPACITY)
    started = time.perf_counter()
    for n in range(count):
        delivery.notify(_notification(n))
    took = time.perf_counter() - started
    receiver.gate.set()
    delivery.drain()
    delivery.close()
    receiver.close()
    return took / count * 1e6


def throughput(count: int, endpoints: int, store: str | None) -> tuple[float, float]:
    """(notifications per second, milliseconds per request) delivered to a local receiver."""
    count = min(count, CAPACITY)
    receiver = Receiver().start()
    delivery = _delivery(receiver, endpoints, store)
    started = time.perf_counter()
    for n in range(count):
        delivery.notify(_notification(n))
    delivery.drain()
    took = time.perf_counter() - started
    delivery.close()
    receiver.close()
    assert len(receiver.accepted) == count * endpoints
    return count / took, took / (count * endpoints) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=CAPACITY)
    parser.add_argument("--endpoints", type=int, default=3)
    parser.add_argument(
        "--state", default="", help="the outbox's store (default: a SQLite file of its own)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        state = args.state or f"sqlite:///{Path(folder) / 'state.db'}"
        for name, store in (("in memory", None), ("outbox", state)):
            stuck = stuck_cost(args.count, store)
            print(f"{name}: notify() while the endpoint is stuck: {stuck:.1f} us per call")
            rate, per_request = throughput(args.count, args.endpoints, store)
            print(
                f"{name}: delivered {min(args.count, CAPACITY)} notifications to "
                f"{args.endpoints} endpoints: {rate:.0f} notifications/s, "
                f"{per_request:.2f} ms per request"
            )


if __name__ == "__main__":
    main()
