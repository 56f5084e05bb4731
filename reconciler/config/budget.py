"""Time budgets for reading and checking a commit (rule C6) (pure: the clock is passed in).

A commit is hostile input: a file that takes too long to read or check must be refused, never
waited for. One :class:`TimeBudget` is made per read of a repo (``load_repo``); it allows each
file ``file_seconds`` in total (reading and checking it draw from the same allowance) and the
whole commit ``commit_seconds``. Slow work calls :meth:`TimeBudget.check` now and then (every
thousand YAML nodes, every schema error, every file); past a deadline it raises
:class:`~reconciler.errors.OverBudgetError`, which the reader and the validator turn into one
located C6 diagnostic. Callers: the loader, :mod:`reconciler.config.yamlsafe`, the validator, the
schema checker.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from reconciler.core.diagnostics import Diagnostic
from reconciler.errors import OverBudgetError

#: Seconds of the reading thread's CPU time allowed per file (reading and checking it), and per
#: commit; ``ReadOptions`` changes them.
DEFAULT_FILE_SECONDS = 10.0
DEFAULT_COMMIT_SECONDS = 120.0


class TimeBudget:
    """The deadlines of one read of a repo; the commit's clock starts when it is made."""

    __slots__ = (
        "_clock",
        "_commit_end",
        "_file",
        "_file_end",
        "_spent",
        "commit_seconds",
        "file_seconds",
    )

    def __init__(
        self,
        file_seconds: float = DEFAULT_FILE_SECONDS,
        commit_seconds: float = DEFAULT_COMMIT_SECONDS,
        clock: Callable[[], float] = time.thread_time,
    ) -> None:
        self.file_seconds = file_seconds
        self.commit_seconds = commit_seconds
        self._clock = clock
        self._commit_end = clock() + commit_seconds
        self._file: str | None = None
        self._file_end = math.inf
        self._spent: dict[str, float] = {}

    def file(self, path: str) -> FileBlock:
        """Work on ``path`` inside this block (``with budget.file(path):``) counts against
        that file's allowance (what an earlier block on the same file spent is deducted);
        nested blocks keep the outer file."""
        return FileBlock(self, path)

    def check(self) -> None:
        """Raise :class:`OverBudgetError` when the current file's or the commit's time is up."""
        now = self._clock()
        if now > self._file_end:
            raise OverBudgetError("file", self.file_seconds)
        if now > self._commit_end:
            raise OverBudgetError("commit", self.commit_seconds)

    def _start_file(self, path: str) -> float | None:
        """Start counting ``path``'s time (``None``: a block of another file is open)."""
        if self._file is not None:
            return None
        started = self._clock()
        self._file, self._file_end = path, started + self.file_seconds - self._spent.get(path, 0)
        try:
            self.check()
        except OverBudgetError:
            self._end_file(path, started)
            raise
        return started

    def _end_file(self, path: str, started: float) -> None:
        self._spent[path] = self._spent.get(path, 0) + self._clock() - started
        self._file, self._file_end = None, math.inf


class FileBlock:
    """One ``with budget.file(path):`` block (a class, not a generator: the loader and the
    validator open one per file, thousands per commit)."""

    __slots__ = ("_budget", "_path", "_started")

    def __init__(self, budget: TimeBudget, path: str) -> None:
        self._budget = budget
        self._path = path
        self._started: float | None = None

    def __enter__(self) -> None:
        self._started = self._budget._start_file(self._path)

    def __exit__(self, *_: object) -> None:
        if self._started is not None:
            self._budget._end_file(self._path, self._started)


def budget_diagnostic(
    over: OverBudgetError, path: str, line: int, column: int, *, doing: str = "", pointer: str = ""
) -> Diagnostic:
    """The C6 diagnostic of ``over``; the first place given is kept. ``doing`` names the work
    stopped there (``"the credential scan"``), ``pointer`` the value it was at."""
    if not isinstance(over.diagnostic, Diagnostic):
        message = f"{doing} stopped here: {over}" if doing else str(over)
        over.diagnostic = Diagnostic(path, line, column, "C6", message, pointer)
    return over.diagnostic
