"""Unexpected exceptions, as an operation records them and a person reads them (crash barrier).

An exception that is not one of ours (:class:`~reconciler.errors.ReconcilerError`) is a bug or
a surprise from a library. Inside a step, the engine turns it into that step's failure: the
exception's type, its message (one line, bounded, secret shapes masked) and the place it was
raised, ``file:line`` of the innermost frame inside the ``reconciler`` package (the line of ours
that called the code that failed, when that code is a plugin or a library). The operation fails,
the engine puts the runtime in ``Error`` (reason ``InternalError``) and the process goes on. The
traceback stays in memory only, for ``--debug`` (``RECONCILER_DEBUG=1``). Callers: the engine,
the CLI, the daemon.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from pathlib import Path

from reconciler.core.redaction import mask

#: The folder holding the ``reconciler`` package; places are shown relative to it.
_ROOT = Path(__file__).resolve().parents[2]
MESSAGE_SHOWN = 300


@dataclass(frozen=True, slots=True)
class Crash:
    """An unexpected exception: its type, message and place, and the exception itself (its
    traceback, kept in memory for ``--debug``)."""

    type: str
    message: str
    place: str
    error: BaseException

    @classmethod
    def of(cls, error: BaseException) -> Crash:
        """What ``error`` says, for the record."""
        return cls(type(error).__name__, one_line(str(error)), place_of(error), error)

    def describe(self) -> str:
        """``internal error: RuntimeError: boom (at reconciler/lifecycle/executor.py:281)``."""
        return f"internal error: {self.type}: {self.message} (at {self.place})"

    def traceback(self) -> str:
        """The full traceback, for ``--debug``."""
        return "".join(traceback.format_exception(self.error))


def one_line(text: str) -> str:
    """``text`` on one line, at most :data:`MESSAGE_SHOWN` characters, secrets masked."""
    flat = " ".join(mask(text).split()) or "(no message)"
    return flat if len(flat) <= MESSAGE_SHOWN else flat[: MESSAGE_SHOWN - 3] + "..."


def place_of(error: BaseException) -> str:
    """``reconciler/x/y.py:LINE`` of the innermost frame of ``error``'s traceback inside the
    package (the innermost frame of all when none is)."""
    frames = traceback.extract_tb(error.__traceback__)
    ours = [f for f in frames if _inside_package(f.filename)] or frames
    if not ours:
        return "unknown place"
    return f"{_shown(ours[-1].filename)}:{ours[-1].lineno}"


def _inside_package(filename: str) -> bool:
    path = Path(filename).resolve()
    return path.is_relative_to(_ROOT / "reconciler")


def _shown(filename: str) -> str:
    path = Path(filename).resolve()
    return path.relative_to(_ROOT).as_posix() if path.is_relative_to(_ROOT) else path.name
