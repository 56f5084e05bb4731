"""Watch streams of the real API server read in the event loop
(:mod:`reconciler.cluster.watch_loop`), many over one HTTP/2 connection per server, as
client-go's are. :class:`HttpStreams` is one cluster's connection, made from the ``kubernetes``
client's configuration (the server, its CA, the client certificate, the bearer token or exec
plugin's, ``tls-server-name``, the default headers such as an impersonation); its
:meth:`HttpStreams.events` is one watch request's events, read as plain JSON lines. One reader
task per connection reads every frame and hands each stream its own (``h2`` does the framing,
HPACK and flow control): a stream's event waits for no other stream. TLS runs in memory
(:class:`ssl.SSLObject` over a plain connection: no 256 KiB buffer per connection, as asyncio's
TLS transport keeps). Errors are translated once, as the cluster's other requests are
(:func:`~reconciler.cluster.kube_errors.translated`): an answer's status or an ``ERROR``
event's (410 Gone: :class:`~reconciler.errors.ExpiredError`; 403:
:class:`~reconciler.errors.ForbiddenError`), a lost connection naming the server and the cause.
A stream is hung up by cancelling the task reading it (its stream is reset; the connection
closes with its last stream). A server that does not speak HTTP/2 (plain ``http``, no ``h2``
offered) raises :class:`NoHttp2Error` (the caller reads that server's streams another way). Watch
requests take no token of the cluster's rate limit (one request a stream, minutes long; the
limit's wait would block the loop). The only importer of ``h2``. Caller:
:class:`reconciler.cluster.kube_watch.KubeWatches`.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import urlencode, urlsplit

import h2.config
import h2.connection
import h2.events
import h2.exceptions
from h2.errors import ErrorCodes
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import exceptions as _dynamic_errors

from reconciler.cluster.api import WatchEvent, WatchEventType
from reconciler.cluster.kube_errors import translated

dynamic_errors: Any = _dynamic_errors
#: Seconds to connect (TLS included).
CONNECT_SECONDS = 10.0
#: Seconds of silence past a stream's own timeout before the connection counts as dead.
SILENCE_SECONDS = 30.0
#: Bytes read from the socket at once.
READ_BYTES = 65536
#: The event types passed on (``ERROR`` is raised).
PASSED = frozenset(t.value for t in WatchEventType)
#: What a stream's queue is told when its connection is gone.
_LOST = None


class NoHttp2Error(Exception):
    """The server does not speak HTTP/2 (plain ``http``, or no ``h2`` in TLS's ALPN)."""


class _Tls:
    """TLS over a plain connection, in memory (see the module docstring)."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, context: ssl.SSLContext,
        name: str,
    ) -> None:  # fmt: skip
        self._reader, self._writer = reader, writer
        self._incoming, self._outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._incoming, self._outgoing, server_hostname=name)

    async def handshake(self) -> str | None:
        """The handshake; the protocol ALPN chose."""
        while True:
            try:
                self._tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                await self._pull()
        self._push()
        return self._tls.selected_alpn_protocol()

    async def read(self) -> bytes:
        """Bytes from the server (empty: it closed the connection)."""
        while True:
            try:
                return self._tls.read(READ_BYTES)
            except ssl.SSLWantReadError:
                if not await self._pull():
                    return b""
            except ssl.SSLZeroReturnError:
                return b""

    def write(self, data: bytes) -> None:
        if data:
            self._tls.write(data)
            self._push()

    def close(self) -> None:
        self._writer.close()

    async def _pull(self) -> bool:
        self._push()
        data = await self._reader.read(READ_BYTES)
        if not data:
            self._incoming.write_eof()
            return False
        self._incoming.write(data)
        return True

    def _push(self) -> None:
        data = self._outgoing.read()
        if data:
            self._writer.write(data)


class _Connection:
    """One HTTP/2 connection: its reader task hands each stream's frames to its queue."""

    def __init__(self, tls: _Tls, authority: str) -> None:
        self._tls = tls
        self._authority = authority.encode()
        config = h2.config.H2Configuration(client_side=True, header_encoding=None)
        self._h2 = h2.connection.H2Connection(config)
        self._queues: dict[int, asyncio.Queue[h2.events.Event | None]] = {}
        self.closed = False
        self._h2.initiate_connection()
        self._flush()
        self._reader = asyncio.get_running_loop().create_task(self._read())

    @property
    def streams(self) -> int:
        return len(self._queues)

    def open(self, path: str, headers: Mapping[str, str]) -> tuple[int, asyncio.Queue[Any]]:
        """A GET of ``path``: its stream, and the queue its frames come to."""
        stream = self._h2.get_next_available_stream_id()
        sent = [(b":method", b"GET"), (b":scheme", b"https"), (b":authority", self._authority)]
        sent += [(b":path", path.encode())]
        sent += [(k.lower().encode(), v.encode()) for k, v in headers.items()]
        self._h2.send_headers(stream, sent, end_stream=True)
        queue: asyncio.Queue[h2.events.Event | None] = asyncio.Queue()
        self._queues[stream] = queue
        self._flush()
        return stream, queue

    def forget(self, stream: int) -> None:
        """The stream ended or is hung up: reset (when still open), no more frames to it."""
        self._queues.pop(stream, None)
        if self.closed:
            return
        try:
            self._h2.reset_stream(stream, ErrorCodes.CANCEL)
            self._flush()
        except h2.exceptions.H2Error:  # ended already
            pass
        if not self._queues:  # no stream left: no connection
            self.close()

    def acknowledge(self, event: h2.events.DataReceived) -> None:
        """``event``'s bytes were read: the server may send as many more."""
        if not self.closed and event.stream_id is not None:
            self._h2.acknowledge_received_data(event.flow_controlled_length or 0, event.stream_id)
            self._flush()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._reader.cancel()
            self._tls.close()

    async def _read(self) -> None:
        try:
            while data := await self._tls.read():
                for event in self._h2.receive_data(data):
                    self._dispatch(event)
                self._flush()
        except (OSError, ssl.SSLError, h2.exceptions.H2Error):
            pass  # each stream is told the connection is gone
        finally:
            self.closed = True
            self._tls.close()
            for queue in self._queues.values():
                queue.put_nowait(_LOST)

    def _dispatch(self, event: h2.events.Event) -> None:
        if isinstance(event, h2.events.ConnectionTerminated):
            self.closed = True  # no new stream; those under way end by themselves
            return
        stream = getattr(event, "stream_id", None)
        queue = self._queues.get(stream) if isinstance(stream, int) else None
        if queue is not None:
            queue.put_nowait(event)
        elif isinstance(event, h2.events.DataReceived):  # a stream hung up: its window back
            self._h2.acknowledge_received_data(event.flow_controlled_length or 0, event.stream_id)

    def _flush(self) -> None:
        self._tls.write(self._h2.data_to_send())


class HttpStreams:
    """One cluster's watch streams (see the module docstring), from its ``kubernetes``
    client ``api_client``; the connection is made in the loop, at the first stream."""

    def __init__(self, api_client: Any) -> None:
        self._configuration = api_client.configuration
        self._headers = dict(getattr(api_client, "default_headers", {}) or {})
        self._connection: _Connection | None = None
        self._connecting: asyncio.Lock | None = None
        self._tls: ssl.SSLContext | None = None

    @property
    def server(self) -> str:
        return str(self._configuration.host or "")

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
        params = {**query, "watch": "true", "allowWatchBookmarks": "true"}
        params["timeoutSeconds"] = str(max(1, int(timeout)))
        with translated(what, self.server):
            connection = await self._connected()
            stream, queue = connection.open(
                f"{path}?{urlencode(params)}", {**self._headers, **self._auth_headers()}
            )
            try:
                async for event in _events(connection, queue, timeout + SILENCE_SECONDS):
                    yield event
            finally:
                connection.forget(stream)

    async def _connected(self) -> _Connection:
        """The cluster's connection (made again when it was closed)."""
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self._connection is None or self._connection.closed:
                self._connection = await asyncio.wait_for(self._connect(), CONNECT_SECONDS)
            return self._connection

    async def _connect(self) -> _Connection:
        url = urlsplit(self.server)
        if url.scheme != "https" or not url.hostname:
            raise NoHttp2Error(self.server)
        if self._tls is None:
            self._tls = _tls_of(self._configuration)
        name = getattr(self._configuration, "tls_server_name", None) or url.hostname
        reader, writer = await asyncio.open_connection(url.hostname, url.port or 443)
        secured = _Tls(reader, writer, self._tls, name)
        try:
            protocol = await secured.handshake()
        except BaseException:
            secured.close()
            raise
        if protocol != "h2":
            secured.close()
            raise NoHttp2Error(self.server)
        return _Connection(secured, url.netloc)


async def _events(
    connection: _Connection, queue: asyncio.Queue[Any], silence: float
) -> AsyncIterator[WatchEvent]:
    """The events of one stream's frames (``queue``), each line of its body an event."""
    status, pending, body = 0, b"", b""
    while True:
        frame = await asyncio.wait_for(queue.get(), silence)
        if frame is _LOST:
            raise ConnectionResetError("the connection to the API server was lost")
        if isinstance(frame, h2.events.ResponseReceived):
            status = int(dict(frame.headers or []).get(b":status", b"0"))
        elif isinstance(frame, h2.events.DataReceived):
            connection.acknowledge(frame)
            if status != 200:
                body += frame.data or b""
                continue
            *lines, pending = (pending + (frame.data or b"")).split(b"\n")
            for line in lines:
                event = event_of_line(line)
                if event is not None:
                    yield event
        elif isinstance(frame, h2.events.StreamReset):
            raise ConnectionResetError(f"the API server reset the stream ({frame.error_code})")
        elif isinstance(frame, h2.events.StreamEnded):
            if status != 200:
                raise _refused(status, "", body.decode(errors="replace"))
            return


def event_of_line(line: bytes) -> WatchEvent | None:
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


def _tls_of(configuration: Any) -> ssl.SSLContext:
    """The TLS settings of the ``kubernetes`` client's ``configuration``, offering HTTP/2."""
    if not configuration.verify_ssl:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    else:
        context = ssl.create_default_context(cafile=configuration.ssl_ca_cert or None)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file or None)
    context.set_alpn_protocols(["h2"])
    return context
