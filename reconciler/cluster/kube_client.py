"""The client-side time limits of the requests to a Kubernetes API server.

The ``kubernetes`` client waits forever by default: an API server that accepts a connection and
never answers (a hung server, a proxy in between) or a network that drops the packets would hold
a ``sync``, a ``diff --live``, a daemon worker and the daemon's stop for as long. Every request
but a watch is therefore given a :class:`RequestTimeout`, in one place,
:class:`TimedDynamicClient` (discovery goes through it too), and the client's own retries are
off (:func:`configuration`), so a request to a dead server ends after one connect timeout per
address of the host, or one read timeout. A watch keeps its server-side ``timeoutSeconds`` and is
hung up by its caller. A request that timed out is a :class:`~reconciler.errors.ServerError`
(:mod:`reconciler.cluster.kube_errors`), retried by our steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubernetes import client as _k8s_client
from kubernetes.dynamic import DynamicClient as _DynamicClient

k8s_client: Any = _k8s_client
DynamicClient: Any = _DynamicClient  # the client's typing is partial

#: The most time a request may wait for a byte of the answer (``--kube-timeout``).
DEFAULT_READ_SECONDS = 60.0
#: The most time to open a connection (and its TLS handshake): lower of this and the read limit.
CONNECT_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class RequestTimeout:
    """How long a request waits: to connect, and for each byte of the answer (``read``: the
    most time without a byte, not the total, as urllib3 counts it)."""

    read: float = DEFAULT_READ_SECONDS

    @property
    def connect(self) -> float:
        """The connect limit: :data:`CONNECT_SECONDS`, or the read limit when it is lower."""
        return min(CONNECT_SECONDS, self.read)

    @property
    def pair(self) -> tuple[float, float]:
        """The client's ``_request_timeout``: ``(connect, read)``."""
        return self.connect, self.read


class TimedDynamicClient(DynamicClient):  # type: ignore[misc]
    """A dynamic client whose requests, discovery too, wait at most ``timeout``: every request
    that is not a watch and gives no ``_request_timeout`` of its own is given it."""

    def __init__(
        self, client: Any, *, timeout: RequestTimeout, cache_file: str | None = None
    ) -> None:
        self.timeout = timeout  # before the client's discovery, which requests at once
        super().__init__(client, cache_file=cache_file)

    def request(self, method: str, path: str, body: Any = None, **params: Any) -> Any:
        """The client's request, with our time limit unless it is a watch."""
        if not params.get("watch") and params.get("_request_timeout") is None:
            params["_request_timeout"] = self.timeout.pair
        return super().request(method, path, body, **params)


def configuration() -> Any:
    """A client configuration whose requests are tried once: the client's own retries (three,
    each a urllib3 ``Retrying`` warning, each waiting its timeout again) would run under our
    steps' retries."""
    made = type.__call__(k8s_client.Configuration)  # not a copy of a default
    made.retries = 0
    return made
