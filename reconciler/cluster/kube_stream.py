"""Watch streams of the real API server read in the event loop
(:mod:`reconciler.cluster.watch_loop`), many over one HTTP/2 connection per server, as
client-go's are: :class:`HttpStreams` is one cluster's ``httpx`` client (HTTP/2 when the server
offers it over TLS, as the kube-apiserver does), made from the ``kubernetes`` client's
configuration (the server, its CA, the client certificate, the bearer token or exec plugin's,
``tls-server-name``, the default headers such as an impersonation), and
:meth:`HttpStreams.events` one watch request's events, read as plain JSON lines. Errors are
translated once, as the cluster's other requests are
(:func:`~reconciler.cluster.kube_errors.translated`): an answer's status or an ``ERROR`` event's
(410 Gone: :class:`~reconciler.errors.ExpiredError`; 403:
:class:`~reconciler.errors.ForbiddenError`), a failed connection naming the server and the
cause. A stream is hung up by cancelling the task reading it. Watch requests take no token of
the cluster's rate limit (one request a stream, minutes long; the limit's wait would block the
loop). The only importer of ``httpx``. Caller:
:class:`reconciler.cluster.kube_watch.KubeWatches`.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import exceptions as _dynamic_errors

from reconciler.cluster.api import WatchEvent, WatchEventType
from reconciler.cluster.kube_errors import translated

dynamic_errors: Any = _dynamic_errors
#: Seconds to connect (and to send a request).
CONNECT_SECONDS = 10.0
#: Seconds of silence past a stream's own timeout before the connection counts as dead.
SILENCE_SECONDS = 30.0
#: The event types passed on (``ERROR`` is raised).
PASSED = frozenset(t.value for t in WatchEventType)


class HttpStreams:
    """One cluster's watch streams (see the module docstring), from its ``kubernetes``
    client ``api_client``; the ``httpx`` client is made in the loop, at the first stream."""

    def __init__(self, api_client: Any) -> None:
        self._configuration = api_client.configuration
        self._headers = dict(getattr(api_client, "default_headers", {}) or {})
        self._client: httpx.AsyncClient | None = None
        #: The streams open now: the connection is closed when the last one ends.
        self._open = 0

    def _opened(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                http2=True,
                verify=_tls_of(self._configuration),
                trust_env=False,
                timeout=httpx.Timeout(CONNECT_SECONDS, read=None, pool=None),
            )
        return self._client

    def _auth_headers(self) -> dict[str, str]:
        """The headers that authenticate a request (a token refreshed by its hook)."""
        settings = self._configuration.auth_settings() or {}
        return {
            str(s["key"]): str(s["value"])
            for s in settings.values()
            if s.get("in") == "header" and s.get("value")
        }

    async def events(
        self, path: str, query: Mapping[str, str], timeout: float, what: str
    ) -> AsyncIterator[WatchEvent]:
        """The events of the watch request of ``path`` with ``query`` (its parameters), until
        the server ends it after ``timeout`` seconds; ``what`` names it in errors."""
        server = str(self._configuration.host or "")
        params = {**query, "watch": "true", "allowWatchBookmarks": "true"}
        params["timeoutSeconds"] = str(max(1, int(timeout)))
        self._open += 1
        try:
            async for event in self._read(server, path, params, timeout, what):
                yield event
        finally:
            self._open -= 1
            if not self._open and self._client is not None:  # no stream left: no connection
                client, self._client = self._client, None
                await client.aclose()

    async def _read(
        self, server: str, path: str, params: Mapping[str, str], timeout: float, what: str
    ) -> AsyncIterator[WatchEvent]:
        """The events of one watch request (see :meth:`events`)."""
        tls_name = getattr(self._configuration, "tls_server_name", None)
        with translated(what, server):
            try:
                async with self._opened().stream(
                    "GET",
                    server.rstrip("/") + path,
                    params=params,
                    headers={**self._headers, **self._auth_headers()},
                    timeout=httpx.Timeout(CONNECT_SECONDS, read=timeout + SILENCE_SECONDS),
                    extensions={"sni_hostname": tls_name} if tls_name else {},
                ) as response:
                    if response.status_code != 200:
                        body = (await response.aread()).decode(errors="replace")
                        raise _refused(response.status_code, response.reason_phrase, body)
                    async for line in response.aiter_lines():
                        event = _event_of(line)
                        if event is not None:
                            yield event
            except httpx.TransportError as error:  # translated as a failed connection
                raise OSError(f"{type(error).__name__}: {error}") from error


def _event_of(line: str) -> WatchEvent | None:
    """The event of one line of the stream (None: a blank line, a type not passed on); an
    ``ERROR`` event raised as its status."""
    if not line.strip():
        return None
    event = json.loads(line)
    body = event.get("object")
    if event.get("type") == "ERROR":
        status = body if isinstance(body, dict) else {}
        code, reason = int(status.get("code") or 500), str(status.get("reason") or "")
        raise _refused(code, reason, json.dumps(status))
    if event.get("type") not in PASSED or not isinstance(body, dict):
        return None
    return WatchEvent(WatchEventType(event["type"]), body)


def _refused(status: int, reason: str, body: str) -> Exception:
    """The client's exception for an answer of ``status`` (translated as any answer is)."""
    error = ApiException(status=status, reason=reason)
    error.body = body
    refused: Exception = dynamic_errors.api_exception(error)
    return refused


def _tls_of(configuration: Any) -> ssl.SSLContext | bool:
    """The TLS settings of the ``kubernetes`` client's ``configuration``."""
    if not configuration.verify_ssl:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    else:
        context = ssl.create_default_context(cafile=configuration.ssl_ca_cert or None)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file or None)
    return context
