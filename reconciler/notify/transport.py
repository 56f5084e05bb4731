"""HTTP POST for notifications, through urllib3's connections (its own retries off: the
delivery retries), with every library exception translated once into :mod:`reconciler.errors`:
a 5xx answer or a network failure is a :class:`~reconciler.errors.ServerError`, a 429 a
:class:`~reconciler.errors.ThrottledError` (with the server's ``Retry-After``), 408 transient
too, any other 4xx permanent. Messages carry the status or the exception's type, never the URL
(a Slack or Teams URL is a credential) nor a header.

A commit names the endpoints, so the transport trusts none of them:

- **one deadline per request** (:data:`DEADLINE`, ``--notification-timeout``): connect, send
  and the whole answer within it, whatever the endpoint trickles (a watchdog shuts the socket
  at the deadline; a read timeout alone restarts at every byte);
- **no private address** unless the operator allows its network
  (``--notification-allow-network CIDR``): the host is resolved once, every address it has
  must be global (not loopback, private, link-local such as a cloud's metadata address
  169.254.169.254, shared, reserved or multicast), and the request goes to the address that
  was checked (a second lookup could answer otherwise), the TLS certificate still checked
  against the host's name.

Callers: :mod:`reconciler.notify.delivery`; tests give the delivery a transport of their own
only to count, the HTTP itself is tested against a local server.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import json
import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection

from reconciler.errors import ForbiddenError, PermanentError, ServerError, ThrottledError
from reconciler.notify.bodies import Request

#: The name of the threads that post notifications (the delivery's workers).
WORKER_THREAD = "reconciler-notify"
#: Seconds one request may take in all, its whole answer included.
DEADLINE = 15.0
#: Bytes of an answer read at most (its body says nothing we use).
ANSWER_BYTES = 64 * 1024

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
#: Resolves (host, port) to its addresses (``socket.getaddrinfo``'s answer).
Resolve = Callable[[str, int], Sequence[Any]]


class Transport(Protocol):
    """Sends one request; raises one of our errors when it is not accepted (2xx)."""

    def post(self, request: Request) -> None:
        """POST ``request``."""


@dataclass(frozen=True, slots=True)
class _Target:
    scheme: str
    host: str
    port: int
    authority: str
    path: str


class HttpTransport:
    """POSTs JSON, one connection per request, verifying TLS; see the module docstring.
    ``allowed``: the networks a private address may be in (none: only global addresses)."""

    def __init__(
        self,
        *,
        deadline: float = DEADLINE,
        allowed: Sequence[Network] = (),
        resolve: Resolve | None = None,
    ) -> None:
        self.deadline = deadline
        self.allowed = tuple(allowed)
        self._resolve = resolve or _getaddrinfo

    def post(self, request: Request) -> None:
        """See :class:`Transport`."""
        target = _target(request.url)
        address = self._address(target)
        body = json.dumps(request.body).encode("utf-8")
        headers = {**request.headers, "Host": target.authority}
        connection = _connection(target, address, self.deadline)
        cut = threading.Event()
        watchdog = threading.Timer(self.deadline, _cut, (connection, cut))
        watchdog.daemon = True
        watchdog.start()
        try:
            connection.request("POST", target.path, body=body, headers=headers)
            answer = connection.getresponse()
            answer.read(ANSWER_BYTES)
            status, retry_after = answer.status, answer.headers.get("Retry-After")
        except (OSError, urllib3.exceptions.HTTPError, http.client.HTTPException) as error:
            if cut.is_set():
                raise ServerError(
                    f"no whole answer within {self.deadline:g}s (a slow endpoint)"
                ) from None
            raise ServerError(f"no answer ({type(error).__name__})") from None
        finally:
            watchdog.cancel()
            connection.close()
        check_status(status, retry_after)

    def _address(self, target: _Target) -> str:
        """The address to connect to: the first the host resolves to; every one must be
        global or in an allowed network."""
        try:
            found = self._resolve(target.host, target.port)
        except (OSError, UnicodeError) as error:
            raise ServerError(f"the host cannot be resolved ({type(error).__name__})") from None
        addresses = [str(entry[4][0]) for entry in found]
        if not addresses:
            raise ServerError("the host has no address")
        for text in addresses:
            refused = address_problem(text, self.allowed)
            if refused:
                raise PermanentError(
                    f"its host has the {refused} address {text}: notifications go there only "
                    "when --notification-allow-network names its network"
                )
        return addresses[0]


def address_problem(text: str, allowed: Sequence[Network] = ()) -> str:
    """What keeps a notification from address ``text`` (``loopback``, ``private`` ...), or
    ``""`` when it is global or in one of the ``allowed`` networks."""
    address = ipaddress.ip_address(text.split("%", 1)[0])
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if any(address in network for network in allowed):
        return ""
    for kind in ("loopback", "link_local", "private", "multicast", "reserved", "unspecified"):
        if getattr(address, f"is_{kind}"):
            return kind.replace("_", "-")
    return "" if address.is_global else "non-global"


def _getaddrinfo(host: str, port: int) -> Sequence[Any]:
    return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)


def _target(url: str) -> _Target:
    try:
        parts = urllib3.util.parse_url(url)
    except (urllib3.exceptions.LocationParseError, ValueError) as error:
        raise PermanentError(f"the URL cannot be used ({type(error).__name__})") from None
    scheme = (parts.scheme or "").lower()
    if scheme not in ("http", "https") or not parts.host:
        raise PermanentError("the URL cannot be used (not http or https with a host)")
    port = parts.port or (443 if scheme == "https" else 80)
    host = parts.host.strip("[]")
    authority = parts.netloc.rpartition("@")[2] if parts.netloc else host
    return _Target(scheme, host, port, authority, parts.request_uri)


class _Plain(HTTPConnection):
    """A connection that keeps its socket where the watchdog finds it from the start."""

    raw: socket.socket | None = None

    def _new_conn(self) -> socket.socket:
        self.raw = super()._new_conn()
        return self.raw


class _Tls(HTTPSConnection):
    """:class:`_Plain`'s, with TLS (the socket under it, so a handshake is cut too)."""

    raw: socket.socket | None = None

    def _new_conn(self) -> socket.socket:
        self.raw = super()._new_conn()
        return self.raw


def _connection(target: _Target, address: str, deadline: float) -> _Plain | _Tls:
    """A connection to ``address`` for ``target`` (TLS checked against its host's name)."""
    if target.scheme == "https":
        return _Tls(
            address,
            target.port,
            timeout=deadline,
            server_hostname=target.host,
            assert_hostname=target.host,
            cert_reqs="CERT_REQUIRED",
        )
    return _Plain(address, target.port, timeout=deadline)


def _cut(connection: _Plain | _Tls, cut: threading.Event) -> None:
    """The deadline passed: shut the socket, which ends any read or write under way."""
    cut.set()
    raw = connection.raw
    if raw is not None:
        with contextlib.suppress(OSError):  # closed meanwhile
            raw.shutdown(socket.SHUT_RDWR)


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
