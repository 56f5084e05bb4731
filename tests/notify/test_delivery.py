"""Delivery to a real HTTP receiver on 127.0.0.1: every notification arrives once and in order,
also when the receiver fails twice before answering (the backoff's waits are asked of the pause
seam, never slept); permanent failures are not tried again; outcomes are counted; notify()
never waits for a slow endpoint; a full queue drops and counts; secrets never reach the logs."""

from __future__ import annotations

import ipaddress
import logging
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from reconciler.core.endpoints import Endpoint, EndpointType, NotificationSettings, SecretRef
from reconciler.core.notifications import Notification, NotificationKind
from reconciler.errors import PermanentError, ServerError
from reconciler.notify import delivery as delivery_module
from reconciler.notify.bodies import Request
from reconciler.notify.delivery import Delivery
from reconciler.notify.secrets import SecretReader, TokenHosts
from reconciler.notify.transport import HttpTransport, address_problem
from tests.support.daemon_http import daemon_command
from tests.support.daemons import until
from tests.support.receiver import Receiver, Trickler, loopback_transport

AT = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
COMMIT = "a" * 40


def _notification(kind: NotificationKind, key: str = "") -> Notification:
    return Notification(kind, COMMIT, f"{kind.value} {key}".strip(), AT, key, {"wave": 1})


class Counts:
    """A report that counts outcomes by (endpoint, result)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def notification(self, endpoint: str, result: str) -> None:
        self.seen.append((endpoint, result))


class Pauses:
    """The backoff's waits, asked and not slept."""

    def __init__(self) -> None:
        self.asked: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.asked.append(seconds)


def _delivery(
    endpoints: tuple[Endpoint, ...],
    pauses: Pauses,
    counts: Counts | None = None,
    secrets: SecretReader | None = None,
    attempts: int = 5,
    receiver: Receiver | None = None,
) -> Delivery:
    settings = NotificationSettings(endpoints, attempts=attempts, kubernetes_events=False)
    return Delivery(
        lambda: settings,
        secrets or SecretReader(),
        report=counts or Counts(),
        pause=pauses,
        token_hosts=TokenHosts((receiver.host,) if receiver else ()),
        transport=loopback_transport(),
    )


def test_every_event_arrives_once_in_order_when_the_receiver_fails_twice_first(
    receiver: Receiver,
) -> None:
    receiver.fail_times = 2
    pauses, counts = Pauses(), Counts()
    endpoint = Endpoint("hook", EndpointType.WEBHOOK, url=receiver.url + "/hook")
    delivery = _delivery((endpoint,), pauses, counts)
    sent = [_notification(kind, str(n)) for n, kind in enumerate(NotificationKind)]

    for notification in sent:
        delivery.notify(notification)
    delivery.drain()
    delivery.close()

    assert [r.body["key"] for r in receiver.accepted] == [n.key for n in sent]
    assert [r.body["kind"] for r in receiver.accepted] == [k.value for k in NotificationKind]
    assert len(receiver.tries) == 3 * len(sent)
    assert pauses.asked == [1.0, 2.0] * len(sent)  # 1 s, then doubled
    assert counts.seen == [("hook", "delivered")] * len(sent)


def test_a_delivery_is_given_up_after_its_attempts_and_the_next_goes_on(
    receiver: Receiver,
) -> None:
    receiver.fail_times = 4
    pauses, counts = Pauses(), Counts()
    endpoint = Endpoint("hook", EndpointType.WEBHOOK, url=receiver.url)
    delivery = _delivery((endpoint,), pauses, counts, attempts=3)

    delivery.notify(_notification(NotificationKind.COMMIT_REFUSED, "first"))
    delivery.drain()
    receiver.fail_times = 0
    delivery.notify(_notification(NotificationKind.COMMIT_HELD, "second"))
    delivery.drain()
    delivery.close()

    assert pauses.asked == [1.0, 2.0]
    assert [r.body["key"] for r in receiver.accepted] == ["second"]
    assert counts.seen == [("hook", "failed"), ("hook", "delivered")]


def test_a_client_error_is_not_tried_again(receiver: Receiver) -> None:
    receiver.status = 404
    pauses, counts = Pauses(), Counts()
    delivery = _delivery(
        (Endpoint("hook", EndpointType.WEBHOOK, url=receiver.url),), pauses, counts
    )

    delivery.notify(_notification(NotificationKind.ROLLOUT_HALTED))
    delivery.drain()
    delivery.close()

    assert receiver.tries == ["/"]
    assert pauses.asked == []
    assert counts.seen == [("hook", "failed")]
    assert delivery.status() == {
        "queued": 0,
        "endpoints": [
            {
                "name": "hook",
                "result": "failed",
                "kind": "rollout.halted",
                "commit": COMMIT,
                "error": "HTTP 404",
            }
        ],
    }


