"""One kind watched on one cluster, and the cache its events keep (an informer, as client-go's).

:class:`KindWatch` lists the kind once and then watches it from the list's resourceVersion,
with bookmarks; each stream ends after its timeout or a dropped connection and the next one
resumes from the last resourceVersion seen (an event's or a bookmark's), so nothing is lost
between them. A 410 Gone (the server no longer keeps that resourceVersion) lists again, and
what changed since the cache was last told is passed on as events made from the difference
(added, changed: a new resourceVersion, deleted: gone from the list), so a relist loses no
change either. Any other error waits (:class:`Backoff`: 0.5 s doubled up to 30 s) and tries
again, but a 403 (:class:`~reconciler.errors.ForbiddenError`: the identity may not list or
watch the kind there) stops the watch: :attr:`KindWatch.refused` says why, and its owner
decides (no retry would help before a grant). The first list fills the cache without events:
only changes after it are news. Waiting goes through a seam (``wait``), so that tests drive
:meth:`KindWatch.step` without sleeping.
:meth:`KindWatch.close`, from any thread, hangs the stream under way up (:class:`Stop`, the
:class:`~reconciler.cluster.api.Hangup` of its streams) and ends a backoff's wait: the watch's
thread returns at once, not when the stream's timeout (minutes) ends it.
Caller: :mod:`reconciler.daemon.watches`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from reconciler.cluster.api import StreamWatchable, Watchable, WatchEvent, WatchEventType
from reconciler.core.objects import Body
from reconciler.errors import ExpiredError, ForbiddenError, InternalError, ReconcilerError

log = logging.getLogger(__name__)

#: What an event is passed to, with the object's state before it (None: not seen before).
OnEvent = Callable[[WatchEvent, Body | None], None]
#: How long one watch request stays open (the server ends it then; we resume).
STREAM_SECONDS = 300.0


@dataclass(slots=True)
class Backoff:
    """Growing delays between failed attempts (``first`` doubled up to ``most``), reset by a
    success."""

    first: float = 0.5
    most: float = 30.0
    _next: float = 0.0

    def delay(self) -> float:
        """The delay before the next attempt (longer each time)."""
        self._next = min(self.most, self._next * 2) if self._next else self.first
        return self._next

    def reset(self) -> None:
        """A success: the next failure waits ``first`` again."""
        self._next = 0.0


class Stop:
    """Told once to stop (:meth:`set`, from any thread): what a watch waits on between
    attempts, and the :class:`~reconciler.cluster.api.Hangup` of its streams (their hooks
    called by the thread that sets it)."""

    def __init__(self) -> None:
        self._set = threading.Event()
        self._lock = threading.Lock()
        self._hooks: dict[int, Callable[[], None]] = {}
        self._added = 0

    def set(self) -> None:
        """Stop: every stream hooked ends now."""
        with self._lock:
            if self._set.is_set():
                return
            self._set.set()
            hooks, self._hooks = list(self._hooks.values()), {}
        for hook in hooks:
            hook()

    def hung_up(self) -> bool:
        """Whether :meth:`set` was called."""
        return self._set.is_set()

    def wait(self, seconds: float) -> bool:
        """Wait ``seconds`` at most; whether to stop."""
        return self._set.wait(seconds)

    def on_hangup(self, hook: Callable[[], None]) -> Callable[[], None]:
        """See :meth:`reconciler.cluster.api.Hangup.on_hangup`."""
        with self._lock:
            if not self._set.is_set():
                key = self._added = self._added + 1
                self._hooks[key] = hook
                return lambda: self._forget(key)
        hook()
        return lambda: None

    def _forget(self, key: int) -> None:
        with self._lock:
            self._hooks.pop(key, None)


@dataclass(slots=True)
class WatchCounts:
    """What a watch did, for metrics and the bench."""

    events: int = 0
    expired: int = 0
    errors: int = 0


@dataclass(slots=True)
class KindWatch:
    """See the module docstring. ``wait(seconds)`` waits and says whether to stop (by
    default: on :attr:`stop`)."""

    cluster: Watchable
    api_version: str
    kind: str
    on_event: OnEvent
    labels: Mapping[str, str] = field(default_factory=dict)
    #: The namespace watched ("" for all).
    namespace: str = ""
    stream_seconds: float = STREAM_SECONDS
    wait: Callable[[float], bool] | None = None
    stop: Stop = field(default_factory=Stop)
    backoff: Backoff = field(default_factory=Backoff)
    counts: WatchCounts = field(default_factory=WatchCounts)
    #: The resourceVersion the next stream starts from ("" before the first list).
    resource_version: str = ""
    #: The objects seen, by (namespace, name), as the last event told them (what ``keep``
    #: keeps of each: by default the whole body).
    cache: dict[tuple[str, str], Body] = field(default_factory=dict)
    keep: Callable[[Body], Body] = field(default=lambda body: body)
    #: The last error, as one line (empty after a success).
    error: str = ""
    #: Why the server refused the list or watch (403; empty while it does not): stopped.
    refused: str = ""
    _listed: bool = False

    @property
    def what(self) -> str:
        """``Deployment (apps/v1)``, ``Deployment (apps/v1) in NAMESPACE``."""
        where = f" in {self.namespace}" if self.namespace else ""
        return f"{self.kind} ({self.api_version}){where}"

    def run(self) -> None:
        """Steps until closed."""
        while not self.stop.hung_up():
            if not self.step():
                return

    def close(self) -> None:
        """Stop (from any thread): the stream under way ends now, and :meth:`run` returns."""
        self.stop.set()

    def step(self) -> bool:
        """One list (none done, or the last stream expired) or one stream to its end;
        False when ``wait`` said to stop during a backoff."""
        delay = self._settle(self._attempt())
        if delay is None:
            return False
        return not (delay and (self.wait or self.stop.wait)(delay))

    async def run_async(self) -> None:
        """:meth:`run` as a task of the event loop (:mod:`reconciler.cluster.watch_loop`):
        :meth:`close`, from any thread, cancels the task (the stream under way ends now)."""
        loop, task = asyncio.get_running_loop(), asyncio.current_task()
        assert task is not None  # a coroutine of the loop runs in a task

        def cancel() -> None:
            loop.call_soon_threadsafe(task.cancel)

        forget = self.stop.on_hangup(cancel)
        try:
            while not self.stop.hung_up():
                if not await self.step_async():
                    return
        except asyncio.CancelledError:
            if not self.stop.hung_up():
                raise
        finally:
            forget()

    async def step_async(self) -> bool:
        """:meth:`step` in the event loop: streams read there
        (:meth:`~reconciler.cluster.api.StreamWatchable.watch_async`), lists in a worker
        thread, a backoff's wait an asyncio sleep (or ``wait``, when given)."""
        delay = self._settle(await self._attempt_async())
        if delay is None:
            return False
        if delay and self.wait is not None:
            return not self.wait(delay)
        await asyncio.sleep(delay)
        return True

    def _attempt(self) -> Exception | None:
        """One list or one stream; what failed it (None: nothing)."""
        try:
            if not self.resource_version:
                self._relist()
            else:
                self._stream()
        except Exception as error:
            return error
        return None

    async def _attempt_async(self) -> Exception | None:
        """:meth:`_attempt` in the event loop."""
        cluster = self.cluster
        try:
            if not self.resource_version:
                await asyncio.to_thread(self._relist)
            elif isinstance(cluster, StreamWatchable):
                events = cluster.watch_async(
                    self.api_version,
                    self.kind,
                    resource_version=self.resource_version,
                    labels=self.labels,
                    timeout_seconds=self.stream_seconds,
                    namespace=self.namespace or None,
                )
                async with contextlib.aclosing(events):  # its request ends with the stream
                    async for event in events:
                        self._take(event)
            else:
                await asyncio.to_thread(self._stream)
        except Exception as error:
            return error
        return None

    def _settle(self, error: Exception | None) -> float | None:
        """After an attempt that ``error`` failed (None: it worked): the seconds to wait
        before the next (0: none), or None to stop (refused, or closed)."""
        if isinstance(error, ExpiredError):
            self.counts.expired += 1
            log.info(
                "watch %s: resourceVersion %s expired, listing again",
                self.what,
                self.resource_version,
            )
            self.resource_version = ""
            return 0.0
        if isinstance(error, ForbiddenError):
            if not self.refused:  # the grant taken away while watching: once
                log.warning("watch %s: refused, stopped: %s", self.what, error)
            self.counts.errors += 1
            self.error = self.refused = str(error)
            return None
        if error is not None:  # a bug (in an event's handler) is one line too, tried again
            return self._failed(
                error if isinstance(error, ReconcilerError) else InternalError.of(error)
            )
        if self.error:
            log.info("watch %s: works again", self.what)
        self.backoff.reset()
        self.error = self.refused = ""
        return 0.0

    def _failed(self, error: ReconcilerError) -> float | None:
        """The backoff's wait after ``error`` (None: closed meanwhile)."""
        if self.stop.hung_up():
            return None  # a list under way when closed
        self.counts.errors += 1
        delay = self.backoff.delay()
        # once per change of state: the same failure again is not news
        say = log.warning if str(error) != self.error else log.debug
        say("watch %s: %s (tried again in %gs, and so on)", self.what, error, delay)
        self.error = str(error)
        return delay

    def prime(self) -> None:
        """The first list now, in the caller's thread (without a backoff: after a failure,
        :meth:`step` lists), so that a change from now on is an event; a 403 sets
        :attr:`refused` (the caller says it)."""
        try:
            self._relist()
            self.error = self.refused = ""
        except ReconcilerError as error:
            self.counts.errors += 1
            self.error = str(error)
            if isinstance(error, ForbiddenError):
                self.refused = self.error

    def _stream(self) -> None:
        events = self.cluster.watch(
            self.api_version,
            self.kind,
            resource_version=self.resource_version,
            labels=self.labels,
            timeout_seconds=self.stream_seconds,
            hangup=self.stop,
            namespace=self.namespace or None,
        )
        for event in events:
            self._take(event)

    def _take(self, event: WatchEvent) -> None:
        if event.resource_version:
            self.resource_version = event.resource_version
        if event.type is WatchEventType.BOOKMARK:
            return
        self.counts.events += 1
        key = _key(event.body)
        previous = self.cache.get(key)
        if event.type is WatchEventType.DELETED:
            self.cache.pop(key, None)
        else:
            self.cache[key] = self.keep(event.body)
        self.on_event(event, previous)

    def _relist(self) -> None:
        """List the kind; after the first list, pass on what changed since the cache."""
        listing = self.cluster.list_for_watch(
            self.api_version, self.kind, labels=self.labels, namespace=self.namespace or None
        )
        fresh = {_key(item): item for item in listing.items}
        news = [] if not self._listed else _differences(self.cache, fresh)
        self.cache = {key: self.keep(item) for key, item in fresh.items()}
        self._listed = True
        self.resource_version = listing.resource_version
        for event, previous in news:
            self.counts.events += 1
            self.on_event(event, previous)


def _differences(
    cached: Mapping[tuple[str, str], Body], fresh: Mapping[tuple[str, str], Body]
) -> list[tuple[WatchEvent, Body | None]]:
    """The events that take ``cached`` to ``fresh`` (with each object's state before)."""
    news: list[tuple[WatchEvent, Body | None]] = []
    for key, body in fresh.items():
        before = cached.get(key)
        if before is None:
            news.append((WatchEvent(WatchEventType.ADDED, body), None))
        elif _version(before) != _version(body):
            news.append((WatchEvent(WatchEventType.MODIFIED, body), before))
    for key, before in cached.items():
        if key not in fresh:
            news.append((WatchEvent(WatchEventType.DELETED, before), before))
    return news


def _key(body: Body) -> tuple[str, str]:
    metadata = body.get("metadata") or {}
    return str(metadata.get("namespace") or ""), str(metadata.get("name") or "")


def _version(body: Body) -> str:
    return str((body.get("metadata") or {}).get("resourceVersion") or "")
