"""Where the daemon's git credentials go.

The ``--token-file`` token goes to the host of ``--repo`` and the ``--credential-host`` ones
only: a ``channelsFrom.git`` that a commit points elsewhere is asked without it (HTTPS servers
on 127.0.0.1 with a test CA record the ``Authorization`` header; a real ``reconciler daemon``
follows a ``git daemon``). The ``--ssh-key-file`` path reaches ssh as one argument, whatever
characters it holds (git runs the ``ssh`` found first on ``PATH``: a recording program).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.config.remotes import repo_credential_host
from reconciler.errors import TransientError
from reconciler.source.git import GitCredentials, RemoteSource
from tests.support.daemon_processes import (
    channels_git_settings,
    daemon_status,
    start_daemon_process,
    stop_daemon_process,
)
from tests.support.daemons import Fleet, GitServer, until
from tests.support.tls_fakes import HttpsGitBackend, HttpsRecorder, make_test_ca

TOKEN = "s3cret-token-value"
DAEMON = (sys.executable, "-m", "reconciler", "daemon", "--repo", "https://h.example/x.git")


def _channels_error(base: str) -> str:
    channels = daemon_status(base)["channels"]
    return str(channels["error"]) if channels else ""


@pytest.fixture
def tls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    """A test CA that git trusts (``GIT_SSL_CAINFO``), and a certificate for 127.0.0.1."""
    ca, certificate, key = make_test_ca(tmp_path / "tls")
    monkeypatch.setenv("GIT_SSL_CAINFO", str(ca))
    return ca, certificate, key


@pytest.fixture
def recorders(tls: tuple[Path, Path, Path]) -> Iterator[tuple[HttpsRecorder, HttpsRecorder]]:
    """Two HTTPS servers on 127.0.0.1 (two ports: two origins)."""
    _, certificate, key = tls
    first, second = HttpsRecorder(certificate, key), HttpsRecorder(certificate, key)
    try:
        yield first, second
    finally:
        first.close()
        second.close()


def test_a_commit_pointing_channels_at_another_host_never_gets_the_token(
    tmp_path: Path, recorders: tuple[HttpsRecorder, HttpsRecorder]
) -> None:
    elsewhere, listed = recorders
    fleet = Fleet(tmp_path)
    server = GitServer(tmp_path)
    server.start()
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    credential_host = f"127.0.0.1:{listed.port}"
    daemon, base = start_daemon_process(
        tmp_path,
        server.url,
        *("--token-file", str(token_file), "--credential-host", credential_host),
        env=dict(os.environ),
    )
    try:
        fleet.commit(
            "channels elsewhere", {"fleet/reconciler.yaml": channels_git_settings(elsewhere.url())}
        )
        until(
            lambda: (
                bool(elsewhere.seen) and bool((daemon_status(base)["channels"] or {}).get("error"))
            )
        )
        error = daemon_status(base)["channels"]["error"]
        fleet.commit(
            "channels listed", {"fleet/reconciler.yaml": channels_git_settings(listed.url())}
        )
        until(lambda: bool(listed.seen))
    finally:
        errors = stop_daemon_process(daemon)
        server.stop()

    assert elsewhere.authorizations() == {""}
    assert f"127.0.0.1:{elsewhere.port} is not the host of --repo nor a --credential-host" in error
    assert listed.authorizations() == {f"Bearer {TOKEN}"}
    assert TOKEN not in errors
    assert TOKEN not in error


def test_the_token_goes_to_the_followed_repository_and_only_to_its_port(
    tmp_path: Path, recorders: tuple[HttpsRecorder, HttpsRecorder]
) -> None:
    followed, other = recorders
    own = repo_credential_host(followed.url("fleet.git"))
    assert own == ("127.0.0.1", followed.port)
    credentials = GitCredentials(TOKEN, None, (own,))
    for recorder in (followed, other):
        source = RemoteSource(
            recorder.url("fleet.git"), "main", "", tmp_path / "cache", credentials
        )
        with pytest.raises(TransientError) as failed:
            source.check()
        assert TOKEN not in str(failed.value)

    assert followed.authorizations() == {f"Bearer {TOKEN}"}
    assert other.authorizations() == {""}


def test_a_token_with_a_line_break_is_refused_without_repeating_it(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("abc\nX-Injected: 1\n")
    done = subprocess.run(
        [*DAEMON, "--token-file", str(token_file), "--listen", "127.0.0.1:0"],
        env={**os.environ, "RECONCILER_STATE": f"sqlite:///{tmp_path / 'state.db'}"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "--token-file" in done.stderr
    assert "Injected" not in done.stderr
    assert "Traceback" not in done.stderr


def _recording_ssh(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An environment whose ``ssh`` writes its arguments, one per line, to the returned log and
    fails as an unreachable server does."""
    folder = tmp_path / "bin"
    folder.mkdir()
    log = tmp_path / "ssh-argv.log"
    program = folder / "ssh"
    program.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >> "{log}"\nexit 255\n')
    program.chmod(0o755)
    return {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}, log


