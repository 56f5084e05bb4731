"""How many runtimes fleet-wide commands (``sync``, ``diff``, ``sync --dry-run``) work on at
once, and how that number ramps up (the clock is given).

``--parallel N`` threads share one Python process. When the work waits on API servers they
overlap well; when it is all CPU (snapshot clusters) they take turns on one core, and N runtimes
started together all finish late: the first result would wait for N runtimes' worth of work.
So the width starts at one and grows by one each time a runtime finishes and each ``step``
seconds, up to N: the first result comes as soon as one runtime's work allows, and a real
fleet's connections still open within a fraction of a second (16 workers: 0.75 s at most).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from reconciler.cli.clusters import is_folder

#: Seconds after which one more runtime may start even when none has finished.
RAMP_STEP = 0.05


def fleet_width(parallel: int, snapshot: str | None) -> int:
    """Runtimes at once for ``--parallel`` and ``--snapshot``: one snapshot file shared by every
    runtime is read and written by one runtime at a time."""
    return max(1, parallel if snapshot is None or is_folder(snapshot) else 1)


class RampUp:
    """The gate each runtime's work passes: at most ``width`` runtimes under way, where the
    width grows from one to ``limit`` (see the module docstring)."""

    def __init__(self, limit: int, clock: Callable[[], float], step: float = RAMP_STEP) -> None:
        self.limit = max(1, limit)
        self._clock = clock
        self._step = step
        self._start = clock()
        self._finished = 0
        self._active = 0
        self._changed = threading.Condition()

    def width(self) -> int:
        """How many runtimes may be under way now."""
        grown = self._finished + int((self._clock() - self._start) / self._step)
        return min(self.limit, 1 + grown)

    @contextmanager
    def slot(self) -> Iterator[None]:
        """Hold one of the places under way for the duration of the block (waiting for one)."""
        with self._changed:
            while self._active >= self.width():
                self._changed.wait(self._until_next_step())
            self._active += 1
        try:
            yield
        finally:
            with self._changed:
                self._active -= 1
                self._finished += 1
                self._changed.notify_all()

    def _until_next_step(self) -> float:
        elapsed = self._clock() - self._start
        return self._step - elapsed % self._step
