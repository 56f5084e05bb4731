"""``spec.notifications`` of Settings: endpoints are read into typed values with their event
filters; the schema asks each type for what it needs; a webhook URL that is itself a credential
(Slack, Teams, a query string) is refused in the repo (C6), and endpoint names are unique."""

from __future__ import annotations

from pathlib import Path

from reconciler.core.endpoints import Endpoint, EndpointType, SecretRef
from reconciler.core.notifications import NotificationKind
from reconciler.source.loader import load_repo
from tests.support.repos import RepoFactory, small_repo


def _settings(endpoints: str) -> dict[str, str]:
    text = (
        "apiVersion: reconciler.dev/v1alpha1\nkind: Settings\nmetadata: {name: settings}\n"
        f"spec:\n  notifications:\n    attempts: 3\n    endpoints:\n{endpoints}"
    )
    return {**small_repo(), "reconciler.yaml": text}


def _errors(root: Path) -> list[str]:
    return [d.format().removeprefix(f"{root}/") for d in load_repo(root).diagnostics]


def test_endpoints_are_read_with_their_secrets_and_filters(make_repo: RepoFactory) -> None:
    root = make_repo(
        _settings(
            "      - {name: chat, type: slack, urlFrom: {file: slack-url}, events: [rollout.*]}\n"
            "      - name: gh\n        type: github\n        repository: platform/fleet\n"
            "        tokenFrom: {secret: {name: gh-token, key: token}}\n"
            "        statusOn: channels\n"
        )
    )

    repo = load_repo(root).repo
    assert repo is not None
    chat, gh = repo.settings.notifications.endpoints
    assert repo.settings.notifications.attempts == 3
    assert chat == Endpoint(
        "chat", EndpointType.SLACK, url_from=SecretRef(file="slack-url"), events=("rollout.*",)
    )
    assert gh.token_from == SecretRef(secret="gh-token", key="token")
    assert (gh.status_on, chat.status_on) == ("channels", "config")
    assert chat.wants(NotificationKind.WAVE_STARTED)
    assert not chat.wants(NotificationKind.COMMIT_REFUSED)
    assert gh.wants(NotificationKind.COMMIT_REFUSED)


def test_a_commit_status_needs_a_repository_and_a_token(make_repo: RepoFactory) -> None:
    root = make_repo(_settings("      - {name: gh, type: github, repository: a/b}\n"))

    assert _errors(root) == [
        "reconciler.yaml:8:9: C1 missing required field 'tokenFrom' "
        "(/spec/notifications/endpoints/0)"
    ]


def test_a_webhook_url_that_is_a_credential_is_refused(make_repo: RepoFactory) -> None:
    root = make_repo(
        _settings(
            "      - {name: chat, type: slack, url: 'https://hooks.slack.com/services/T/B/x'}\n"
            "      - {name: hook, type: webhook, url: 'https://example.com/h?sig=abc'}\n"
            "      - {name: hook, type: webhook, url: 'https://example.com/h'}\n"
        )
    )

    advice = (
        "this URL is a credential (anyone holding it may post): keep it out of the repo and "
        "give urlFrom (a file in --notification-secrets-dir, or a Secret)"
    )
    assert _errors(root) == [
        f"reconciler.yaml:8:40: C6 {advice} (/spec/notifications/endpoints/0/url)",
        f"reconciler.yaml:9:42: C6 {advice} (/spec/notifications/endpoints/1/url)",
        "reconciler.yaml:10:16: C4 endpoint name 'hook' is used twice; each endpoint needs its "
        "own (/spec/notifications/endpoints/2/name)",
    ]


def test_the_readme_example_is_valid(make_repo: RepoFactory) -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Notifications\n", 1)[1]
    example = section.split("```yaml\n", 1)[1].split("```", 1)[0]

    root = make_repo({**small_repo(), "reconciler.yaml": example})

    validation = load_repo(root)
    assert validation.diagnostics == ()
    assert validation.repo is not None
    names = [e.name for e in validation.repo.settings.notifications.endpoints]
    assert names == ["platform-chat", "on-call", "audit", "fleet-status"]