def test_an_ssh_key_path_reaches_ssh_as_one_argument_and_runs_nothing(tmp_path: Path) -> None:
    env, log = _recording_ssh(tmp_path)
    env["HOME"] = str(tmp_path)  # where a bare ``cd`` goes
    marker = tmp_path / "pwned"
    secrets = tmp_path / "mounted secret"  # a Secret mounted at a path with a space
    secrets.mkdir()
    key = secrets / "id ;cd;touch pwned;#"
    key.write_text("not a real key\n")
    daemon, _ = start_daemon_process(
        tmp_path, "ssh://git@127.0.0.1/fleet.git", "--ssh-key-file", str(key), env=env
    )
    try:
        until(lambda: log.exists() and "fleet.git" in log.read_text())
    finally:
        stop_daemon_process(daemon)

    argv = log.read_text().splitlines()
    assert argv[argv.index("-i") + 1] == str(key)
    assert not marker.exists()


def _served_repository(root: Path) -> None:
    """A bare repository ``root/fleet.git`` with one commit on ``main``."""
    work = root / "work"
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True, env=env)
    (work / "README").write_text("fleet\n")
    for command in (
        ["add", "README"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "fleet"],
    ):
        subprocess.run(["git", "-C", str(work), *command], check=True, env=env)
    subprocess.run(
        ["git", "clone", "-q", "--bare", str(work), str(root / "fleet.git")], check=True, env=env
    )


def test_the_token_never_follows_a_redirect_to_another_host(
    tmp_path: Path, tls: tuple[Path, Path, Path]
) -> None:
    """The credential host answers with a redirect to another origin that serves the same
    repository (a real ``git http-backend``): git's default (``http.followRedirects=initial``)
    would re-base every later request there, the token header with it."""
    _, certificate, key = tls
    _served_repository(tmp_path / "served")
    elsewhere = HttpsGitBackend(certificate, key, tmp_path / "served")
    listed = HttpsGitBackend(
        certificate, key, tmp_path / "served", redirect_to=f"https://127.0.0.1:{elsewhere.port}"
    )
    try:
        own = repo_credential_host(listed.url())
        assert own == ("127.0.0.1", listed.port)
        source = RemoteSource(
            listed.url(), "main", "", tmp_path / "cache", GitCredentials(TOKEN, None, (own,))
        )
        with pytest.raises(TransientError) as failed:
            source.check()
    finally:
        listed.close()
        elsewhere.close()

    assert listed.authorizations() == {f"Bearer {TOKEN}"}
    assert elsewhere.seen == []
    assert "redirect" in str(failed.value)
    assert TOKEN not in str(failed.value)


def test_without_credentials_a_redirect_is_followed(
    tmp_path: Path, tls: tuple[Path, Path, Path]
) -> None:
    """A remote asked without credentials (none given, or not for its host) keeps git's own
    redirect policy: a moved public repository is still read."""
    _, certificate, key = tls
    _served_repository(tmp_path / "served")
    moved = HttpsGitBackend(certificate, key, tmp_path / "served")
    old = HttpsGitBackend(
        certificate, key, tmp_path / "served", redirect_to=f"https://127.0.0.1:{moved.port}"
    )
    try:
        source = RemoteSource(old.url(), "main", "", tmp_path / "cache", GitCredentials())
        head = source.check()
    finally:
        old.close()
        moved.close()

    assert len(head) == 40
    assert moved.authorizations() == {""}
