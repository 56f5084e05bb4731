"""Watches on the in-memory cluster: the journal of its changes, read as a watch stream.

Every change the in-memory cluster stores (an object added, changed, its status set, deleted,
cascaded away) is noted here with its resourceVersion and a copy of the object as it was then,
so that a watch from any kept resourceVersion gets the same events, in the same order, as from
an API server, each stream ending with a bookmark. The journal keeps :data:`KEPT_EVENTS` events;
a watch from before the oldest kept one is answered 410 Gone
(:class:`~reconciler.errors.ExpiredError`), and :meth:`Journal.expire` forgets every event so
far, for tests of the relist. A stream with nothing to send waits for a change, at most its
timeout (none for a timeout of 0: tests read what is there), or until it is hung up.
:class:`MemoryWatches` is the in-memory cluster's side of
:class:`~reconciler.cluster.api.Watchable`. Caller:
:class:`reconciler.cluster.memory.InMemoryCluster`.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import AsyncGenerator, Callable, Iterator, Mapping
from dataclasses import dataclass

from reconciler.cluster.api import Hangup, KindInfo, Listing, WatchEvent, WatchEventType
from reconciler.cluster.memory_fields import Stored, with_managed_fields
from reconciler.cluster.memory_rules import at_version, labels_match
from reconciler.core.objects import Body, ObjectRef
from reconciler.errors import ExpiredError

#: How many events the journal keeps (an API server keeps about five minutes of them).
KEPT_EVENTS = 10_000


@dataclass(frozen=True, slots=True)
class _Entry:
    version: int
    group: str
    kind: str
    event: WatchEvent


class Journal:
    """The changes of one in-memory cluster, in resourceVersion order, by kind."""

    def __init__(self, kept: int = KEPT_EVENTS) -> None:
        self._kept = kept
        self._entries: dict[tuple[str, str], deque[_Entry]] = {}
        #: Per kind, events at or before this resourceVersion are no longer kept.
        self._forgotten: dict[tuple[str, str], int] = {}
        #: Events of every kind at or before this resourceVersion are no longer kept.
        self._expired = 0
        self._newest = 0
        self._changed = threading.Condition()
        #: Told of each change, from the thread that stores it (:meth:`on_note`).
        self._hooks: dict[int, Callable[[], None]] = {}

    def note(
        self, version: int, group: str, kind: str, kind_of: WatchEventType, body: Body
    ) -> None:
        """Keep that ``body`` (a copy the caller no longer changes) was ``kind_of`` at
        ``version``."""
        with self._changed:
            entries = self._entries.setdefault((group, kind), deque(maxlen=self._kept))
            if len(entries) == entries.maxlen:
                self._forgotten[group, kind] = entries[0].version
            entries.append(_Entry(version, group, kind, WatchEvent(kind_of, body)))
            self._newest = max(self._newest, version)
            self._changed.notify_all()
            hooks = list(self._hooks.values())
        for hook in hooks:
            hook()

    def on_note(self, hook: Callable[[], None]) -> Callable[[], None]:
        """Call ``hook`` after each change noted from now on (in the thread noting it); returns
        what forgets it."""
        with self._changed:
            key = max(self._hooks, default=0) + 1
            self._hooks[key] = hook
        return lambda: self._forget(key)

    def _forget(self, key: int) -> None:
        with self._changed:
            self._hooks.pop(key, None)

    def expire(self, version: int) -> None:
        """Forget every event up to ``version``: a watch from before it gets 410 Gone."""
        with self._changed:
            self._expired = max(self._expired, version)
            for entries in self._entries.values():
                while entries and entries[0].version <= version:
                    entries.popleft()

    def events_after(
        self,
        version: int,
        group: str,
        kind: str,
        labels: Mapping[str, str],
        *,
        timeout: float = 0.0,
        hangup: Hangup | None = None,
    ) -> tuple[list[WatchEvent], int]:
        """The events of ``kind`` after ``version`` whose object has ``labels`` (waiting up to
        ``timeout`` seconds for one when there is none yet, unless ``hangup`` ends the wait),
        and the newest resourceVersion they were looked for up to (what the stream's bookmark
        says)."""
        with self._changed:
            oldest = max(self._expired, self._forgotten.get((group, kind), 0))
            if version < oldest:
                raise ExpiredError(
                    f"too old resource version: {version} (the oldest kept is {oldest})"
                )
            found = self._after(version, group, kind, labels)
            if not found and timeout > 0:
                self._wait_newer(version, timeout, hangup)
                found = self._after(version, group, kind, labels)
            return found, max(version, self._newest)

    def _wait_newer(self, version: int, timeout: float, hangup: Hangup | None) -> None:
        """Wait (holding the condition) for a change after ``version``, ``timeout`` seconds
        at most, or until hung up."""
        if hangup is None:
            self._changed.wait_for(lambda: self._newest > version, timeout)
            return
        forget = hangup.on_hangup(self._wake)
        try:
            self._changed.wait_for(lambda: self._newest > version or hangup.hung_up(), timeout)
        finally:
            forget()

    def _wake(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def _after(
        self, version: int, group: str, kind: str, labels: Mapping[str, str]
    ) -> list[WatchEvent]:
        """From the newest back to ``version``: as many steps as there are news."""
        found = []
        for entry in reversed(self._entries.get((group, kind), ())):
            if entry.version <= version:
                break
            if labels_match(entry.event.body, labels):
                found.append(entry.event)
        found.reverse()
        return found


def _as_served(
    found: list[WatchEvent], newest: int, api_version: str, namespace: str | None
) -> list[WatchEvent]:
    """The journal's events ``found`` as a stream serves them: those in ``namespace`` (or all),
    in ``api_version``, then the bookmark of ``newest``."""
    if namespace is not None:
        found = [e for e in found if ObjectRef.of(e.body).namespace == namespace]
    at = [WatchEvent(e.type, at_version(e.body, api_version)) for e in found]
    return [*at, bookmark(newest)]


def bookmark(version: int) -> WatchEvent:
    """The bookmark that ends a stream: everything up to ``version`` was sent."""
    return WatchEvent(WatchEventType.BOOKMARK, {"metadata": {"resourceVersion": str(version)}})


class MemoryWatches:
    """List-then-watch of any kind, for :class:`~reconciler.cluster.memory.InMemoryCluster`
    (which provides the journal, the lists, the served kinds and the injected faults), and the
    journal's note of each change it stores."""

    journal: Journal
    _resource_version: int
    #: The reviewer's refusal of what the identity may not do (memory_review).
    _refuse_unless_allowed: Callable[[str, KindInfo, str | None], None]

    def list_objects(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> list[Body]:
        raise NotImplementedError

    def _enter(self, operation: str, ref: ObjectRef | None) -> None:
        raise NotImplementedError

    def _served(self, api_version: str, kind: str) -> KindInfo:
        raise NotImplementedError

    def list_for_watch(
        self,
        api_version: str,
        kind: str,
        *,
        labels: Mapping[str, str] | None = None,
        namespace: str | None = None,
    ) -> Listing:
        """See :meth:`reconciler.cluster.api.Watchable.list_for_watch`."""
        items = self.list_objects(api_version, kind, labels=labels, namespace=namespace)
        return Listing(items, str(self._resource_version))

    def watch(
        self,
        api_version: str,
        kind: str,
        *,
        resource_version: str,
        labels: Mapping[str, str] | None = None,
        timeout_seconds: float = 60.0,
        hangup: Hangup | None = None,
        namespace: str | None = None,
    ) -> Iterator[WatchEvent]:
        """See :meth:`reconciler.cluster.api.Watchable.watch`: the journal's events, then a
        bookmark; a fault injected for ``watch`` is raised before any event (a dropped
        connection), a 403 when the identity may not watch the kind there."""
        self._enter("watch", None)
        info = self._served(api_version, kind)
        self._refuse_unless_allowed("watch", info, namespace)
        found, newest = self.journal.events_after(
            int(resource_version or 0),
            info.group,
            info.kind,
            labels or {},
            timeout=timeout_seconds,
            hangup=hangup,
        )
        return iter(_as_served(found, newest, api_version, namespace))

    async def watch_async(
        self,
        api_version: str,
        kind: str,
        *,
        resource_version: str,
        labels: Mapping[str, str] | None = None,
        timeout_seconds: float = 60.0,
        namespace: str | None = None,
    ) -> AsyncGenerator[WatchEvent, None]:
        """See :meth:`reconciler.cluster.api.StreamWatchable.watch_async`: :meth:`watch`,
        its wait for a change an asyncio one (the journal's :meth:`Journal.on_note` sets it)."""
        self._enter("watch", None)
        info = self._served(api_version, kind)
        self._refuse_unless_allowed("watch", info, namespace)
        loop, changed = asyncio.get_running_loop(), asyncio.Event()

        def tell() -> None:
            loop.call_soon_threadsafe(changed.set)

        forget = self.journal.on_note(tell)
        try:
            start = int(resource_version or 0)
            found, newest = self.journal.events_after(start, info.group, info.kind, labels or {})
            if not found and timeout_seconds > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), timeout_seconds)
                found, newest = self.journal.events_after(
                    start, info.group, info.kind, labels or {}
                )
        finally:
            forget()
        for event in _as_served(found, newest, api_version, namespace):
            yield event

    def expire_history(self) -> None:
        """Forget every change so far: a watch from an older resourceVersion is answered 410
        Gone (the server compacted its history)."""
        self.journal.expire(self._resource_version)

    def _note(self, kind_of: WatchEventType, stored: Stored) -> None:
        body = with_managed_fields(stored)
        ref = ObjectRef.of(body)
        version = int(body["metadata"]["resourceVersion"])
        self.journal.note(version, ref.group, ref.kind, kind_of, body)