def test_a_throttled_delivery_waits_as_long_as_the_receiver_asks(receiver: Receiver) -> None:
    receiver.status = 429
    receiver.answer_headers = {"Retry-After": "7"}
    pauses, counts = Pauses(), Counts()
    endpoint = Endpoint("hook", EndpointType.WEBHOOK, url=receiver.url)
    delivery = _delivery((endpoint,), pauses, counts, attempts=3)

    delivery.notify(_notification(NotificationKind.WAVE_HEALTHY))
    delivery.drain()
    delivery.close()

    assert pauses.asked == [7.0, 7.0]  # Retry-After over 1 s and 2 s
    assert counts.seen == [("hook", "failed")]


def test_a_redirect_is_not_followed(receiver: Receiver, tmp_path: Path) -> None:
    """A token never goes to a host the endpoint did not name."""
    receiver.status = 302
    receiver.answer_headers = {"Location": "http://127.0.0.1:9/elsewhere"}
    (tmp_path / "token").write_text("tok")
    endpoint = Endpoint(
        "hook", EndpointType.WEBHOOK, url=receiver.url, token_from=SecretRef(file="token")
    )
    counts = Counts()
    secrets = SecretReader(tmp_path)
    delivery = _delivery((endpoint,), Pauses(), counts, secrets=secrets, receiver=receiver)

    delivery.notify(_notification(NotificationKind.WAVE_HEALTHY))
    delivery.drain()
    delivery.close()

    assert receiver.tries == ["/"]
    assert counts.seen == [("hook", "failed")]


@pytest.mark.parametrize("url", ["not a url", "ftp://example.com/x", "http://"])
def test_a_secret_url_that_cannot_be_used_fails_at_once(
    tmp_path: Path, url: str, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "hook-url").write_text(url)
    endpoint = Endpoint("hook", EndpointType.WEBHOOK, url_from=SecretRef(file="hook-url"))
    pauses, counts = Pauses(), Counts()
    delivery = _delivery((endpoint,), pauses, counts, secrets=SecretReader(tmp_path))

    delivery.notify(_notification(NotificationKind.WAVE_HEALTHY))
    delivery.drain()
    delivery.close()

    assert pauses.asked == []
    assert counts.seen == [("hook", "failed")]
    assert "(1 attempt(s)): the URL cannot be used" in caplog.text
    assert url not in caplog.text


def test_each_endpoint_gets_only_the_events_it_wants(receiver: Receiver) -> None:
    rollouts = Endpoint(
        "rollouts", EndpointType.WEBHOOK, receiver.url + "/r", events=("rollout.*",)
    )
    refused = Endpoint(
        "refused", EndpointType.WEBHOOK, receiver.url + "/c", events=("commit.refused",)
    )
    delivery = _delivery((rollouts, refused), Pauses())

    for kind in NotificationKind:
        delivery.notify(_notification(kind))
    delivery.drain()
    delivery.close()

    got = [(r.path, r.body["kind"]) for r in receiver.accepted]
    expected = [("/r", k.value) for k in NotificationKind if k.value.startswith("rollout.")]
    assert [g for g in got if g[0] == "/r"] == expected  # in order, each endpoint in its lane
    assert [g for g in got if g[0] == "/c"] == [("/c", "commit.refused")]


def test_notify_never_waits_for_a_slow_endpoint(receiver: Receiver) -> None:
    receiver.gate.clear()  # the receiver holds every answer
    delivery = _delivery((Endpoint("slow", EndpointType.WEBHOOK, url=receiver.url),), Pauses())

    for n in range(5):
        delivery.notify(_notification(NotificationKind.WAVE_STARTED, str(n)))
    assert receiver.accepted == []  # every call returned while the first is still held
    receiver.gate.set()
    delivery.drain()
    delivery.close()

    assert [r.body["key"] for r in receiver.accepted] == ["0", "1", "2", "3", "4"]


