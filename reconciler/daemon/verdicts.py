"""The details of the daemon's commit records, typed; turned into JSON (the record's ``detail``,
and ``/status``) only at the edge, and read back from it in one place each.

- :class:`Reading`: a replica is reading the commit (READING); who, so that a reader that died
  counts as a crash and another live one does not.
- :class:`Waiting`: reading the commit failed in a way that may pass (PENDING): a fetch cut,
  an unreachable remote or channels source, a git timeout. It is tried again after
  :func:`backoff` and never refused for it; ``/status`` shows why it waits.
- :class:`Held`: the deletion brake holds the commit (HELD) until allowed.

Caller: :mod:`reconciler.daemon.service`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from reconciler.core.brake import Verdict
from reconciler.core.head import Head

#: The longest wait between two reads of a commit that failed transiently.
MAX_BACKOFF = timedelta(minutes=5)


@dataclass(frozen=True, slots=True)
class Reading:
    """Who is reading a commit."""

    reader: str

    def to_json(self) -> dict[str, Any]:
        """The record's detail."""
        return {"reader": self.reader}

    @classmethod
    def from_json(cls, detail: dict[str, Any]) -> Reading:
        """Inverse of :meth:`to_json` (an empty reader when none was recorded)."""
        return cls(str(detail.get("reader") or ""))


@dataclass(frozen=True, slots=True)
class Waiting:
    """A commit whose reading failed transiently: why, how many times in a row, and when it
    is read again."""

    commit: str
    reason: str
    failures: int
    retry_at: datetime

    @property
    def message(self) -> str:
        """One line for logs and ``/status``."""
        return (
            f"commit {self.commit[:12]} waits: {self.reason} (failed {self.failures} time(s), "
            f"tried again at {self.retry_at.isoformat()}); nothing is refused for it"
        )

    def to_json(self) -> dict[str, Any]:
        """The record's detail and ``/status``'s ``waiting``."""
        return {
            "commit": self.commit,
            "reason": self.reason,
            "failures": self.failures,
            "retryAt": self.retry_at.isoformat(),
            "message": self.message,
        }

    @classmethod
    def from_json(cls, detail: dict[str, Any]) -> Waiting:
        """Inverse of :meth:`to_json`."""
        return cls(
            str(detail.get("commit") or ""),
            str(detail.get("reason") or ""),
            int(detail.get("failures") or 0),
            datetime.fromisoformat(str(detail["retryAt"])),
        )


def failed(head: Head, reason: str, now: datetime, first: float, failures: int = 1) -> Waiting:
    """``head`` waits after its ``failures``-th failed read in a row."""
    return Waiting(head.text, reason, failures, now + backoff(failures, first))


def backoff(failures: int, first: float) -> timedelta:
    """The wait after ``failures`` failed reads in a row: ``first`` seconds (the error's own
    retry delay), doubled at each failure, at most :data:`MAX_BACKOFF`."""
    seconds = max(first, 1.0) * 2 ** min(failures - 1, 16)
    return min(timedelta(seconds=seconds), MAX_BACKOFF)


@dataclass(frozen=True, slots=True)
class Held:
    """What the brake holds, and how to let it through."""

    commit: str
    verdict: Verdict
    message: str

    def to_json(self) -> dict[str, Any]:
        """The record's detail and ``/status``'s ``held``."""
        deletions = self.verdict.deletions
        return {
            "commit": self.commit,
            "removals": deletions.count,
            "limit": self.verdict.limit,
            "askedLimit": self.verdict.asked,
            "runtimes": list(deletions.runtimes),
            "modules": list(deletions.modules),
            "crds": list(deletions.crds),
            "unread": list(self.verdict.unread),
            "message": self.message,
        }
