"""Hostile git input and a hostile network.

A commit's ``channelsFrom.git`` never reaches git unless it is an https, ssh, git or
user@host:path remote: the payloads of the issue go through ``reconciler validate`` and a real
``reconciler daemon`` process, and nothing runs (a ``git`` wrapper first on ``PATH`` records
every call; marker files never appear); the commit is refused with its place. A git server that
accepts and never answers (a TCP server on 127.0.0.1) makes a poll fail within its limit, and
SIGTERM still stops the daemon; an unreachable channels source does not stop config commits.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.head import Head
from reconciler.core.model import ClusterAccess
from reconciler.daemon.service import Daemon
from reconciler.errors import SourceError, TransientError
from reconciler.operations.store import SqliteStore
from reconciler.source.git import GitRunner, RemoteSource, open_revision
from reconciler.source.loader import load_repo
from tests.support.daemon_processes import (
    SETTINGS_HEAD,
    channels_git_settings,
    daemon_status,
    start_daemon_process,
    stop_daemon_process,
)
from tests.support.daemons import (
    WIDGET,
    Fleet,
    GitServer,
    http_get,
    http_post,
    poll_and_reconcile,
    running_version,
    until,
)
from tests.support.fleet_history import BASE_FILES, git, runtime_yaml, write_tree

ROOT = Path(__file__).parents[2]
SAMPLE = ROOT / "sample-repo"


class HangServer:
    """A TCP server on 127.0.0.1 that accepts connections and never answers."""

    def __init__(self, port: int = 0) -> None:
        self.socket = socket.socket()
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            until(lambda: self._bound(port), seconds=10)  # a server just killed may hold it
        except AssertionError:
            self.socket.close()
            raise
        self.socket.listen(16)
        self.port = int(self.socket.getsockname()[1])
        self.connections: list[socket.socket] = []
        self.accepted = threading.Event()
        self.accepting = threading.Thread(target=self._accept, daemon=True)
        self.accepting.start()

    def _bound(self, port: int) -> bool:
        try:
            self.socket.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True

    def url(self, name: str = "repo.git") -> str:
        return f"git://127.0.0.1:{self.port}/{name}"

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return
            self.connections.append(connection)
            self.accepted.set()

    def all_hung_up(self, seconds: float = 5.0) -> bool:
        """Whether every client closed its connection (its git process is gone)."""
        for connection in list(self.connections):
            connection.settimeout(seconds)
            try:
                while connection.recv(4096):
                    pass
            except TimeoutError:
                return False
        return True

    def close(self) -> None:
        """Stop listening, then close every connection accepted. ``shutdown`` first: a thread
        blocked in ``accept()`` does not wake when the socket is closed, which then listens on
        until a client comes; that client's connection was accepted by the server gone, and
        reset when the thread ended."""
        with contextlib.suppress(OSError):  # not connected: only the listening state to end
            self.socket.shutdown(socket.SHUT_RDWR)
        self.accepting.join(timeout=30)
        self.socket.close()
        for connection in self.connections:
            connection.close()


@pytest.fixture
def hang() -> Iterator[HangServer]:
    server = HangServer()
    try:
        yield server
    finally:
        server.close()


def _git_wrapper(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An environment whose ``git`` records its arguments in the returned log, then runs git."""
    folder = tmp_path / "bin"
    folder.mkdir()
    log = tmp_path / "git-calls.log"
    real = shutil.which("git")
    assert real is not None
    wrapper = folder / "git"
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{log}"\nexec "{real}" "$@"\n')
    wrapper.chmod(0o755)
    env = {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}
    return env, log


