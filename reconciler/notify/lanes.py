"""One lane per notification endpoint: a queue and a thread of its own, so that an endpoint that
is slow, trickles its answer or keeps failing (its tries and the waits between them) holds up
only its own notifications, never another endpoint's. Within a lane, jobs run in the order they
were put, so each endpoint still gets its notifications in order.

Callers: :mod:`reconciler.notify.delivery` (its worker puts each delivery in the lane of its
endpoint).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

from reconciler.notify.transport import WORKER_THREAD

log = logging.getLogger("reconciler.notify")

#: One delivery to one endpoint, ready to run.
Job = Callable[[], None]


class Lane:
    """The queue and the thread of one endpoint (started at its first job)."""

    def __init__(self, name: str, capacity: int) -> None:
        self.name = name
        self._queue: queue.Queue[Job | None] = queue.Queue(maxsize=capacity)
        self._thread = threading.Thread(target=self._work, name=WORKER_THREAD, daemon=True)
        self._thread.start()

    def put(self, job: Job) -> bool:
        """Queue ``job``; ``False`` when the lane is full (the caller drops it)."""
        try:
            self._queue.put_nowait(job)
        except queue.Full:
            return False
        return True

    def waiting(self) -> int:
        """Jobs queued, not taken yet."""
        return self._queue.qsize()

    def join(self) -> None:
        """Wait until every job queued so far has run."""
        self._queue.join()

    def stop(self, until: float) -> bool:
        """Let the queued jobs run until the monotonic time ``until``, then stop; whether the
        lane ended by then."""
        try:
            self._queue.put(None, timeout=max(0.0, until - time.monotonic()))
        except queue.Full:
            return False
        self._thread.join(max(0.0, until - time.monotonic()))
        return not self._thread.is_alive()

    def _work(self) -> None:
        while True:
            job = self._queue.get()
            try:
                if job is None:
                    return
                job()
            except Exception as error:  # a bug must not end the lane: later ones still go
                log.error("notification not handled: internal error %s", type(error).__name__)
            finally:
                self._queue.task_done()


class Lanes:
    """The lanes of a delivery, by endpoint name, each made at its endpoint's first job."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._lanes: dict[str, Lane] = {}
        self._lock = threading.Lock()

    def put(self, endpoint: str, job: Job) -> bool:
        """Queue ``job`` in ``endpoint``'s lane; ``False`` when that lane is full."""
        with self._lock:
            lane = self._lanes.get(endpoint)
            if lane is None:
                lane = self._lanes[endpoint] = Lane(endpoint, self.capacity)
        return lane.put(job)

    def waiting(self) -> int:
        """Jobs queued in every lane, not taken yet."""
        with self._lock:
            lanes = list(self._lanes.values())
        return sum(lane.waiting() for lane in lanes)

    def join(self) -> None:
        """Wait until every job queued so far in every lane has run."""
        with self._lock:
            lanes = list(self._lanes.values())
        for lane in lanes:
            lane.join()

    def stop(self, grace: float) -> list[str]:
        """Stop every lane, letting queued jobs run for ``grace`` seconds in all; the names of
        the lanes still busy then."""
        until = time.monotonic() + grace
        with self._lock:
            lanes = list(self._lanes.values())
        return [lane.name for lane in lanes if not lane.stop(until)]
