"""The details of the daemon's commit records, typed; turned into JSON (the record's ``detail``,
and ``/status``) only at the edge, and read back from it in one place each.

- :class:`Reading`: a replica is reading the commit (READING); who, so that a reader that died
  counts as a crash and another live one does not.
- :class:`Waiting`: reading the commit failed in a way that may pass (PENDING): a fetch cut,
  an unreachable remote or channels source, a git timeout. It is tried again after
  :func:`backoff` and never refused for it; ``/status`` shows why it waits.
- :class:`Held`: the deletion brake holds the commit (HELD) until allowed.
- :class:`Refusal`: the commit is refused (REFUSED): its diagnostics, or why it cannot be read.
- :func:`refused_notification` and :func:`held_notification`: what people are told of a
  refused or held commit (:mod:`reconciler.core.notifications`).
- :class:`Allowed`: an ACCEPTED record's ``--allow-deletions`` that let a held commit through
  (the store reads it back under :data:`~reconciler.operations.store.ALLOWED_DELETIONS`).

:func:`detail_of` reads a record's detail back as the value of its verdict, and
:func:`encode` turns any of them into the record's detail: the one encode/decode pair.

Caller: :mod:`reconciler.daemon.commits`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from reconciler.core.brake import Verdict
from reconciler.core.head import Head
from reconciler.core.notifications import Notification, NotificationKind
from reconciler.operations.model import CommitRecord, CommitVerdict
from reconciler.operations.store import ALLOWED_DELETIONS

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
    removals: int
    limit: int
    asked_limit: int | None
    runtimes: tuple[str, ...]
    modules: tuple[str, ...]
    crds: tuple[str, ...]
    unread: tuple[str, ...]
    message: str

    @classmethod
    def of(cls, commit: str, verdict: Verdict, message: str) -> Held:
        """The brake's ``verdict`` on ``commit``."""
        deletions = verdict.deletions
        return cls(
            commit,
            deletions.count,
            verdict.limit,
            verdict.asked,
            tuple(deletions.runtimes),
            tuple(deletions.modules),
            tuple(deletions.crds),
            tuple(verdict.unread),
            message,
        )

    def to_json(self) -> dict[str, Any]:
        """The record's detail and ``/status``'s ``held``."""
        return {
            "commit": self.commit,
            "removals": self.removals,
            "limit": self.limit,
            "askedLimit": self.asked_limit,
            "runtimes": list(self.runtimes),
            "modules": list(self.modules),
            "crds": list(self.crds),
            "unread": list(self.unread),
            "message": self.message,
        }

    @classmethod
    def from_json(cls, detail: dict[str, Any]) -> Held:
        """Inverse of :meth:`to_json`."""
        asked = detail.get("askedLimit")
        return cls(
            str(detail.get("commit") or ""),
            int(detail.get("removals") or 0),
            int(detail.get("limit") or 0),
            int(asked) if asked is not None else None,
            _texts(detail.get("runtimes")),
            _texts(detail.get("modules")),
            _texts(detail.get("crds")),
            _texts(detail.get("unread")),
            str(detail.get("message") or ""),
        )


@dataclass(frozen=True, slots=True)
class Refusal:
    """A refused commit: its diagnostics (as ``reconciler validate -o json`` shows each; none
    when it could not be read at all), the commits whose signature is to blame (as
    :meth:`reconciler.core.signatures.CommitSignature.to_json` shows each; none when it was
    refused for anything else) and one line saying so."""

    commit: str
    errors: tuple[dict[str, Any], ...]
    message: str
    signatures: tuple[dict[str, Any], ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The record's detail and ``/status``'s ``refused``."""
        return {
            "commit": self.commit,
            "errors": list(self.errors),
            "signatures": list(self.signatures),
            "message": self.message,
        }

    @classmethod
    def from_json(cls, detail: dict[str, Any]) -> Refusal:
        """Inverse of :meth:`to_json`."""
        errors = detail.get("errors") or []
        signatures = detail.get("signatures") or []
        return cls(
            str(detail.get("commit") or ""),
            tuple(dict(e) for e in errors if isinstance(e, dict)),
            str(detail.get("message") or ""),
            tuple(dict(s) for s in signatures if isinstance(s, dict)),
        )


def refused_notification(head: Head, refusal: Refusal, at: datetime, reason: str) -> Notification:
    """What people are told of a refused commit: its one line, how many errors, and the first
    one (``file:line:column: RULE message``, and its ``file`` and ``line`` apart) or why it
    could not be read."""
    details: dict[str, str | int] = {"errors": len(refusal.errors)}
    if reason:
        details["reason"] = reason
    if refusal.errors:
        first = refusal.errors[0]
        details["file"], details["line"] = str(first.get("path", "")), int(first.get("line", 0))
    return Notification(
        NotificationKind.COMMIT_REFUSED,
        head.text,
        refusal.message,
        at,
        key=f"refused-{head.text}",
        details=details,
    )


def held_notification(head: Head, held: Held, at: datetime) -> Notification:
    """What people are told of a commit the deletion brake holds: how many removals over which
    limit, and the flag that lets it through."""
    details: dict[str, str | int] = {
        "removals": held.removals,
        "limit": held.limit,
        "allowWith": f"--allow-deletions {head.shown}",
    }
    return Notification(
        NotificationKind.COMMIT_HELD,
        head.text,
        held.message,
        at,
        key=f"held-{head.text}",
        details=details,
    )


@dataclass(frozen=True, slots=True)
class Allowed:
    """The ``--allow-deletions`` an ACCEPTED commit was let through the brake with ("": none)."""

    flag: str = ""

    def to_json(self) -> dict[str, Any]:
        """The record's detail: nothing when no flag let it through."""
        return {ALLOWED_DELETIONS: self.flag} if self.flag else {}

    @classmethod
    def from_json(cls, detail: dict[str, Any]) -> Allowed:
        """Inverse of :meth:`to_json`."""
        return cls(str(detail.get(ALLOWED_DELETIONS) or ""))


#: What a commit record's detail holds, by its verdict.
Detail = Reading | Waiting | Held | Refusal | Allowed

_DECODERS: dict[CommitVerdict, Any] = {
    CommitVerdict.READING: Reading.from_json,
    CommitVerdict.PENDING: Waiting.from_json,
    CommitVerdict.HELD: Held.from_json,
    CommitVerdict.REFUSED: Refusal.from_json,
    CommitVerdict.ACCEPTED: Allowed.from_json,
}


def detail_of(record: CommitRecord) -> Detail:
    """The detail of ``record`` as the value of its verdict (the decoding half)."""
    decoded: Detail = _DECODERS[record.verdict](record.detail)
    return decoded


def encode(detail: Detail | None) -> dict[str, Any]:
    """A record's detail (the encoding half; ``{}`` for none)."""
    return detail.to_json() if detail is not None else {}


def _texts(value: object) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list | tuple) else ()
