"""The Kubernetes client's exceptions translated into ours, once, for the cluster adapter.

Every request of :mod:`reconciler.cluster.kube` runs inside :func:`translated`: a kind the server
does not serve becomes an UnknownKindError (a ``404 page not found``, no Status of an object, a
:class:`StaleDiscoveryError` that makes the adapter rediscover), an API answer the error of its
status (Forbidden with what to check, Throttled with the server's Retry-After, a ServerError to
retry otherwise), and a connection failure or a request that timed out a ServerError naming the
server (never its credentials), the cause found in the exception chain, and what to check.
Messages carry the status and the server's reason, bounded, never a body or a header: a long
reason (a value dumped whole) keeps each cause's field and its end, so ``field is immutable``
shows, and such a refusal is an :class:`~reconciler.errors.ImmutableFieldError`. A refusal
to create a role granting what the identity does not hold (``escalate``, ``bind``) keeps every
permission the server names, on one line, and says which verb lets the identity grant them.
"""

from __future__ import annotations

import json
import re
import socket
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kubernetes.dynamic import exceptions as dyn
from urllib3 import exceptions as urllib3_exceptions
from urllib3.exceptions import HTTPError

from reconciler.core.redaction import mask
from reconciler.errors import (
    ConflictError,
    ExpiredError,
    ForbiddenError,
    ImmutableFieldError,
    InvalidObjectError,
    NotFoundError,
    ReconcilerError,
    ServerError,
    ThrottledError,
    UnknownKindError,
)


class StaleDiscoveryError(UnknownKindError):
    """The server answered ``404 page not found`` (no Status of an object) for a resource
    discovery named: the kind is not served there (any more)."""


_BY_STATUS: dict[int, type[ReconcilerError]] = {
    400: InvalidObjectError,
    401: ForbiddenError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    410: ExpiredError,
    422: InvalidObjectError,
    429: ThrottledError,
}


@contextmanager
def translated(what: str, server: str = "") -> Iterator[None]:
    """Turn the client's exceptions into ours, once, here; no bodies or headers in messages.
    A connection failure names the server (never its credentials), the cause and a hint."""
    try:
        yield
    except dyn.ResourceNotFoundError as error:
        raise UnknownKindError(f"{what}: kind not served") from error
    except dyn.DynamicApiError as error:
        raise _api_error(what, error) from error
    except (HTTPError, OSError) as error:
        raise _connection_error(what, server, error) from error


#: Seconds before a request that timed out is tried again: the server is hung or unreachable.
TIMEOUT_RETRY_SECONDS = 10.0
_LIMIT_HINT = "--kube-timeout or RECONCILER_KUBE_TIMEOUT if it is only slow"


def _connection_error(what: str, server: str, error: BaseException) -> ServerError:
    """A failed connection or a request that timed out (see
    :mod:`reconciler.cluster.kube_client`), naming the server and what to check."""
    where = f"the API server {mask(server)}" if server else "the API server"
    chain = _chain(error)
    if any(isinstance(e, urllib3_exceptions.ReadTimeoutError) for e in chain):
        return ServerError(
            f"{what}: {where} accepted the connection but did not answer in time (a hung or "
            f"overloaded API server, or a proxy in between? raise {_LIMIT_HINT})",
            retry_after=TIMEOUT_RETRY_SECONDS,
        )
    timed_out = any(isinstance(e, (TimeoutError, urllib3_exceptions.TimeoutError)) for e in chain)
    return ServerError(
        f"{what}: cannot reach {where}: {connection_cause(error)}",
        retry_after=TIMEOUT_RETRY_SECONDS if timed_out else 5.0,
    )


#: Causes of a failed connection, found in the exception chain, with what to check.
_CAUSES: tuple[tuple[tuple[type[BaseException], ...], str], ...] = (
    (
        (socket.gaierror,),
        "the host name does not resolve (check the server URL of the kubeconfig, or DNS)",
    ),
    (
        (ssl.SSLCertVerificationError,),
        "its TLS certificate is not trusted (check certificate-authority-data and the host name)",
    ),
    (
        (ssl.SSLError, urllib3_exceptions.SSLError),
        "the TLS handshake failed (is it an https endpoint? check the server URL and port)",
    ),
    (
        (ConnectionRefusedError,),
        "connection refused (is the API server up, and the port in the server URL right?)",
    ),
    (
        (TimeoutError, socket.timeout, urllib3_exceptions.TimeoutError),
        "no connection in time (a firewall, a private address, the wrong host or port, or a "
        f"server down? raise {_LIMIT_HINT})",
    ),
)


def connection_cause(error: BaseException) -> str:
    """Why a connection failed, in words, from the exception and what it wraps."""
    chain = _chain(error)
    for kinds, cause in _CAUSES:
        if any(isinstance(e, kinds) for e in chain):
            return cause
    return f"{type(chain[-1]).__name__} (check the server URL and the network)"


def _chain(error: BaseException) -> list[BaseException]:
    """``error`` and what it wraps: urllib3's ``reason``, else the cause or context."""
    found: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and len(found) < 10 and all(current is not e for e in found):
        found.append(current)
        reason = getattr(current, "reason", None)
        current = (
            reason
            if isinstance(reason, BaseException)
            else (current.__cause__ or current.__context__)
        )
    return found


_HINTS = {
    401: "the server refused the credentials: renew the token or client certificate",
    403: (
        "the identity lacks this permission on this cluster: bind it to the role "
        "`reconciler rbac REPO` prints, then `reconciler check REPO` names what is missing"
    ),
}


