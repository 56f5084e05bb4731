"""Watches on the in-memory cluster: the journal of its changes, read as a watch stream.

Every change the in-memory cluster stores (an object added, changed, its status set, deleted,
cascaded away) is noted here with its resourceVersion and a copy of the object as it was then,
so that a watch from any kept resourceVersion gets the same events, in the same order, as from
an API server, each stream ending with a bookmark. The journal keeps :data:`KEPT_EVENTS` events;
a watch from before the oldest kept one is answered 410 Gone
(:class:`~reconciler.errors.ExpiredError`), and :meth:`Journal.expire` forgets every event so
far, for tests of the relist. A stream with nothing to send waits for a change, at most its
timeout (none for a timeout of 0: tests read what is there). Caller:
:class:`reconciler.cluster.memory.InMemoryCluster`.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

from reconciler.cluster.api import WatchEvent, WatchEventType
from reconciler.cluster.memory_rules import labels_match
from reconciler.core.objects import Body
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
    ) -> tuple[list[WatchEvent], int]:
        """The events of ``kind`` after ``version`` whose object has ``labels`` (waiting up to
        ``timeout`` seconds for one when there is none yet), and the newest resourceVersion
        they were looked for up to (what the stream's bookmark says)."""
        with self._changed:
            oldest = max(self._expired, self._forgotten.get((group, kind), 0))
            if version < oldest:
                raise ExpiredError(
                    f"too old resource version: {version} (the oldest kept is {oldest})"
                )
            found = self._after(version, group, kind, labels)
            if not found and timeout > 0:
                self._changed.wait_for(lambda: self._newest > version, timeout)
                found = self._after(version, group, kind, labels)
            return found, max(version, self._newest)

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


def bookmark(version: int) -> WatchEvent:
    """The bookmark that ends a stream: everything up to ``version`` was sent."""
    return WatchEvent(WatchEventType.BOOKMARK, {"metadata": {"resourceVersion": str(version)}})
