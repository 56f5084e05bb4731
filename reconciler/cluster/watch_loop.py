"""The one event loop that reads every watch stream of the process (issue 43): an asyncio loop
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
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

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


#: The process's loop.
WATCH_LOOP = WatchLoop()
