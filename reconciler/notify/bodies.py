"""The HTTP request each kind of endpoint is sent for a notification (pure).

- ``webhook``: the generic JSON body (:func:`generic_body`): ``kind``, ``commit``, ``summary``,
  ``at``, ``key``, ``details``;
- ``slack``: an incoming-webhook message: ``text`` (the fallback line) and ``blocks`` (a section
  and a context line);
- ``teams``: a Microsoft Teams message holding an Adaptive Card (title, text, facts, a link),
  as both Teams incoming webhooks and Power Automate's Workflows webhooks take it;
- ``github``: ``POST {api}/repos/{owner}/{repo}/statuses/{sha}`` (:func:`commit_sha`) with
  ``state``, ``description``, ``context`` and ``target_url`` (GitHub's commit status API);
- ``gitlab``: ``POST {api}/projects/{id}/statuses/{sha}`` with ``state``, ``name``,
  ``description`` and ``target_url`` (GitLab's commit status API).

The secret parts (a webhook URL that is a credential, a token) come in as arguments and go only
into the request's URL and headers. Callers: :mod:`reconciler.notify.delivery`, tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from reconciler.core.endpoints import DEFAULT_API, Endpoint, EndpointType
from reconciler.core.head import Head
from reconciler.core.notifications import Notification, NotificationKind

#: Commit status states per event: (GitHub's, GitLab's).
STATUS_STATES: Mapping[NotificationKind, tuple[str, str]] = {
    NotificationKind.ROLLOUT_SCHEDULED: ("pending", "pending"),
    NotificationKind.WAVE_STARTED: ("pending", "running"),
    NotificationKind.WAVE_HEALTHY: ("pending", "running"),
    NotificationKind.ROLLOUT_HALTED: ("failure", "failed"),
    NotificationKind.ROLLOUT_COMPLETED: ("success", "success"),
    NotificationKind.ROLLOUT_CANCELED: ("error", "canceled"),
    NotificationKind.COMMIT_REFUSED: ("failure", "failed"),
    NotificationKind.COMMIT_HELD: ("pending", "pending"),
}
#: Events that are bad news: a Warning Event, a red card.
WARNINGS = frozenset({NotificationKind.ROLLOUT_HALTED, NotificationKind.COMMIT_REFUSED})
#: GitHub keeps at most this many characters of a status's description.
DESCRIPTION_LIMIT = 140


@dataclass(frozen=True, slots=True)
class Request:
    """One POST: where, with which headers, and its JSON body."""

    url: str
    body: Mapping[str, Any]
    headers: Mapping[str, str] = field(default_factory=dict)


def request_for(
    endpoint: Endpoint, notification: Notification, url: str = "", token: str = ""
) -> Request:
    """The request of ``notification`` to ``endpoint``; ``url`` (read from ``urlFrom``) replaces
    the endpoint's own, ``token`` (read from ``tokenFrom``) authenticates it."""
    base = url or endpoint.url or DEFAULT_API.get(endpoint.type, "")
    builder = _BUILDERS[endpoint.type]
    return builder(endpoint, notification, base, token)


def generic_body(notification: Notification) -> dict[str, Any]:
    """The body of a ``webhook`` endpoint."""
    return {
        "kind": notification.kind.value,
        "commit": notification.commit,
        "summary": notification.summary,
        "at": notification.at.isoformat(),
        "key": notification.key,
        "details": dict(notification.details),
    }


def commit_sha(notification: Notification, endpoint: Endpoint) -> str:
    """The commit a status is set on: the config repo's (a head ``config+channels`` names
    two), or with ``statusOn: channels`` the channels repository's (the config commit when the
    channels live in the config repo)."""
    head = Head.parse(notification.commit)
    if head is None:
        return ""
    return head.channels or head.config if endpoint.status_on == "channels" else head.config


def _webhook(endpoint: Endpoint, notification: Notification, base: str, token: str) -> Request:
    body = generic_body(notification)
    if endpoint.target_url:
        body["targetUrl"] = endpoint.target_url
    return Request(base, body, _json(_bearer(token)))


def _slack(endpoint: Endpoint, notification: Notification, base: str, token: str) -> Request:
    line = f"[{notification.kind.value}] {notification.summary}"
    context = f"commit `{Head.parse(notification.commit) or '-'}`"
    if endpoint.target_url:
        context += f" · <{endpoint.target_url}|status>"
    blocks = [
        {"type": "section", "text": {"type": "mrkdwn", "text": f"*{line}*"}},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": context}]},
    ]
    return Request(base, {"text": line, "blocks": blocks}, _json(_bearer(token)))


def _teams(endpoint: Endpoint, notification: Notification, base: str, token: str) -> Request:
    facts = [{"title": "commit", "value": notification.commit}]
    facts += [{"title": str(k), "value": str(v)} for k, v in notification.details.items()]
    bad = notification.kind in WARNINGS
    card: dict[str, Any] = {
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "type": "AdaptiveCard",
        "version": "1.4",
        "body": [
            {
                "type": "TextBlock",
                "text": notification.kind.value,
                "weight": "Bolder",
                "size": "Medium",
                "color": "Attention" if bad else "Default",
            },
            {"type": "TextBlock", "text": notification.summary, "wrap": True},
            {"type": "FactSet", "facts": facts},
        ],
    }
    if endpoint.target_url:
        card["actions"] = [
            {"type": "Action.OpenUrl", "title": "Status", "url": endpoint.target_url}
        ]
    attachment = {"contentType": "application/vnd.microsoft.card.adaptive", "content": card}
    body = {"type": "message", "summary": notification.summary, "attachments": [attachment]}
    return Request(base, body, _json(_bearer(token)))


def _github(endpoint: Endpoint, notification: Notification, base: str, token: str) -> Request:
    state = STATUS_STATES[notification.kind][0]
    body: dict[str, Any] = {
        "state": state,
        "description": _description(notification),
        "context": endpoint.context,
    }
    if endpoint.target_url:
        body["target_url"] = endpoint.target_url
    sha = commit_sha(notification, endpoint)
    url = f"{base.rstrip('/')}/repos/{endpoint.repository}/statuses/{sha}"
    headers = {
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": "2022-11-28",
        **_bearer(token),
    }
    return Request(url, body, _json(headers))


def _gitlab(endpoint: Endpoint, notification: Notification, base: str, token: str) -> Request:
    state = STATUS_STATES[notification.kind][1]
    body: dict[str, Any] = {
        "state": state,
        "name": endpoint.context,
        "description": _description(notification),
    }
    if endpoint.target_url:
        body["target_url"] = endpoint.target_url
    project = quote(endpoint.repository, safe="")
    sha = commit_sha(notification, endpoint)
    url = f"{base.rstrip('/')}/projects/{project}/statuses/{sha}"
    headers = {"PRIVATE-TOKEN": token} if token else {}
    return Request(url, body, _json(headers))


def _description(notification: Notification) -> str:
    text = f"{notification.kind.value}: {notification.summary}"
    if len(text) <= DESCRIPTION_LIMIT:
        return text
    return text[: DESCRIPTION_LIMIT - 3] + "..."


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def _json(headers: Mapping[str, str]) -> dict[str, str]:
    return {"Content-Type": "application/json", "User-Agent": "reconciler", **headers}


_BUILDERS = {
    EndpointType.WEBHOOK: _webhook,
    EndpointType.SLACK: _slack,
    EndpointType.TEAMS: _teams,
    EndpointType.GITHUB: _github,
    EndpointType.GITLAB: _gitlab,
}