def test_stopping_does_not_wait_for_a_stuck_endpoint(
    receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    receiver.gate.clear()  # the endpoint never answers while the daemon stops
    delivery = _delivery((Endpoint("stuck", EndpointType.WEBHOOK, url=receiver.url),), Pauses())
    for n in range(3):
        delivery.notify(_notification(NotificationKind.WAVE_STARTED, str(n)))

    delivery.close(grace=0)

    assert "stopping with notifications not sent" in caplog.text
    receiver.gate.set()


def test_a_full_queue_drops_and_counts_instead_of_waiting(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(delivery_module, "CAPACITY", 2)
    receiver.gate.clear()
    counts = Counts()
    delivery = _delivery(
        (Endpoint("hook", EndpointType.WEBHOOK, url=receiver.url),), Pauses(), counts
    )
    held, release = threading.Event(), threading.Event()
    original = delivery._handle

    def handle(item: object) -> None:
        held.set()
        release.wait(10)
        original(item)  # type: ignore[arg-type]

    delivery._handle = handle  # type: ignore[method-assign]
    delivery.notify(_notification(NotificationKind.WAVE_STARTED, "taken"))
    held.wait(10)  # the worker holds the first; two more fill the queue
    for n in range(5):
        delivery.notify(_notification(NotificationKind.WAVE_STARTED, str(n)))
    release.set()
    receiver.gate.set()
    delivery.drain()
    delivery.notify(_notification(NotificationKind.WAVE_HEALTHY, "after"))
    delivery.drain()
    delivery.close()

    assert [r.body["key"] for r in receiver.accepted] == ["taken", "0", "1", "after"]
    assert counts.seen.count(("hook", "dropped")) == 3
    warnings = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert warnings == [  # one line for the run of drops, one that counts them
        "notification rollout.wave_started dropped: 2 notifications wait already "
        "(endpoints too slow?)",
        "3 notification(s) were dropped while the queue was full",
    ]


def test_secrets_never_reach_the_logs(
    receiver: Receiver, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    receiver.status = 500
    secret_path = "/services/T000/B000/s3cr3t-path-value"
    (tmp_path / "hook-url").write_text(receiver.url + secret_path + "\n")
    (tmp_path / "token").write_text("tok-9f8e7d6c5b4a\n")
    endpoint = Endpoint(
        "chat",
        EndpointType.SLACK,
        url_from=SecretRef(file="hook-url"),
        token_from=SecretRef(file="token"),
    )
    missing = Endpoint(
        "gh",
        EndpointType.GITHUB,
        url=receiver.url,
        repository="a/b",
        token_from=SecretRef(file="absent"),
    )
    secrets = SecretReader(tmp_path)
    endpoints = (endpoint, missing)
    delivery = _delivery(endpoints, Pauses(), secrets=secrets, attempts=2, receiver=receiver)

    with caplog.at_level(logging.DEBUG):
        delivery.notify(_notification(NotificationKind.COMMIT_REFUSED))
        delivery.drain()
        delivery.close()

    assert receiver.tries == [secret_path, secret_path]
    assert "s3cr3t" not in caplog.text
    assert "tok-9f8e7d6c5b4a" not in caplog.text
    assert (
        "notification commit.refused to endpoint chat not delivered (2 attempt(s)): HTTP 500"
        in caplog.text
    )
    assert "endpoint gh not delivered (0 attempt(s)): file absent: no such file" in caplog.text


def test_a_token_goes_only_to_the_hosts_the_operator_named(
    receiver: Receiver, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "token").write_text("tok-for-github")
    moved = Endpoint(  # a commit pointed the endpoint elsewhere, its token still named
        "gh",
        EndpointType.GITHUB,
        url=receiver.url,
        repository="a/b",
        token_from=SecretRef(file="token"),
    )
    counts = Counts()
    delivery = _delivery((moved,), Pauses(), counts, secrets=SecretReader(tmp_path))

    delivery.notify(_notification(NotificationKind.COMMIT_HELD))
    delivery.drain()
    delivery.close()

    assert receiver.tries == []
    assert counts.seen == [("gh", "failed")]
    assert "this endpoint's URL is on none of them" in caplog.text


def test_where_tokens_may_go() -> None:
    named = TokenHosts((("git.example.com", None), ("127.0.0.1", 8080)))

    assert named.allows("https://api.github.com/repos/a/b/statuses/1")
    assert named.allows("https://gitlab.com/api/v4/projects/1/statuses/1")
    assert named.allows("https://git.example.com/api/v4")
    assert named.allows("http://127.0.0.1:8080/hook")
    assert not named.allows("http://api.github.com/repos")  # a token never goes in clear
    assert not named.allows("https://git.example.com:8443/api")  # not the port named
    assert not named.allows("https://api.github.com.evil.example/")
    assert not named.allows("http://127.0.0.1:9090/hook")
    for broken in ("https://api.github.com[/x", "https://a]b/x", "https://[::1/x"):
        assert not named.allows(broken)  # no usable host: no token (never an internal error)


def test_an_endpoint_that_trickles_its_answer_is_cut_at_the_deadline() -> None:
    """A read timeout restarts at each byte; the deadline bounds the whole request."""
    trickler = Trickler(pause=0.2, seconds=60)
    try:
        with pytest.raises(ServerError) as failed:
            loopback_transport(deadline=1.0).post(Request(trickler.url + "/hook", {"a": 1}))
    finally:
        trickler.close()
    assert "no whole answer within 1s" in str(failed.value)
    assert trickler.requests == 1


def test_a_slow_endpoint_holds_up_only_its_own_notifications(receiver: Receiver) -> None:
    """Each endpoint has its own lane: the normal receiver gets every notification while the
    trickling one is still being tried."""
    trickler = Trickler(pause=0.2, seconds=120)
    slow = Endpoint("slow", EndpointType.WEBHOOK, url=trickler.url + "/slow")
    normal = Endpoint("normal", EndpointType.WEBHOOK, url=receiver.url + "/normal")
    settings = NotificationSettings((slow, normal), attempts=5, kubernetes_events=False)
    delivery = Delivery(
        lambda: settings, SecretReader(), pause=Pauses(), transport=loopback_transport(5.0)
    )
    try:
        for n in range(3):
            delivery.notify(_notification(NotificationKind.WAVE_STARTED, str(n)))
        until(lambda: len(receiver.accepted) == 3, seconds=20)  # the slow one: 5 tries of 5 s
        assert trickler.requests >= 1  # still on its first notification's tries
        assert [r.body["key"] for r in receiver.accepted] == ["0", "1", "2"]
    finally:
        delivery.close(grace=0)
        trickler.close()


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("169.254.169.254", "link-local"),  # a cloud's metadata service
        ("fe80::1", "link-local"),
        ("10.1.2.3", "private"),
        ("192.168.0.10", "private"),
        ("fd00::1", "private"),
        ("100.64.0.1", "non-global"),  # shared (carrier-grade NAT)
        ("0.0.0.0", "private"),
        ("224.0.0.1", "multicast"),
        ("93.184.215.14", ""),
        ("2606:4700::1111", ""),
    ],
)
def test_which_addresses_a_notification_may_reach(address: str, kind: str) -> None:
    assert address_problem(address) == kind
    everything = ipaddress.ip_network("0.0.0.0/0" if "." in address else "::/0")
    assert address_problem(address, (everything,)) == ""


def test_a_private_address_is_refused_unless_its_network_is_allowed(receiver: Receiver) -> None:
    """A commit names the endpoints: one on loopback, a private or a metadata address gets
    nothing, unless the operator allows its network; the address checked is the one reached
    (a name is resolved once), the name still in the ``Host`` header."""
    request = Request(receiver.url + "/hook", {"a": 1})
    with pytest.raises(PermanentError) as refused:
        HttpTransport().post(request)
    assert "loopback address 127.0.0.1" in str(refused.value)
    assert "--notification-allow-network" in str(refused.value)
    metadata = HttpTransport(resolve=lambda host, port: [(0, 0, 0, "", ("169.254.169.254", port))])
    with pytest.raises(PermanentError, match=r"link-local address 169\.254\.169\.254"):
        metadata.post(Request("http://hooks.example/x", {"a": 1}))
    assert receiver.tries == []

    port = receiver.host[1]
    named = HttpTransport(
        allowed=(ipaddress.ip_network("127.0.0.0/8"),),
        resolve=lambda host, _: [(0, 0, 0, "", ("127.0.0.1", port))],
    )
    named.post(Request(f"http://hooks.example:{port}/hook", {"a": 1}))
    assert [r.headers["Host"] for r in receiver.accepted] == [f"hooks.example:{port}"]


def test_the_daemon_refuses_a_network_that_is_not_one(tmp_path: Path) -> None:
    result = daemon_command(tmp_path, "--notification-allow-network", "10.0.0.0/33")
    assert result.exit_code == 2
    assert "--notification-allow-network" in result.output
    assert "a network such as 10.0.0.0/8" in result.output
