"""Which git remotes a commit and the command line may name (pure rules of
reconciler.config.remotes).
"""

from __future__ import annotations

import pytest

from reconciler.config.remotes import (
    allowed_protocols,
    credential_origin,
    is_local,
    may_get_credentials,
    parse_credential_host,
    ref_problem,
    remote_problem,
    repo_credential_host,
)

ACCEPTED_EVERYWHERE = [
    "https://git.example.com/platform/channels.git",
    "ssh://git@git.example.com:2222/platform/channels.git",
    "ssh://[::1]/channels.git",
    "git://127.0.0.1:9418/channels.git",
    "git@github.com:platform/channels.git",
    "github.com:platform/channels.git",
]

LOCAL = ["/srv/git/fleet", "./fleet", "fleet", "file:///srv/git/fleet", "../x y/fleet"]

REFUSED_EVERYWHERE = {
    "--upload-pack=id > /tmp/x;": "starts with '-'",
    "-cprotocol.ext.allow=always": "starts with '-'",
    "-c core.sshCommand=touch /tmp/x": "starts with '-'",
    "ext::sh -c touch% /tmp/x": "remote helper",
    "fd::3": "remote helper",
    "http://git.example.com/channels.git": "transport other than",
    "ftp://git.example.com/channels.git": "transport other than",
    "ssh://-oProxyCommand=touch%20x/channels.git": "no valid host",
    "git@host:-x": "path starting with '-'",
    "https://git.example.com/a b": "has spaces",
    "https://git.example.com/a\nb": "control characters",
    "": "is empty",
}

CREDENTIALS = [
    "https://robot:hunter2-secret@git.example.com/channels.git",
    "https://ghp_hunter2secret@git.example.com/channels.git",
    "ssh://git:hunter2-secret@git.example.com/channels.git",
    "git://user@git.example.com/channels.git",
    "git:hunter2-secret@git.example.com:channels.git",
]


@pytest.mark.parametrize("url", ACCEPTED_EVERYWHERE)
def test_network_remotes_are_accepted_from_a_commit_and_the_command_line(url: str) -> None:
    assert remote_problem(url) is None
    assert remote_problem(url, local=True) is None
    assert not is_local(url)


@pytest.mark.parametrize("url", LOCAL)
def test_local_remotes_only_from_the_command_line(url: str) -> None:
    problem = remote_problem(url)

    assert problem is not None
    assert "local" in problem
    assert remote_problem(url, local=True) is None


@pytest.mark.parametrize(("url", "reason"), REFUSED_EVERYWHERE.items())
def test_options_helpers_and_other_transports_are_refused_everywhere(url: str, reason: str) -> None:
    for local in (False, True):
        problem = remote_problem(url, local=local)
        assert problem is not None
        assert reason in problem
        assert url.strip() == "" or url not in problem  # the value is never repeated


@pytest.mark.parametrize("url", CREDENTIALS)
def test_credentials_inside_a_url_are_refused_without_repeating_them(url: str) -> None:
    problem = remote_problem(url)

    assert problem is not None
    assert "credentials" in problem
    assert "--token-file" in problem
    assert "hunter2" not in problem


def test_git_may_use_file_only_for_a_command_line_path() -> None:
    assert allowed_protocols(local=False) == ("https", "ssh", "git")
    assert allowed_protocols(local=True) == ("https", "ssh", "git", "file")


@pytest.mark.parametrize("ref", ["main", "release/1.2", "v1.0.0", "0" * 40])
def test_plain_refs_are_accepted(ref: str) -> None:
    assert ref_problem(ref) is None


@pytest.mark.parametrize("ref", ["--upload-pack=x", "+refs/*:refs/*", "a..b", "x.lock", "a b"])
def test_refspecs_and_options_are_not_refs(ref: str) -> None:
    assert ref_problem(ref) is not None


@pytest.mark.parametrize(
    ("url", "origin"),
    [
        ("https://Git.Example.com/platform/fleet.git", ("https", "git.example.com", 443)),
        ("https://git.example.com:8443/fleet.git", ("https", "git.example.com", 8443)),
        ("ssh://git@git.example.com:2222/fleet.git", ("ssh", "git.example.com", 2222)),
        ("git@git.example.com:platform/fleet.git", ("ssh", "git.example.com", 22)),
        ("git://git.example.com/fleet.git", None),
        ("/srv/git/fleet", None),
        ("ext::sh -c x", None),
    ],
)
def test_a_credential_would_go_to_the_https_or_ssh_host_and_port(
    url: str, origin: tuple[str, str, int] | None
) -> None:
    assert credential_origin(url) == origin


def test_credentials_go_only_to_the_hosts_named_on_their_port() -> None:
    hosts = (
        repo_credential_host("https://git.example.com/fleet.git"),
        parse_credential_host("channels.example.com"),
        parse_credential_host("mirror.example.com:8443"),
    )
    assert None not in hosts
    named = tuple(h for h in hosts if h is not None)

    allowed = [
        "https://git.example.com/attacker/anything.git",
        "https://channels.example.com/c.git",
        "git@channels.example.com:c.git",
        "https://mirror.example.com:8443/c.git",
    ]
    refused = [
        "https://attacker.example/c.git",
        "https://git.example.com:8443/c.git",
        "https://channels.example.com:444/c.git",
        "https://mirror.example.com/c.git",
        "git://git.example.com/c.git",
        "https://git.example.com.attacker.example/c.git",
    ]
    assert [may_get_credentials(url, named) for url in allowed] == [True] * len(allowed)
    assert [may_get_credentials(url, named) for url in refused] == [False] * len(refused)


@pytest.mark.parametrize("text", ["https://h", "u@h", "h/x", "h:port", ""])
def test_a_credential_host_is_a_host_and_an_optional_port(text: str) -> None:
    with pytest.raises(ValueError, match="is not HOST or HOST:PORT"):
        parse_credential_host(text)
