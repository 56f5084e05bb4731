"""The notifier of a daemon: notifications queued by :meth:`Delivery.notify` (which never
blocks nor raises) and handed by one worker thread, in the order of the calls, to every
endpoint of the settings in force when each was queued that wants its kind; then, when asked, as
a Kubernetes Event (:mod:`reconciler.notify.events`). Each endpoint has a lane of its own (a
queue and a thread, :mod:`reconciler.notify.lanes`), and each request a deadline
(:mod:`reconciler.notify.transport`): an endpoint that is slow, trickles its answer or keeps
failing holds up only its own notifications, which it still gets in order.

One delivery to one endpoint is tried up to ``spec.notifications.attempts`` times while it fails
in a way that may pass (a network failure, 5xx, 408, 429), waiting 1 s, 2 s, 4 s ... up to
:data:`MAX_WAIT` (at least a 429's ``Retry-After``) between tries: tenacity, a well-kept retry
library, does the counting and the waiting; the wait itself is the ``pause`` seam (by default an
Event that :meth:`Delivery.close` sets, so a stopping daemon never waits out a backoff). A
permanent failure (4xx, a secret that cannot be read) is not tried again. Each outcome is
reported (``reconciler_notifications_total{endpoint,result}``: delivered, failed, dropped) and a
failure logged in one line naming the endpoint and the event, never a URL, header or secret
value. The queue is bounded (:data:`CAPACITY`): past it a notification is dropped, logged and
counted, rather than the reconcile that sent it waiting.

With an outbox (:class:`Claimant`: the daemon's state store), :meth:`Delivery.notify` keeps
each notification there, one row per receiver, in one short transaction, and the worker hands
what it claims from it to the lanes in order, each row marked delivered or given up once its
lane is done with it: a crash or
a restart loses none (the next start sends what waits, at once), a row is sent by one replica
(claims), and a delivery cut short by a stop stays for the next start. Should the store fail
at :meth:`~Delivery.notify`, the notification goes through the queue in memory instead (logged:
a crash then loses it). The daemon's pruning job removes the finished rows.

Callers: the daemon's command, which builds one; tests.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    stop_when_event_set,
)

from reconciler.core.endpoints import Endpoint, NotificationSettings
from reconciler.core.notifications import Notification
from reconciler.core.outbox import Outgoing, outgoing
from reconciler.errors import AccessError, ReconcilerError, ThrottledError, TransientError
from reconciler.notify.bodies import Request, request_for
from reconciler.notify.events import NotificationEvents
from reconciler.notify.lanes import Lanes
from reconciler.notify.outbox import DELIVERED, KEPT, RESCAN, Claimant, Done, OutboxSender
from reconciler.notify.secrets import SecretReader, TokenHosts
from reconciler.notify.transport import WORKER_THREAD, HttpTransport, Transport

log = logging.getLogger("reconciler.notify")

#: Notifications waiting at most; past it a new one is dropped.
CAPACITY = 1000
#: Notifications waiting at most in one endpoint's lane (without an outbox); past it, dropped.
LANE_CAPACITY = 1000
#: The longest wait between two tries of one delivery, in seconds.
MAX_WAIT = 60.0
#: How long :meth:`Delivery.close` lets the queued notifications go, in seconds (a pod has 60 s
#: to stop; an endpoint that does not answer must not take them all).
CLOSE_GRACE = 10.0
FAILED, DROPPED = "failed", "dropped"


class Report(Protocol):
    """Where outcomes are counted (:class:`reconciler.daemon.metrics.Metrics`)."""

    def notification(self, endpoint: str, result: str) -> None:
        """One notification to ``endpoint`` ended with ``result``."""


class _NoReport:
    def notification(self, endpoint: str, result: str) -> None:
        """Count nothing."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """How the last notification to one endpoint ended (``/status``)."""

    endpoint: str
    result: str
    kind: str
    commit: str
    error: str = ""

    def to_json(self) -> dict[str, str]:
        """The endpoint's entry of ``/status``'s ``notifications``."""
        return {
            "name": self.endpoint,
            "result": self.result,
            "kind": self.kind,
            "commit": self.commit,
            "error": self.error,
        }


@dataclass(frozen=True, slots=True)
class _Item:
    notification: Notification
    settings: NotificationSettings


#: Asks the worker to look at the outbox (a notification was kept there, or a drain).
_LOOK = object()


class Delivery:
    """See the module docstring. ``settings_of`` gives the settings in force (read at each
    :meth:`notify`); ``secrets`` reads the endpoints' secrets at each delivery; a token goes
    only where ``token_hosts`` allows; ``outbox``: where notifications wait (none: in memory
    only)."""

    def __init__(
        self,
        settings_of: Callable[[], NotificationSettings],
        secrets: SecretReader,
        *,
        transport: Transport | None = None,
        events: NotificationEvents | None = None,
        report: Report | None = None,
        pause: Callable[[float], None] | None = None,
        token_hosts: TokenHosts | None = None,
        outbox: Claimant | None = None,
    ) -> None:
        self.settings_of = settings_of
        self.secrets = secrets
        self.token_hosts = token_hosts or TokenHosts()
        self.transport = transport or HttpTransport()
        self.events = events
        self.report = report or _NoReport()
        self._stopping = threading.Event()
        self._pause = pause or self._wait
        self.outbox = outbox
        self._sender = (
            OutboxSender(outbox, self._send, self._stopping) if outbox is not None else None
        )
        self._queue: queue.Queue[_Item | object | None] = queue.Queue(maxsize=CAPACITY)
        #: Each endpoint's queue and thread: a slow one holds up only its own.
        self._lanes = Lanes(LANE_CAPACITY if outbox is None else 0)
        #: A look at the outbox is queued and not taken yet (one is enough).
        self._look = threading.Event()
        #: Whether the last write to the outbox failed (logged once until one succeeds).
        self._outbox_failed = False
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        #: Notifications dropped since the queue last took one.
        self._dropped = 0
        #: The last outcome by endpoint name.
        self._outcomes: dict[str, Outcome] = {}

    def notify(self, notification: Notification) -> None:
        """Queue ``notification`` for the endpoints in force now (see :class:`Notifier`): in
        the outbox if there is one, else (or should it fail) in memory."""
        settings = self.settings_of()
        if not settings.endpoints and not (settings.kubernetes_events and self.events):
            return
        if self._stopping.is_set():
            return
        if self.outbox is not None and self._keep(notification, settings, self.outbox):
            return
        try:
            self._queue.put_nowait(_Item(notification, settings))
        except queue.Full:
            self._drop(notification, settings)
            return
        with self._start_lock:
            dropped, self._dropped = self._dropped, 0
        if dropped:
            log.warning("%d notification(s) were dropped while the queue was full", dropped)
        self._start()

    def _keep(
        self, notification: Notification, settings: NotificationSettings, outbox: Claimant
    ) -> bool:
        """Keep ``notification`` in the outbox, one row per receiver, and wake the worker;
        whether it was kept (a failure is logged once, until the outbox takes one again)."""
        items = outgoing(notification, settings, self.events is not None, _new_id)
        if not items:  # no endpoint wants its kind
            return True
        try:
            outbox.outbox.add_notifications(items, outbox.clock())
        except ReconcilerError as error:
            if not self._outbox_failed:
                log.warning(
                    "notification %s not kept in the state store (%s); sent from memory: a "
                    "crash before it is sent loses it",
                    notification.kind.value,
                    error,
                )
            self._outbox_failed = True
            return False
        self._outbox_failed = False
        self._wake()
        return True

    def _wake(self) -> None:
        """Have the worker look at the outbox (once however many ask before it looks)."""
        if self._look.is_set():
            return
        self._look.set()
        try:
            self._queue.put_nowait(_LOOK)
        except queue.Full:  # the worker has plenty to take before: it looks after those
            self._look.clear()
            return
        self._start()

    def _drop(self, notification: Notification, settings: NotificationSettings) -> None:
        """Count a notification the full queue cannot take; log the first of a run only (a
        storm of them is one line, then one that counts them)."""
        with self._start_lock:
            self._dropped += 1
            first = self._dropped == 1
        if first:
            log.warning(
                "notification %s dropped: %d notifications wait already (endpoints too slow?)",
                notification.kind.value,
                CAPACITY,
            )
        for endpoint in settings.endpoints:
            if endpoint.wants(notification.kind):
                self._report(endpoint, notification, DROPPED, "the queue was full")

    def status(self) -> dict[str, Any]:
        """``/status``'s ``notifications``: how many wait (in memory, and in the outbox: every
        replica's), and each endpoint's last outcome."""
        with self._start_lock:
            outcomes = sorted(self._outcomes.values(), key=lambda o: o.endpoint)
        with self._queue.mutex:  # the queue's own lock: its items, not its looks at the outbox
            queued = sum(isinstance(item, _Item) for item in self._queue.queue)
        if self.outbox is None:
            queued += self._lanes.waiting()
        else:  # the lanes hold rows the outbox counts
            with contextlib.suppress(ReconcilerError):  # the store is down: what memory holds
                queued += self.outbox.outbox.waiting_notifications()
        return {"queued": queued, "endpoints": [o.to_json() for o in outcomes]}

    def start(self) -> None:
        """Start the worker now, rather than at the first :meth:`notify`: what waits in the
        outbox (left by a stop or a crash) goes out at once."""
        if self.outbox is not None:
            self._wake()

    def drain(self) -> None:
        """Wait until every notification queued so far was handled, and what the outbox
        holds that this worker may claim (tests, shutdown)."""
        if self.outbox is not None:
            self._queue.put(_LOOK)
            self._start()
        self._queue.join()
        self._lanes.join()

    def close(self, grace: float = CLOSE_GRACE) -> None:
        """Stop: the queued notifications are tried once more each, without waiting between
        tries, for ``grace`` seconds at most; what is left then is logged, not sent (with an
        outbox it stays there, for the next start or another replica)."""
        self._stopping.set()
        with self._start_lock:
            thread = self._thread
        if thread is None:
            return
        until = time.monotonic() + grace
        with contextlib.suppress(queue.Full):  # still full: the worker ends with the process
            self._queue.put(None, timeout=grace)
        thread.join(max(0.0, until - time.monotonic()))
        busy = self._lanes.stop(max(0.0, until - time.monotonic()))
        if thread.is_alive() or busy:
            left = self._queue.qsize() + self._lanes.waiting()
            log.warning(
                "stopping with notifications not sent: %d queued, under way to %s",
                left,
                ", ".join(busy) or "the endpoints",
            )

    def _wait(self, seconds: float) -> None:
        self._stopping.wait(seconds)

    def _start(self) -> None:
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name=WORKER_THREAD, daemon=True)
                self._thread.start()

    def _work(self) -> None:
        while True:
            item = self._next()
            try:
                if item is None:
                    return
                if isinstance(item, _Item):
                    self._handle(item)
                elif self._sender is not None:
                    self._sender.send_claimable()
            except Exception as error:  # a bug must not end the worker: later ones still go
                log.error("notification not handled: internal error %s", type(error).__name__)
            finally:
                if item is not _RESCAN:
                    self._queue.task_done()

    def _next(self) -> _Item | object | None:
        """What the queue holds next; with an outbox, a look at it every :data:`RESCAN`
        seconds while nothing comes (what a crashed replica left)."""
        try:
            item = self._queue.get(timeout=RESCAN if self.outbox is not None else None)
        except queue.Empty:
            return _RESCAN
        if item is _LOOK:
            self._look.clear()
        return item

    def _handle(self, item: _Item) -> None:
        """Each endpoint's delivery in its lane; the Kubernetes Event here."""
        notification, attempts = item.notification, item.settings.attempts
        for endpoint in item.settings.endpoints:
            if not endpoint.wants(notification.kind):
                continue

            def job(endpoint: Endpoint = endpoint) -> None:
                self._deliver(endpoint, notification, attempts)

            if not self._lanes.put(endpoint.name, job):
                self._drop(notification, NotificationSettings((endpoint,)))
        if item.settings.kubernetes_events and self.events is not None:
            self.events.record(notification)

    def _send(self, item: Outgoing, done: Done) -> None:
        """Deliver one row: to its endpoint (in its lane; a row a stop reaches before it is
        tried is kept), or as the Kubernetes Event (here); ``done`` says how it ended."""
        endpoint = item.endpoint
        if endpoint is None:
            if self.events is not None:
                self.events.record(item.notification)
            done(item, DELIVERED)
            return

        def job() -> None:
            if self._stopping.is_set():
                done(item, KEPT)
                return
            done(item, self._deliver(endpoint, item.notification, item.attempts))

        self._lanes.put(endpoint.name, job)  # an outbox's lanes are unbounded: it bounds them

    def _deliver(self, endpoint: Endpoint, notification: Notification, attempts: int) -> str:
        secrets: list[str] = []
        tries = 0
        try:
            request = self._request(endpoint, notification, secrets)
            for attempt in self._retrying(attempts):
                with attempt:
                    tries += 1
                    self.transport.post(request)
        except ReconcilerError as error:
            if (
                self.outbox is not None
                and self._stopping.is_set()
                and isinstance(error, TransientError)
            ):
                log.info(
                    "notification %s to endpoint %s kept for the next start: %s",
                    notification.kind.value,
                    endpoint.name,
                    _without(str(error), secrets),
                )
                return KEPT
            log.warning(
                "notification %s to endpoint %s not delivered (%d attempt(s)): %s",
                notification.kind.value,
                endpoint.name,
                tries,
                _without(str(error), secrets),
            )
            self._report(endpoint, notification, FAILED, _without(str(error), secrets))
            return FAILED
        log.info("notification %s sent to endpoint %s", notification.kind.value, endpoint.name)
        self._report(endpoint, notification, DELIVERED)
        return DELIVERED

    def _report(
        self, endpoint: Endpoint, notification: Notification, result: str, error: str = ""
    ) -> None:
        outcome = Outcome(
            endpoint.name, result, notification.kind.value, notification.commit, error
        )
        with self._start_lock:
            self._outcomes[endpoint.name] = outcome
        self.report.notification(endpoint.name, result)

    def _request(
        self, endpoint: Endpoint, notification: Notification, secrets: list[str]
    ) -> Request:
        """The request, with the endpoint's secrets read now (kept in ``secrets`` so that no
        message repeats one)."""
        url = self.secrets.read_value(endpoint.url_from) if endpoint.url_from else ""
        token = self.secrets.read_value(endpoint.token_from) if endpoint.token_from else ""
        secrets.extend(value for value in (url, token) if value)
        request = request_for(endpoint, notification, url, token)
        if token and not self.token_hosts.allows(request.url):
            raise AccessError(
                "its token goes only over https to api.github.com, gitlab.com and the hosts of "
                "--notification-token-host, and this endpoint's URL is on none of them"
            )
        return request

    def _retrying(self, attempts: int) -> Retrying:
        return Retrying(
            stop=stop_after_attempt(attempts) | stop_when_event_set(self._stopping),
            wait=_backoff,
            retry=retry_if_exception_type(TransientError),
            sleep=self._pause,
            reraise=True,
        )


#: The worker's look at the outbox when nothing came for :data:`RESCAN` seconds.
_RESCAN = object()


def _new_id() -> str:
    return uuid.uuid4().hex


def _backoff(state: RetryCallState) -> float:
    """1 s, doubling at each failed try, at most :data:`MAX_WAIT`; at least a 429's
    ``Retry-After``."""
    wait = min(2.0 ** (state.attempt_number - 1), MAX_WAIT)
    outcome = state.outcome
    error = outcome.exception() if outcome is not None else None
    if isinstance(error, ThrottledError):
        wait = max(wait, min(error.retry_after, MAX_WAIT))
    return wait


def _without(message: str, secrets: list[str]) -> str:
    for secret in secrets:
        message = message.replace(secret, "***")
    return message
