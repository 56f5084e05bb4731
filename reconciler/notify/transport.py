"""HTTP POST for notifications, through urllib3 (its own retries off: the delivery retries),
with every library exception translated once into :mod:`reconciler.errors`: a 5xx answer or a
network failure is a :class:`~reconciler.errors.ServerError`, a 429 a
:class:`~reconciler.errors.ThrottledError` (with the server's ``Retry-After``), 408 transient
too, any other 4xx permanent. Messages carry the status or the exception's type, never the URL
(a Slack or Teams URL is a credential) nor a header.

Callers: :mod:`reconciler.notify.delivery`; tests give the delivery a transport of their own
only to count, the HTTP itself is tested against a local server.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Protocol

import urllib3

from reconciler.errors import ForbiddenError, PermanentError, ServerError, ThrottledError
from reconciler.notify.bodies import Request

#: The name of the thread that posts notifications (the delivery's worker).
WORKER_THREAD = "reconciler-notify"
#: Seconds to connect and to read an answer.
TIMEOUT = urllib3.Timeout(connect=5.0, read=10.0)


class Transport(Protocol):
    """Sends one request; raises one of our errors when it is not accepted (2xx)."""

    def post(self, request: Request) -> None:
        """POST ``request``."""


class HttpTransport:
    """POSTs JSON with a pool of connections (urllib3), verifying TLS. urllib3's own log lines
    of these requests (at DEBUG, with the URL's path: a Slack or Teams URL's key) are dropped
    (:class:`_QuietPool`)."""

    def __init__(self) -> None:
        _QuietPool.install()
        self._pool = urllib3.PoolManager(retries=False, timeout=TIMEOUT)

    def post(self, request: Request) -> None:
        """See :class:`Transport`."""
        body = json.dumps(request.body).encode("utf-8")
        try:
            answer = self._pool.request(
                "POST", request.url, body=body, headers=dict(request.headers), redirect=False
            )
        except (urllib3.exceptions.LocationValueError, ValueError) as error:  # no usable URL
            raise PermanentError(f"the URL cannot be used ({type(error).__name__})") from None
        except urllib3.exceptions.HTTPError as error:
            raise ServerError(f"no answer ({type(error).__name__})") from None
        check_status(answer.status, answer.headers.get("Retry-After"))


def check_status(status: int, retry_after: str | None = None) -> None:
    """Raise the error of an answer's ``status`` (nothing for 2xx)."""
    if 200 <= status < 300:
        return
    if status == 429:
        delay = float(retry_after) if retry_after and retry_after.isdigit() else 1.0
        raise ThrottledError(f"HTTP {status} (too many requests)", retry_after=delay)
    if status >= 500 or status == 408:
        raise ServerError(f"HTTP {status}")
    if status in (401, 403):
        raise ForbiddenError(f"HTTP {status} (check the endpoint's token)")
    raise PermanentError(f"HTTP {status}")


class _QuietPool(logging.Filter):
    """Drops what urllib3 logs about a request of this transport (it names the URL): the
    records urllib3 makes in the thread that posts notifications."""

    #: The threads whose urllib3 records are dropped (the delivery's worker).
    threads: frozenset[str] = frozenset({WORKER_THREAD})
    _installed = False
    _lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        return record.threadName not in self.threads

    @classmethod
    def install(cls) -> None:
        """Put the filter on urllib3's loggers, once per process."""
        with cls._lock:
            if not cls._installed:
                for name in ("urllib3.connectionpool", "urllib3.util.retry", "urllib3"):
                    logging.getLogger(name).addFilter(cls())
                cls._installed = True