#: The hint of a refusal to grant what the identity does not hold (:data:`NOT_HELD`).
_ESCALATE_HINT = (
    "the identity may grant only what it holds: give it escalate on clusterroles and roles and "
    "bind on clusterrolebindings and rolebindings, as the role `reconciler rbac REPO` prints "
    "does, or these permissions themselves"
)


def _api_error(what: str, error: Any) -> ReconcilerError:
    status = int(getattr(error, "status", 0) or 0)
    reason = _server_message(error)
    message = f"{what}: {status} {reason}".strip()
    if status == 404 and not _is_status(error):
        return StaleDiscoveryError(f"{what}: kind not served (404 {reason})")
    if status == 403 and NOT_HELD in reason:
        message += f" ({_ESCALATE_HINT})"
    elif status in _HINTS:
        message += f" ({_HINTS[status]})"
    kind = _BY_STATUS.get(status)
    if kind is InvalidObjectError and is_immutable(reason):
        return ImmutableFieldError(message)
    if kind is ThrottledError:
        return ThrottledError(message, retry_after=_retry_after(error))
    if kind is not None:
        return kind(message)
    return ServerError(message, retry_after=10.0)


def _is_status(error: Any) -> bool:
    """Whether the body of an error answer is a Status object (a NotFound of an object),
    rather than the ``404 page not found`` of a path the server does not serve."""
    try:
        answer = json.loads(getattr(error, "body", "") or "null")
    except (ValueError, TypeError):
        return False
    return isinstance(answer, dict) and answer.get("kind") == "Status"


#: What the server says when it refuses to change a field it never changes (the texts
#: Flux's ssa reads as an immutable-field error too).
IMMUTABLE_TEXTS = (
    "field is immutable",
    "cannot change roleRef",
    "updates to statefulset spec for fields other than",
)
#: How many characters of the server's message an error keeps.
MESSAGE_SHOWN = 300
#: How many characters of one cause's message a long message keeps.
CAUSE_SHOWN = 160


def is_immutable(message: str) -> bool:
    """Whether the server's ``message`` refuses a change of a field it never changes."""
    return any(text in message for text in IMMUTABLE_TEXTS)


def _server_message(error: Any) -> str:
    """The ``message`` of the server's Status response, bounded in length. A long message
    (a value dumped whole, as a Job's template is) keeps its head and each cause's field and
    reason, the dumped value cut in the middle: ``field is immutable`` always shows."""
    try:
        status = json.loads(getattr(error, "body", "") or "{}")
        text = str(status.get("message", "")) or str(getattr(error, "reason", ""))
        causes = list((status.get("details") or {}).get("causes") or [])
    except (ValueError, TypeError, AttributeError):
        text, causes = str(getattr(error, "reason", "")), []
    if NOT_HELD in text:
        return _not_held(text)
    if len(text) > MESSAGE_SHOWN and causes:
        text = _with_causes(text, causes)
    return elided(" ".join(text.split()), MESSAGE_SHOWN)


#: What the server says when a role or binding would grant what the identity does not hold,
#: followed by one line per permission (``{APIGroups:["apps"], Resources:[...], Verbs:[...]}``).
NOT_HELD = "is attempting to grant RBAC permissions not currently held:"
#: How many of those permissions a message names (then ``and N more``).
PERMISSIONS_SHOWN = 8
_GROUPS = re.compile(r" \(groups=\[[^\]]*\]\)")


def _not_held(text: str) -> str:
    """The refusal ``text`` on one line: the subject and the user (without their groups), then
    each permission not held (:data:`PERMISSIONS_SHOWN` at most), then anything the server
    added after them."""
    head, _, rest = text.partition(NOT_HELD)
    lines = [" ".join(line.split()) for line in rest.splitlines()]
    rules = [line for line in lines if line.startswith("{")]
    after = " ".join(line for line in lines if line and not line.startswith("{"))
    shown = "; ".join(elided(rule, CAUSE_SHOWN) for rule in rules[:PERMISSIONS_SHOWN])
    more = f" (and {len(rules) - PERMISSIONS_SHOWN} more)" if len(rules) > PERMISSIONS_SHOWN else ""
    tail = f" {elided(after, CAUSE_SHOWN)}" if after else ""
    return f"{_GROUPS.sub('', head.strip())} {NOT_HELD} {shown}{more}{tail}"


def _with_causes(text: str, causes: list[Any]) -> str:
    """``Job.batch "x" is invalid: FIELD: REASON; ...``, each cause's dumped value cut."""
    head, found, _ = text.partition(" is invalid: ")
    said = [
        f"{c.get('field') or ''}: {elided(str(c.get('message') or ''), CAUSE_SHOWN)}".lstrip(": ")
        for c in causes[:3]
        if isinstance(c, dict)
    ]
    return f"{head} is invalid: {'; '.join(said)}" if found else "; ".join(said)


def elided(text: str, limit: int) -> str:
    """``text`` of at most ``limit`` characters: its middle cut (`` ... ``) when longer, so
    that both the subject at its start and the reason at its end show."""
    if len(text) <= limit:
        return text
    tail = limit * 2 // 3
    return f"{text[: limit - tail - 5]} ... {text[-tail:]}"


def _retry_after(error: Any) -> float:
    headers = getattr(error, "headers", None) or {}
    try:
        return max(1.0, float(headers.get("Retry-After", 5)))
    except (TypeError, ValueError):
        return 5.0
