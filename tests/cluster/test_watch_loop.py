"""The event loop's bridge to a blocking stream (``events_of_thread``: a server without HTTP/2):
its items come to the task in order, its error is raised there, and closing the task's
iterator stops the stream (its Stop set), as a hangup does."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from reconciler.cluster.watch import Stop
from reconciler.cluster.watch_loop import WATCH_LOOP, events_of_thread
from reconciler.errors import ServerError


def test_items_come_in_order_and_an_error_is_raised_in_the_task() -> None:
    def failing(_stop: Stop) -> Iterator[int]:
        yield from (1, 2)
        raise ServerError("connection reset")

    async def read(seen: list[int]) -> None:
        async for item in events_of_thread(failing):
            seen.append(item)

    seen: list[int] = []
    with pytest.raises(ServerError, match="connection reset"):
        WATCH_LOOP.start(read(seen)).result()
    assert seen == [1, 2]


@pytest.mark.timeout(60)  # a stream not stopped would block its thread for ever
def test_closing_the_iterator_stops_the_stream() -> None:
    stopped = threading.Event()

    def endless(stop: Stop) -> Iterator[int]:
        yield 1
        stop.wait(3600)
        stopped.set()

    async def first() -> int:
        events = events_of_thread(endless)
        item = await anext(events)
        await events.aclose()
        return item

    assert WATCH_LOOP.start(first()).result() == 1
    assert stopped.wait(60)
