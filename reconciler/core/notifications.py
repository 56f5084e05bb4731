"""What the daemon tells people about, as values (pure).

A :class:`Notification` is one moment worth telling people about: a rollout scheduled, one of its
waves started or healthy, a rollout halted, completed or canceled, or a commit refused or held.
The daemon's parts that see such a moment hand a notification to a :class:`Notifier`; the
delivery (HTTP endpoints, chat bodies, git commit statuses, Kubernetes Events, with retries) is
the notifier's business, at the edge.

Callers: the daemon (commit verdicts, rollouts) and the notifier that delivers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Protocol


class NotificationKind(StrEnum):
    """The moments people are told about, by their name in every body we send."""

    ROLLOUT_SCHEDULED = "rollout.scheduled"
    WAVE_STARTED = "rollout.wave_started"
    WAVE_HEALTHY = "rollout.wave_healthy"
    ROLLOUT_HALTED = "rollout.halted"
    ROLLOUT_COMPLETED = "rollout.completed"
    ROLLOUT_CANCELED = "rollout.canceled"
    COMMIT_REFUSED = "commit.refused"
    COMMIT_HELD = "commit.held"


@dataclass(frozen=True)
class Notification:
    """One moment: its kind, the commit it concerns, a one-line summary a person reads, and
    details by name (a rollout id, a wave, a reason, a file and line). ``key`` tells two
    notifications of one kind apart (a rollout id and wave), so that a receiver may drop a
    repeat; it never holds a secret, and neither does anything else here."""

    kind: NotificationKind
    commit: str
    summary: str
    at: datetime
    key: str = ""
    details: Mapping[str, str | int] = field(default_factory=dict)


class Notifier(Protocol):
    """Takes notifications to deliver; never blocks its caller on a slow or failing endpoint,
    and never raises for a delivery that fails (it retries and logs, at the edge)."""

    def notify(self, notification: Notification) -> None:
        """Queue ``notification`` for delivery, in the order of the calls."""


class NoNotifier:
    """The notifier of a daemon with no endpoint configured: tells nobody."""

    def notify(self, notification: Notification) -> None:
        """Drop ``notification``."""
