"""The one event loop that reads every watch stream of the process: an asyncio loop
on a thread of its own, started at its first use, where each watch is a task
(:meth:`reconciler.cluster.watch.KindWatch.run_async`) and not a thread; the real API server's
streams share one HTTP/2 connection per server (:mod:`reconciler.cluster.kube_stream`), as
client-go's do. :meth:`WatchLoop.start` hands a coroutine to it from any thread. A task blocks
nothing but itself when it awaits; what a task runs without awaiting (an event's handler, a
list: :func:`asyncio.to_thread`) must stay short. Callers: :mod:`reconciler.daemon.watches`,
the contract tests.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, Callable, Coroutine, Iterator
from concurrent.futures import Future
from typing import Any, TypeVar

from reconciler.cluster.watch import Stop

_T = TypeVar("_T")


class WatchLoop:
    """See the module docstring."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self, coroutine: Coroutine[Any, Any, _T]) -> Future[_T]:
        """Run ``coroutine`` as a task of the loop; its outcome, for any thread to wait on."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._running())

    def _running(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=self._loop.run_forever, name="watch-loop", daemon=True
                )
                thread.start()
            return self._loop


async def events_of_thread(
    stream: Callable[[Stop], Iterator[_T]],
) -> AsyncGenerator[_T, None]:
    """The items of ``stream`` (a blocking iterator, given the :class:`Stop` that ends it),
    read on a thread of its own, for a task of the loop; closing this ends it."""
    loop, queue = asyncio.get_running_loop(), asyncio.Queue[tuple[bool, Any]]()
    stop = Stop()

    def read() -> None:
        try:
            for item in stream(stop):
                loop.call_soon_threadsafe(queue.put_nowait, (True, item))
        except BaseException as error:  # handed to the task, raised there
            loop.call_soon_threadsafe(queue.put_nowait, (False, error))
            return
        loop.call_soon_threadsafe(queue.put_nowait, (False, None))

    threading.Thread(target=read, name="watch", daemon=True).start()
    try:
        while True:
            more, item = await queue.get()
            if not more:
                if item is not None:
                    raise item
                return
            yield item
    finally:
        stop.set()


#: The process's loop.
WATCH_LOOP = WatchLoop()