def _payloads(tmp_path: Path) -> dict[str, tuple[str, Path]]:
    """Hostile ``channelsFrom.git`` values, each with the marker file it would create."""
    markers = {name: tmp_path / f"marker-{name}" for name in ("upload", "ext", "c", "ssh")}
    channels = tmp_path / "channels-repo"
    write_tree(channels, {"channels/regular.yaml": BASE_FILES["channels/regular.yaml"]})
    git(channels, "init", "-q", "-b", "main")
    git(channels, "add", "-A")
    git(channels, "commit", "-qm", "channels")
    return {
        "upload": (f"--upload-pack=id > {markers['upload']};", markers["upload"]),
        "ext": (f"ext::sh -c touch% {markers['ext']}", markers["ext"]),
        "file": (f"file://{channels}", tmp_path / "never-file"),
        "local": (str(channels), tmp_path / "never-local"),
        "c": (f"-c core.sshCommand=touch% {markers['c']}", markers["c"]),
        "config": ("--config=protocol.ext.allow=always", tmp_path / "never-config"),
        "ssh": (f"ssh://-oProxyCommand=touch% {markers['ssh']}/x", markers["ssh"]),
        "credentials": ("https://robot:hunter2-pass@git.example.com/c.git", tmp_path / "never"),
    }


# -- validate ------------------------------------------------------------------------------------


