"""Waiting for the signal that stops the daemon (SIGTERM, SIGINT), whichever thread receives it.

The kernel hands a signal sent to a process to any of its threads that does not block it; Python
runs its handler later, in the main thread, and only once that thread runs bytecode again. A main
thread asleep on an Event therefore slept on when a worker thread received SIGTERM, and the
daemon hung at shutdown now and then. Here the main thread waits on a socket pair registered
with :func:`signal.set_wakeup_fd`: the C-level handler writes the signal's number into it
whichever thread it runs in, so the main thread wakes at once and reads which signal came.
Callers: the daemon command.
"""

from __future__ import annotations

import select
import signal
import socket
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any

#: What ``signal.signal`` returns and takes back: a handler, SIG_DFL or SIG_IGN, or None.
Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


class StopSignals:
    """``install()`` once in the main thread, then ``wait()`` until SIGTERM or SIGINT came."""

    def __init__(self, signals: Sequence[signal.Signals] = (signal.SIGTERM, signal.SIGINT)):
        self.signals = frozenset(int(s) for s in signals)
        self._reader: socket.socket | None = None
        self._writer: socket.socket | None = None
        self._before: tuple[int, dict[int, Handler]] = (-1, {})

    def install(self) -> None:
        """From now on these signals no longer end the process: they end :meth:`wait`."""
        self._reader, self._writer = socket.socketpair()
        self._writer.setblocking(False)  # the wakeup fd must never block a handler
        wakeup = signal.set_wakeup_fd(self._writer.fileno(), warn_on_full_buffer=False)
        self._before = (wakeup, {signum: signal.signal(signum, _noted) for signum in self.signals})

    def uninstall(self) -> None:
        """Back to the handlers and wakeup fd found at :meth:`install` (a start that failed
        leaves the process as it was: a command run in-process, as tests do)."""
        if self._reader is None or self._writer is None:
            return
        wakeup, handlers = self._before
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
        signal.set_wakeup_fd(wakeup)
        self._reader.close()
        self._writer.close()
        self._reader = self._writer = None

    def wait(self) -> int:
        """Block until one of the signals arrives (also one that came since :meth:`install`);
        returns its number. Later ones are ignored while the daemon shuts down."""
        reader = self._reader
        assert reader is not None, "install() first"
        while True:
            select.select([reader], [], [])
            for number in reader.recv(256):
                if number in self.signals:
                    return number


def _noted(signum: int, frame: FrameType | None) -> None:
    """The Python-level handler: nothing to do, the wakeup byte already told :meth:`wait`."""
