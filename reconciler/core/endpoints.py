"""Where notifications go: the endpoints of ``spec.notifications`` in ``reconciler.yaml``, as
values (pure).

An :class:`Endpoint` is one receiver (a generic JSON webhook, a Slack- or Microsoft
Teams-compatible incoming webhook, a GitHub or GitLab commit status) with the events it wants
(:meth:`Endpoint.wants`). Its secret parts (a webhook URL that is itself the credential, an API
token) are never in the repo (C6): a :class:`SecretRef` names a file in the daemon's
``--notification-secrets-dir`` or a key of a Kubernetes Secret in the daemon's namespace, read
by the delivery at the edge (:mod:`reconciler.notify.secrets`).

Callers: the settings builder (``reconciler.config.builders``), the delivery
(``reconciler.notify``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from reconciler.core.notifications import NotificationKind


class EndpointType(StrEnum):
    """The body an endpoint is sent (see docs and ``reconciler.notify.bodies``)."""

    WEBHOOK = "webhook"
    SLACK = "slack"
    TEAMS = "teams"
    GITHUB = "github"
    GITLAB = "gitlab"


#: The API each commit status endpoint talks to when it names no ``url``.
DEFAULT_API = {
    EndpointType.GITHUB: "https://api.github.com",
    EndpointType.GITLAB: "https://gitlab.com/api/v4",
}


@dataclass(frozen=True, slots=True)
class SecretRef:
    """Where a secret value is kept: a file (a name in ``--notification-secrets-dir``) or a key
    of a Secret in the daemon's namespace. Exactly one of ``file`` and ``secret``."""

    file: str | None = None
    secret: str | None = None
    key: str = ""

    def describe(self) -> str:
        """Where it is kept, for messages (never the value)."""
        if self.file is not None:
            return f"file {self.file}"
        return f"Secret {self.secret}[{self.key}]"


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One receiver of notifications. ``url`` is the webhook URL (webhook, slack, teams) or the
    API's base URL (github, gitlab; :data:`DEFAULT_API` when empty); ``url_from`` replaces
    ``url`` when the URL itself is the secret; ``token_from`` is sent as the API token
    (GitHub ``Authorization: Bearer``, GitLab ``PRIVATE-TOKEN``, a webhook's bearer token).
    ``events`` are kinds or prefixes (``rollout.*``; ``*`` or none: every event)."""

    name: str
    type: EndpointType
    url: str = ""
    url_from: SecretRef | None = None
    token_from: SecretRef | None = None
    #: ``owner/name`` on GitHub; the project's id or ``group/name`` path on GitLab.
    repository: str = ""
    #: The status's context (GitHub) or name (GitLab).
    context: str = "reconciler"
    #: A link the status or message carries (the daemon's status page, say).
    target_url: str = ""
    #: Which commit a status is set on: ``config`` (the config repo's) or ``channels`` (the
    #: channels repository's, for ``channelsFrom.git``).
    status_on: str = "config"
    events: tuple[str, ...] = ()

    def wants(self, kind: NotificationKind) -> bool:
        """Whether this endpoint is sent notifications of ``kind``."""
        return not self.events or any(_matches(pattern, kind) for pattern in self.events)


def _matches(pattern: str, kind: NotificationKind) -> bool:
    if pattern == "*":
        return True
    if pattern.endswith(".*"):
        return kind.value.startswith(pattern[:-1])
    return kind.value == pattern


@dataclass(frozen=True, slots=True)
class NotificationSettings:
    """``spec.notifications``: the endpoints, how often a delivery is tried, and whether each
    notification is also a Kubernetes Event in the daemon's namespace."""

    endpoints: tuple[Endpoint, ...] = ()
    #: Tries of one delivery to one endpoint (the first included) before it is given up.
    attempts: int = 5
    kubernetes_events: bool = True