def test_validate_refuses_every_payload_before_any_git_runs(tmp_path: Path) -> None:
    env, log = _git_wrapper(tmp_path)
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    payloads = _payloads(tmp_path)
    fleet = tmp_path / "fleet"
    shutil.copytree(SAMPLE, fleet)
    settings = (fleet / "reconciler.yaml").read_text()
    at = f"{fleet}/reconciler.yaml:9:10: C6 channelsFrom.git "

    for name, (payload, marker) in payloads.items():
        hostile = settings.replace("    path: ../channels", f"    git: {json.dumps(payload)}")
        (fleet / "reconciler.yaml").write_text(hostile)
        done = subprocess.run(
            [sys.executable, "-m", "reconciler", "validate", str(fleet)],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 1, (name, done.stdout, done.stderr)
        credential = at.replace("channelsFrom.git ", "a password in a URL")  # the scan's word
        assert done.stdout.startswith((at, credential)), (name, done.stdout)
        assert "(/spec/channelsFrom/git)" in done.stdout
        assert "Traceback" not in done.stderr
        assert "hunter2" not in done.stdout + done.stderr
        assert payload not in done.stdout + done.stderr  # the value is never repeated
        assert not marker.exists(), name
    assert not log.exists(), log.read_text()  # git never ran at all
    # nothing fetched: no channels checkout in the cache (only the schemas' compiled checks)
    assert not list((tmp_path / "cache").glob("reconciler/channels-*"))


def test_validate_gives_up_on_a_silent_channels_server_within_the_limit(
    tmp_path: Path, hang: HangServer
) -> None:
    fleet = tmp_path / "fleet"
    shutil.copytree(SAMPLE, fleet)
    settings = (fleet / "reconciler.yaml").read_text()
    (fleet / "reconciler.yaml").write_text(
        settings.replace("    path: ../channels", f"    git: {hang.url()}")
    )
    env = {**os.environ, "RECONCILER_GIT_TIMEOUT": "1s", "XDG_CACHE_HOME": str(tmp_path / "c")}

    done = subprocess.run(
        [sys.executable, "-m", "reconciler", "validate", str(fleet)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"error: {hang.url()}: git ls-remote gave no answer within 1s (git timeout); stopped it"
    )
    assert hang.all_hung_up()


# -- channelsFrom.path ---------------------------------------------------------------------------


def _channels_path_messages(root: Path) -> list[str]:
    return [d.format() for d in load_repo(root).diagnostics if d.rule == "C6"]


def test_channels_path_stays_inside_the_repository(tmp_path: Path) -> None:
    write_tree(tmp_path / "x", {"regular.yaml": BASE_FILES["channels/regular.yaml"]})
    project = tmp_path / "project"
    write_tree(project, {k: v for k, v in BASE_FILES.items() if k.startswith("fleet/")})
    fleet = project / "fleet"
    where = f"{fleet}/reconciler.yaml:4:29: C6 channels folder leads outside the repository"

    for escape in ("../../x", str(tmp_path / "x"), "../channels/../../x"):
        write_tree(
            fleet,
            {"reconciler.yaml": SETTINGS_HEAD + f"spec: {{channelsFrom: {{path: {escape}}}}}\n"},
        )
        messages = _channels_path_messages(fleet)
        assert len(messages) == 1, (escape, messages)
        assert messages[0].startswith(where), (escape, messages)
        assert "regular" not in " ".join(messages)

    git(project, "init", "-q")  # in a git repository, its top is the boundary
    write_tree(project, {"channels/regular.yaml": BASE_FILES["channels/regular.yaml"]})
    write_tree(fleet, {"reconciler.yaml": BASE_FILES["fleet/reconciler.yaml"]})
    assert _channels_path_messages(fleet) == []
    (project / "channels").rename(project / "real-channels")
    (project / "channels").symlink_to(tmp_path / "x")  # a link leading out of it
    messages = _channels_path_messages(fleet)
    assert len(messages) == 1
    assert "leads outside the repository" in messages[0]


def test_channels_path_stays_inside_the_git_repository_at_a_revision(tmp_path: Path) -> None:
    write_tree(tmp_path, dict(BASE_FILES))
    write_tree(
        tmp_path,
        {"fleet/reconciler.yaml": SETTINGS_HEAD + "spec: {channelsFrom: {path: ../../x}}\n"},
    )
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "escape")
    revision = open_revision(tmp_path / "fleet", "HEAD")

    diagnostics = load_repo("fleet", tree=revision.tree).diagnostics

    assert [d.format()[:45] for d in diagnostics] == [
        "fleet/reconciler.yaml:4:29: C6 channels folde"
    ]


# -- the git runner ------------------------------------------------------------------------------


def test_a_missing_git_is_a_source_error_saying_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never a FileNotFoundError (an "internal error"): the daemon's image lacks git."""
    monkeypatch.setenv("PATH", str(tmp_path / "no-git-here"))

    with pytest.raises(SourceError, match="the git command was not found"):
        GitRunner(timeout=30).run(
            ["ls-remote", "--", "https://example.invalid/repo.git"],
            git_dir=tmp_path,
            shown="https://example.invalid/repo.git",
            protocols=["https"],
            env={},
        )


def test_git_itself_refuses_ext_and_file_for_a_remote_from_a_commit(tmp_path: Path) -> None:
    """Even a URL that slipped past the check (or a redirect, a submodule) cannot use them."""
    runner = GitRunner(timeout=30)
    cache = tmp_path / "cache.git"
    subprocess.run(["git", "init", "-q", "--bare", str(cache)], check=True)
    marker = tmp_path / "marker"
    repo = tmp_path / "repo"
    git(repo.parent, "init", "-q", str(repo))

    for url in (f"ext::sh -c touch% {marker}", f"file://{repo}"):
        with pytest.raises(TransientError, match="not allowed"):
            runner.run(
                ["ls-remote", "--", url],
                git_dir=cache,
                shown="the remote",
                protocols=("https", "ssh", "git"),
                env={"GIT_ALLOW_PROTOCOL": "ext:file"},  # our setting wins over the caller's
            )
    assert not marker.exists()


def test_a_remote_from_a_commit_may_not_be_local_and_refs_may_not_be_options(
    tmp_path: Path,
) -> None:
    with pytest.raises(SourceError, match="is a local path"):
        RemoteSource(str(tmp_path), "main", "", tmp_path / "cache")
    with pytest.raises(SourceError, match="must be a branch, tag or commit id"):
        RemoteSource("git://127.0.0.1/x.git", "--upload-pack=x", "", tmp_path / "cache")
    with pytest.raises(SourceError, match="credentials") as refused:
        RemoteSource("https://u:hunter2@h/x.git", "main", "", tmp_path / "cache", local=True)
    assert "hunter2" not in str(refused.value)


def test_a_git_call_past_its_limit_is_killed_with_its_children(
    tmp_path: Path, hang: HangServer
) -> None:
    source = RemoteSource(hang.url(), "main", "", tmp_path / "cache", runner=GitRunner(1.0))

    with pytest.raises(TransientError) as failed:
        source.check()

    assert str(failed.value) == (
        f"{hang.url()}: git ls-remote gave no answer within 1s (git timeout); stopped it"
    )
    assert hang.all_hung_up()


def test_stopping_the_runner_ends_a_hanging_call_at_once(tmp_path: Path, hang: HangServer) -> None:
    runner = GitRunner(timeout=600)
    source = RemoteSource(hang.url(), "main", "", tmp_path / "cache", runner=runner)
    errors: list[Exception] = []

    def check() -> None:
        try:
            source.check()
        except TransientError as error:
            errors.append(error)

    worker = threading.Thread(target=check)
    worker.start()
    assert hang.accepted.wait(30)
    runner.stop()
    worker.join(10)

    assert not worker.is_alive()
    assert [str(e) for e in errors] == [f"{hang.url()}: git ls-remote stopped: shutting down"]
    with pytest.raises(TransientError, match="not started"):
        source.check()
    assert hang.all_hung_up()


# -- the daemon ----------------------------------------------------------------------------------


def _refused_commit(base: str) -> str | None:
    refused = daemon_status(base)["source"]["refused"]
    return None if refused is None else str(refused["commit"])


def test_the_daemon_refuses_every_payload_with_its_place_and_runs_nothing(tmp_path: Path) -> None:
    env, log = _git_wrapper(tmp_path)
    payloads = _payloads(tmp_path)
    fleet = Fleet(tmp_path)
    server = GitServer(tmp_path)
    server.start()
    (tmp_path / "secret").write_text("hook-secret\n")
    hook = tmp_path / "secret"
    daemon, base = start_daemon_process(
        tmp_path, server.url, "--git-timeout", "10s", "--webhook-secret-file", str(hook), env=env
    )

    def pushed() -> None:
        """The webhook of a push: the daemon polls now, not at its next interval."""
        assert http_post(base + "/hooks/git", b"{}", {"X-Gitlab-Token": "hook-secret"})[0] == 202

    try:
        until(lambda: http_get(base + "/readyz")[0] == 200)
        good = daemon_status(base)["source"]["commit"]
        for name, (payload, _) in payloads.items():
            commit = fleet.commit(name, {"fleet/reconciler.yaml": channels_git_settings(payload)})
            pushed()
            until(lambda: _refused_commit(base) == commit)  # noqa: B023 (called at once)
            refused = daemon_status(base)["source"]["refused"]
            assert [
                (e["path"], e["line"], e["column"], e["rule"], e["pointer"])
                for e in refused["errors"]
            ] == [("fleet/reconciler.yaml", 6, 10, "C6", "/spec/channelsFrom/git")], name
        escape = fleet.commit(
            "escape",
            {"fleet/reconciler.yaml": SETTINGS_HEAD + "spec: {channelsFrom: {path: ../../x}}\n"},
        )
        pushed()
        until(lambda: _refused_commit(base) == escape)
        status = daemon_status(base)
        assert status["source"]["commit"] == good
        assert status["source"]["refused"]["errors"][0]["rule"] == "C6"
        assert status["channels"] is None
    finally:
        errors = stop_daemon_process(daemon, seconds=30)
        server.stop()

    calls = log.read_text()
    for name, (payload, marker) in payloads.items():
        assert not marker.exists(), name
        assert payload not in calls, name
        assert payload not in errors, name
    assert "upload-pack" not in calls
    assert "ext::" not in calls
    assert "hunter2" not in errors
    assert "fleet/reconciler.yaml:6:10: C6 channelsFrom.git" in errors
    assert f"-- {server.url}" in calls  # the config repo was asked, its URL after --


def test_a_silent_server_fails_the_poll_within_its_limit(tmp_path: Path, hang: HangServer) -> None:
    daemon, base = start_daemon_process(tmp_path, hang.url(), "--git-timeout", "2s")
    try:
        assert hang.accepted.wait(30)
        until(lambda: "gave no answer" in daemon_status(base)["source"]["error"], seconds=30)
        assert hang.all_hung_up()  # the git call was stopped at its limit, not left hanging
        source = daemon_status(base)["source"]
        assert source["error"] == (
            f"{hang.url()}: git ls-remote gave no answer within 2s (git timeout); stopped it"
        )
        assert source["lastPoll"] is not None
        assert source["lastSuccessfulPoll"] is None
        assert http_get(base + "/readyz")[0] == 503
    finally:
        stop_daemon_process(daemon)
    assert hang.all_hung_up()


def test_sigterm_stops_the_daemon_while_git_waits_on_a_silent_server(
    tmp_path: Path, hang: HangServer
) -> None:
    daemon, _ = start_daemon_process(tmp_path, hang.url())  # the default limit: 60s
    try:
        assert hang.accepted.wait(30)  # a poll is waiting on the server now
    finally:
        errors = stop_daemon_process(daemon, seconds=10)
    assert "stopping" in errors
    assert hang.all_hung_up()  # its git was killed, not left behind


def test_an_unreachable_channels_source_does_not_stop_config_commits(tmp_path: Path) -> None:
    fleet = Fleet(tmp_path)
    server = GitServer(tmp_path)
    server.start()
    channels_root = tmp_path / "channels-served"
    subprocess.run(["git", "init", "-q", "--bare", str(channels_root / "remote.git")], check=True)
    channels_work = tmp_path / "channels-work"
    write_tree(channels_work, {"channels/regular.yaml": BASE_FILES["channels/regular.yaml"]})
    write_tree(channels_work, {"channels/fast.yaml": BASE_FILES["channels/fast.yaml"]})
    git(channels_work, "init", "-q", "-b", "main")
    git(channels_work, "add", "-A")
    git(channels_work, "commit", "-qm", "channels")
    git(channels_work, "push", "-q", str(channels_root / "remote.git"), "HEAD:refs/heads/main")
    channels_server = GitServer(channels_root)
    channels_server.start()
    first = fleet.commit(
        "channels apart",
        {"fleet/reconciler.yaml": channels_git_settings(channels_server.url), "channels": None},
    )
    clusters: dict[str, InMemoryCluster] = {}

    def connect(access: ClusterAccess, name: str) -> InMemoryCluster:
        return clusters.setdefault(name, InMemoryCluster())

    runner = GitRunner(timeout=1.0)

    def second(url: str, ref: str, path: str) -> RemoteSource:
        return RemoteSource(url, ref, path, tmp_path / "channels-cache", runner=runner)

    source = RemoteSource(server.url, "main", "fleet", tmp_path / "cache", runner=runner)
    store = SqliteStore(tmp_path / "state.db")
    daemon = Daemon(source, store, connect, lambda: datetime.now(UTC), make_source=second)
    hang: HangServer | None = None
    try:
        assert poll_and_reconcile(daemon)
        head = daemon.state.commit
        assert head is not None
        assert head.config == first
        channels_commit = head.channels
        assert channels_commit
        assert daemon.status()["channels"]["error"] == ""

        channels_server.stop()
        hang = HangServer(channels_server.port)  # the channels server now never answers
        mesh = fleet.commit(
            "add mesh",
            {
                "fleet/runtimes/a.yaml": runtime_yaml(
                    "a", "regular", "[{name: widget}, {name: gadget}, {name: mesh}]"
                )
            },
        )
        assert poll_and_reconcile(daemon)  # accepted, with the channels last seen
        assert daemon.state.commit == Head(mesh, channels_commit)
        assert clusters["a"].get(WIDGET) is not None
        status = daemon.status()
        assert status["source"]["error"] == ""
        assert status["channels"]["commit"] == channels_commit
        assert status["channels"]["error"] == (
            f"{channels_server.url}: git ls-remote gave no answer within 1s (git timeout); "
            "stopped it"
        )

        fleet.commit("revert", {"fleet/runtimes/a.yaml": BASE_FILES["fleet/runtimes/a.yaml"]})
        assert poll_and_reconcile(daemon)
        assert daemon.status()["source"]["error"] == ""
        assert running_version(clusters["a"], WIDGET) == "1.0.0"
    finally:
        daemon.close()
        server.stop()
        channels_server.stop()
        if hang is not None:
            hang.close()


def test_the_daemon_command_refuses_a_bad_repo_or_timeout_in_one_line(tmp_path: Path) -> None:
    for args, expected in (
        (["--repo", "ext::sh -c touch% x"], "error: git remote refused: it names a git remote"),
        (["--repo", "https://u:hunter2@h/x.git"], "error: git remote refused: it has credentials"),
        (["--repo", str(tmp_path), "--git-timeout", "0s"], "'0s' is not a duration above zero"),
        (["--repo", str(tmp_path), "--interval", "abc"], "'abc' is not a duration above zero"),
        (["--repo", str(tmp_path), "--resync-interval", "-5m"], "'-5m' is not a duration"),
        (["--repo", str(tmp_path), "--listen", "nonsense"], "'nonsense' is not HOST:PORT"),
        (["--repo", str(tmp_path), "--listen", "999.1.1.1:99999"], "a port from 0 to 65535"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "reconciler", "daemon", "--listen", "127.0.0.1:0", *args],
            env={**os.environ, "RECONCILER_STATE": f"sqlite:///{tmp_path / 'state.db'}"},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 2, done.stderr
        assert expected in done.stderr
        assert "Traceback" not in done.stderr
        assert "hunter2" not in done.stderr


@pytest.mark.parametrize("where", ["gone", "not-git"])
def test_a_local_repo_that_is_not_there_stops_the_daemon_at_start(
    tmp_path: Path, where: str
) -> None:
    """``daemon --repo /nonexistent`` stops at start with one line, not polled for ever as if a
    remote were down with git's last line ('and the repository exists.') logged."""
    (tmp_path / "not-git").mkdir()
    state = tmp_path / "state.db"

    command = [sys.executable, "-m", "reconciler", "daemon", "--listen", "127.0.0.1:0"]
    done = subprocess.run(
        [*command, "--repo", str(tmp_path / where)],
        env={**os.environ, "RECONCILER_STATE": f"sqlite:///{state}"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode == 2, done.stderr
    what = "no such folder" if where == "gone" else "not a git repository"
    assert done.stderr.splitlines() == [
        f"error: --repo {tmp_path / where}: {what}" + done.stderr.split(what, 1)[1].rstrip("\n")
    ]
    assert not state.exists()


def test_a_git_message_is_whole(tmp_path: Path) -> None:
    """A missing local repository is named in a whole sentence, not git's last line alone."""
    source = RemoteSource(str(tmp_path / "gone"), "main", "", tmp_path / "cache", local=True)

    with pytest.raises(TransientError) as failed:
        source.check()

    assert str(failed.value) == (
        f"{tmp_path / 'gone'}: git ls-remote failed: fatal: '{tmp_path / 'gone'}' does not "
        "appear to be a git repository; fatal: Could not read from remote repository."
    )


def test_the_daemon_command_names_a_port_in_use_in_one_line(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)  # a repo, if an empty one
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        command = [sys.executable, "-m", "reconciler", "daemon", "--repo", str(tmp_path)]
        done = subprocess.run(
            [*command, "--listen", f"127.0.0.1:{port}"],
            env={**os.environ, "RECONCILER_STATE": f"sqlite:///{tmp_path / 'state.db'}"},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 2, done.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "Traceback" not in done.stderr
