"""Progress of fleet-wide work (``sync`` over many runtimes), on standard error.

On a terminal: one line redrawn in place, at most ten times a second, with the counts done /
failed / waiting of the total, the rate and the time left; output printed meanwhile (each
runtime's result, as it finishes) goes above it. Elsewhere (CI logs, a pipe): a plain progress
line every ``every`` seconds, and none for work shorter than that. Either way the last line is
the summary. The clock is given (tests pass a fake one); standard library only.

Before a large run reads its repo, :func:`announce_repo` says so at once (the imports, reading
and validating thousands of runtimes take seconds).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

#: From how many runtimes a run says first what it reads: the repo, and the clusters the
#: deletion brake reads (:func:`reconciler.cli.plans.announce_reading`).
ANNOUNCED_FROM = 50


def announce_repo(repo: Path, out: TextIO) -> None:
    """One line on ``out`` before a repo of many runtimes is read and validated, said before
    the command imports what reads it: the first line of a large run comes at once. The count
    is one listing of ``runtimes/`` (validation reads the files after)."""
    try:
        with os.scandir(repo / "runtimes") as entries:
            count = sum(1 for entry in entries if entry.name.endswith(".yaml"))
    except OSError:
        return  # not a folder of runtimes: validation says what is wrong
    if count >= ANNOUNCED_FROM:
        print(f"reading and validating the {count} runtimes of {repo}", file=out, flush=True)


@dataclass(slots=True)
class Counts:
    """How many runtimes ended each way so far."""

    done: int = 0
    failed: int = 0
    waiting: int = 0

    @property
    def finished(self) -> int:
        """Runtimes whose run is over, however it ended."""
        return self.done + self.failed + self.waiting


class Progress:
    """Counts of ``total`` runtimes, shown on ``stream`` (see the module docstring)."""

    def __init__(
        self,
        total: int,
        stream: TextIO,
        clock: Callable[[], float],
        *,
        terminal: bool,
        every: float = 10.0,
        verb: str = "synced",
    ) -> None:
        self.total = total
        #: What the summary says was done to the runtimes (``synced``, ``planned``).
        self.verb = verb
        self.counts = Counts()
        self._stream = stream
        self._clock = clock
        self._terminal = terminal
        self._every = every
        self._start = clock()
        self._shown = self._start
        self._drawn = False
        self._lock = threading.Lock()

    def finished(self, outcome: str, output: str = "", out: TextIO | None = None) -> None:
        """One runtime is over (``outcome``: done, failed or waiting); print its ``output`` on
        ``out`` first, above the progress line."""
        with self._lock:
            setattr(self.counts, outcome, getattr(self.counts, outcome) + 1)
            if output and out is not None:
                self._clear()
                out.write(output)
                out.flush()
            self._show()

    def write(self, output: str, out: TextIO) -> None:
        """Print ``output`` on ``out`` above the progress line, counting nothing."""
        with self._lock:
            if output:
                self._clear()
                out.write(output)
                out.flush()
                self._show()

    def line(self) -> str:
        """``120/5000 runtimes: 117 done, 2 failed, 1 waiting, 41.2/s, about 1m58s left``."""
        counts, elapsed = self.counts, max(self._clock() - self._start, 1e-9)
        rate = counts.finished / elapsed
        text = (
            f"{counts.finished}/{self.total} runtimes: {counts.done} done, {counts.failed} "
            f"failed, {counts.waiting} waiting, {rate:.1f}/s"
        )
        if 0 < counts.finished < self.total and rate > 0:
            text += f", about {_duration((self.total - counts.finished) / rate)} left"
        return text

    def summary(self) -> str:
        """The last line: the counts and the time it all took."""
        counts = self.counts
        return (
            f"{self.verb} {counts.finished} of {self.total} runtimes in "
            f"{_duration(self._clock() - self._start)}: {counts.done} done, {counts.failed} "
            f"failed, {counts.waiting} waiting"
        )

    def close(self, note: str = "", *, summary: bool = True) -> None:
        """Replace the progress line by the summary (and ``note``, if any), or by nothing."""
        with self._lock:
            self._clear()
            if summary or note:
                self._stream.write(self.summary() + (f"; {note}" if note else "") + "\n")
            self._stream.flush()

    def _show(self) -> None:
        now = self._clock()
        if self._terminal:
            if now - self._shown >= 0.1 or not self._drawn:
                self._stream.write("\r\x1b[2K" + self.line())
                self._stream.flush()
                self._shown, self._drawn = now, True
        elif now - self._shown >= self._every:
            self._stream.write("progress: " + self.line() + "\n")
            self._stream.flush()
            self._shown = now

    def _clear(self) -> None:
        if self._drawn:
            self._stream.write("\r\x1b[2K")
            self._drawn = False


def _duration(seconds: float) -> str:
    """``4.2s``, ``3m05s``, ``1h02m``."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, rest = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{rest:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
