"""What each kind of endpoint receives, through real HTTP to a local receiver: the generic JSON
body; Slack's ``text``/``blocks``; a Teams message with an Adaptive Card; GitHub's commit status
(``POST /repos/{owner}/{repo}/statuses/{sha}`` with state, description, context, target_url and
a bearer token); GitLab's (``POST /projects/{id}/statuses/{sha}`` with state, name, description
and ``PRIVATE-TOKEN``)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from reconciler.core.endpoints import Endpoint, EndpointType, NotificationSettings, SecretRef
from reconciler.core.notifications import Notification, NotificationKind
from reconciler.notify.bodies import request_for
from reconciler.notify.delivery import Delivery
from reconciler.notify.secrets import SecretReader, TokenHosts
from tests.support.receiver import Received, Receiver, loopback_transport

SHA = "0123456789abcdef0123456789abcdef01234567"
REFUSED = Notification(
    NotificationKind.COMMIT_REFUSED,
    f"{SHA}+{'f' * 40}",
    "commit 0123456789ab refused: 1 error(s); still on 89abcdef0123",
    datetime(2026, 11, 27, 12, 0, tzinfo=UTC),
    "refused-0123456789ab",
    {"file": "runtimes/a.yaml", "line": 3},
)
STATUS = "https://reconciler.example.com/"


def _deliver(
    receiver: Receiver, endpoint: Endpoint, tmp_path: Path, notification: Notification
) -> Received:
    (tmp_path / "token").write_text("the-token\n")
    settings = NotificationSettings((endpoint,), kubernetes_events=False)
    hosts = TokenHosts((receiver.host,))
    delivery = Delivery(
        lambda: settings, SecretReader(tmp_path), token_hosts=hosts, transport=loopback_transport()
    )
    delivery.notify(notification)
    delivery.drain()
    delivery.close()
    (received,) = receiver.accepted
    return received


def _endpoint(
    receiver: Receiver,
    kind: EndpointType,
    repository: str = "",
    token_from: SecretRef | None = None,
    context: str = "reconciler",
) -> Endpoint:
    return Endpoint(
        kind.value,
        kind,
        url=receiver.url,
        token_from=token_from,
        repository=repository,
        context=context,
        target_url=STATUS,
    )


def test_the_generic_body(receiver: Receiver, tmp_path: Path) -> None:
    endpoint = _endpoint(receiver, EndpointType.WEBHOOK, token_from=SecretRef(file="token"))

    got = _deliver(receiver, endpoint, tmp_path, REFUSED)

    assert got.path == "/"
    assert got.headers["Content-Type"] == "application/json"
    assert got.headers["Authorization"] == "Bearer the-token"
    assert got.body == {
        "kind": "commit.refused",
        "commit": REFUSED.commit,
        "summary": REFUSED.summary,
        "at": "2026-11-27T12:00:00+00:00",
        "key": "refused-0123456789ab",
        "details": {"file": "runtimes/a.yaml", "line": 3},
        "targetUrl": STATUS,
    }


def test_a_slack_message(receiver: Receiver, tmp_path: Path) -> None:
    got = _deliver(receiver, _endpoint(receiver, EndpointType.SLACK), tmp_path, REFUSED)

    line = f"[commit.refused] {REFUSED.summary}"
    assert got.body["text"] == line
    assert got.body["blocks"] == [
        {"type": "section", "text": {"type": "mrkdwn", "text": f"*{line}*"}},
        {
            "type": "context",
            "elements": [
                {"type": "mrkdwn", "text": f"commit `{REFUSED.commit}` · <{STATUS}|status>"}
            ],
        },
    ]
    assert "Authorization" not in got.headers


def test_a_teams_adaptive_card(receiver: Receiver, tmp_path: Path) -> None:
    got = _deliver(receiver, _endpoint(receiver, EndpointType.TEAMS), tmp_path, REFUSED)

    assert got.body["type"] == "message"
    (attachment,) = got.body["attachments"]
    assert attachment["contentType"] == "application/vnd.microsoft.card.adaptive"
    card = attachment["content"]
    assert card["type"] == "AdaptiveCard"
    title, text, facts = card["body"]
    assert (title["text"], title["color"]) == ("commit.refused", "Attention")  # bad news
    assert text == {"type": "TextBlock", "text": REFUSED.summary, "wrap": True}
    assert facts == {
        "type": "FactSet",
        "facts": [
            {"title": "commit", "value": REFUSED.commit},
            {"title": "file", "value": "runtimes/a.yaml"},
            {"title": "line", "value": "3"},
        ],
    }
    assert card["actions"] == [{"type": "Action.OpenUrl", "title": "Status", "url": STATUS}]


def test_a_github_commit_status(receiver: Receiver, tmp_path: Path) -> None:
    endpoint = _endpoint(
        receiver,
        EndpointType.GITHUB,
        repository="platform/fleet",
        token_from=SecretRef(file="token"),
        context="reconciler/prod",
    )

    got = _deliver(receiver, endpoint, tmp_path, REFUSED)

    assert got.path == f"/repos/platform/fleet/statuses/{SHA}"  # the config commit
    assert got.headers["Authorization"] == "Bearer the-token"
    assert got.headers["Accept"] == "application/vnd.github+json"
    assert got.body == {
        "state": "failure",
        "description": f"commit.refused: {REFUSED.summary}",
        "context": "reconciler/prod",
        "target_url": STATUS,
    }


def test_a_gitlab_commit_status(receiver: Receiver, tmp_path: Path) -> None:
    endpoint = _endpoint(
        receiver,
        EndpointType.GITLAB,
        repository="platform/fleet",
        token_from=SecretRef(file="token"),
    )
    long = Notification(
        NotificationKind.WAVE_STARTED, SHA, "wave 2 of 3 started: " + "x" * 200, REFUSED.at
    )

    got = _deliver(receiver, endpoint, tmp_path, long)

    assert got.path == f"/projects/platform%2Ffleet/statuses/{SHA}"
    assert got.headers["PRIVATE-TOKEN"] == "the-token"
    assert got.body["state"] == "running"
    assert got.body["name"] == "reconciler"
    assert got.body["target_url"] == STATUS
    assert len(got.body["description"]) == 140
    assert got.body["description"].endswith("...")


def test_a_status_on_the_channels_commit() -> None:
    """``statusOn: channels`` sets the status on the channels repository's commit of the head
    (``config+channels``), and on the config commit when the channels live in the config repo."""
    endpoint = Endpoint(
        "channels-status", EndpointType.GITHUB, repository="platform/channels", status_on="channels"
    )
    alone = Notification(NotificationKind.COMMIT_HELD, SHA, "held", REFUSED.at)

    apart = request_for(endpoint, REFUSED, token="t")
    together = request_for(endpoint, alone, token="t")
    on_config = request_for(replace(endpoint, status_on="config"), REFUSED, token="t")

    assert apart.url == f"https://api.github.com/repos/platform/channels/statuses/{'f' * 40}"
    assert together.url == f"https://api.github.com/repos/platform/channels/statuses/{SHA}"
    assert on_config.url.endswith(f"/statuses/{SHA}")
