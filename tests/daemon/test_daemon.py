"""The daemon against a real git server (`git daemon` on 127.0.0.1) and in-memory clusters.

Commits are pushed to a bare repository that `git daemon` serves; the daemon follows its `main`
branch. Most tests call the daemon's tick (`poll`) directly; one runs the real scheduler and
webhook and waits for the condition (with a deadline), never for a fixed time.
"""

from __future__ import annotations

import ctypes
import hashlib
import hmac
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from reconciler.cluster.memory import InMemoryCluster
from reconciler.cluster.snapshot import load_snapshot
from reconciler.core.model import ClusterAccess
from reconciler.core.objects import ObjectRef
from reconciler.daemon.http import serve
from reconciler.daemon.service import Daemon, start_scheduler
from reconciler.operations.store import SqliteStore
from reconciler.source.git import RemoteSource
from tests.support.daemons import (
    SETTINGS_SPEC,
    WIDGET,
    Fleet,
    GitServer,
    free_port,
    http_get,
    http_post,
    poll_and_reconcile,
    reachable,
    running_version,
    until,
)
from tests.support.daemons import served as setup
from tests.support.fleet_history import (
    BASE_FILES,
    SETTINGS,
    channel_yaml,
    git,
    runtime_yaml,
    write_tree,
)

__all__ = ["setup"]  # the fixture (tests.support.daemons.served)

MESH = ObjectRef("apps/v1", "Deployment", "mesh-system", "mesh-operator")
SECRET = b"s3cret-for-tests"


def test_commits_reach_the_clusters(setup: Any) -> None:
    fleet, _, daemon, clusters = setup
    assert not daemon.ready

    assert poll_and_reconcile(daemon)
    assert daemon.ready
    assert running_version(clusters["a"], WIDGET) == "1.0.0"
    assert not poll_and_reconcile(daemon)  # nothing new: one remote check, no reconcile

    fleet.commit(
        "add mesh",
        {
            "fleet/runtimes/a.yaml": runtime_yaml(
                "a", "regular", "[{name: widget}, {name: gadget}, {name: mesh}]"
            )
        },
    )
    assert poll_and_reconcile(daemon)
    assert running_version(clusters["a"], MESH) == "1.0.0"

    fleet.commit(
        "bump",
        {
            "channels/regular.yaml": channel_yaml(
                "regular", {"widget": "2.0.0", "gadget": "1.0.0", "mesh": "1.0.0"}
            )
        },
    )
    assert poll_and_reconcile(daemon)
    assert running_version(clusters["a"], WIDGET) == "2.0.0"

    fleet.commit(
        "drop mesh",
        {"fleet/runtimes/a.yaml": runtime_yaml("a", "regular", "[{name: widget}, {name: gadget}]")},
    )
    assert poll_and_reconcile(daemon)
    assert clusters["a"].get(MESH) is None
    status = daemon.status()
    assert status["source"]["commit"] == git(fleet.work, "rev-parse", "HEAD").strip()
    assert {r["runtime"] for r in status["runtimes"]} == {"a", "b", "c"}


def test_an_invalid_commit_changes_nothing_and_the_next_valid_one_applies(
    setup: Any, caplog: pytest.LogCaptureFixture
) -> None:
    fleet, _, daemon, clusters = setup
    poll_and_reconcile(daemon)
    good = daemon.state.commit
    writes = {name: c.writes for name, c in clusters.items()}

    bad = fleet.commit(
        "typo", {"fleet/runtimes/a.yaml": runtime_yaml("a", "reguler", "[{name: widget}]")}
    )
    assert not poll_and_reconcile(daemon)

    assert daemon.state.commit == good
    assert {name: c.writes for name, c in clusters.items()} == writes
    refused = daemon.status()["source"]["refused"]
    assert refused["commit"] == bad
    assert refused["errors"][0]["path"] == "fleet/runtimes/a.yaml"
    assert "channel 'reguler' does not exist" in refused["errors"][0]["message"]
    logged = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert any("fleet/runtimes/a.yaml:5:12: C2 channel 'reguler'" in m for m in logged)

    fleet.commit("fix", {"fleet/runtimes/a.yaml": runtime_yaml("a", "fast", "[{name: widget}]")})
    assert poll_and_reconcile(daemon)
    assert daemon.status()["source"]["refused"] is None
    assert running_version(clusters["a"], WIDGET) == "2.0.0"


def test_an_unreachable_remote_changes_nothing_and_polling_resumes(setup: Any) -> None:
    fleet, server, daemon, clusters = setup
    poll_and_reconcile(daemon)
    good = daemon.state.commit
    server.stop()

    assert not poll_and_reconcile(daemon)
    assert daemon.state.commit == good
    assert "git ls-remote failed" in daemon.status()["source"]["error"]
    assert running_version(clusters["a"], WIDGET) == "1.0.0"

    server.start()
    fleet.commit(
        "bump",
        {
            "channels/regular.yaml": channel_yaml(
                "regular", {"widget": "2.0.0", "gadget": "1.0.0", "mesh": "1.0.0"}
            )
        },
    )
    assert poll_and_reconcile(daemon)
    assert daemon.status()["source"]["error"] == ""
    assert running_version(clusters["a"], WIDGET) == "2.0.0"


def test_a_commit_without_runtimes_is_refused_not_a_fleet_without_runtimes(setup: Any) -> None:
    fleet, _, daemon, clusters = setup
    poll_and_reconcile(daemon)
    good = daemon.state.commit

    bad = fleet.commit("remove all", {f"fleet/runtimes/{n}.yaml": None for n in "abc"})
    assert not poll_and_reconcile(daemon)

    assert daemon.state.commit == good
    refused = daemon.status()["source"]["refused"]
    assert refused["commit"] == bad
    assert "not a config repo: no runtimes/ folder" in refused["message"]
    assert all(c.get(WIDGET) is not None for c in clusters.values())


def test_removing_more_runtimes_than_the_limit_is_held_by_the_brake(setup: Any) -> None:
    fleet, _, daemon, clusters = setup
    poll_and_reconcile(daemon)
    good = daemon.state.commit
    settings = "spec: {channelsFrom: {path: ../channels}, deletionBrake: {maxDeletionsPerSync: 1}}"
    fleet.commit("limit 1", {"fleet/reconciler.yaml": SETTINGS.replace(SETTINGS_SPEC, settings)})
    assert poll_and_reconcile(daemon)
    good = daemon.state.commit

    held = fleet.commit("remove two", {f"fleet/runtimes/{n}.yaml": None for n in "ab"})
    assert not poll_and_reconcile(daemon)

    assert daemon.state.commit == good
    brake = daemon.status()["source"]["held"]
    assert brake["commit"] == held
    assert brake["runtimes"] == ["a", "b"]
    assert (brake["removals"], brake["limit"]) == (2, 1)
    assert f"--allow-deletions {held[:12]}" in brake["message"]
    # a count is the CLI's, not the daemon's (a commit id may start with the digit)
    assert re.search(r"--allow-deletions 2\b", brake["message"]) is None
    assert all(c.get(WIDGET) is not None for c in clusters.values())


def test_scheduler_and_webhook(setup: Any) -> None:
    fleet, _, daemon, clusters = setup
    daemon.options.poll_interval = timedelta(seconds=1)
    daemon.options.resync_interval = timedelta(hours=1)
    start_scheduler(daemon)
    server = serve(daemon, "127.0.0.1", 0, SECRET)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        until(lambda: "a" in clusters and running_version(clusters["a"], WIDGET) == "1.0.0")
        assert http_get(base + "/readyz")[0] == 200
        fleet.commit(
            "bump",
            {
                "channels/regular.yaml": channel_yaml(
                    "regular", {"widget": "2.0.0", "gadget": "1.0.0", "mesh": "1.0.0"}
                )
            },
        )
        until(lambda: running_version(clusters["a"], WIDGET) == "2.0.0", seconds=10)  # one interval

        daemon.ticks.scheduler.reschedule_job("poll", trigger="interval", seconds=3600)
        fleet.commit(
            "mesh",
            {
                "fleet/runtimes/a.yaml": runtime_yaml(
                    "a", "regular", "[{name: widget}, {name: gadget}, {name: mesh}]"
                )
            },
        )
        body = json.dumps({"ref": "refs/heads/main"}).encode()
        assert (
            http_post(base + "/hooks/git", body, {"X-Hub-Signature-256": "sha256=" + "0" * 64})[0]
            == 403
        )
        signature = "sha256=" + hmac.new(SECRET, body, hashlib.sha256).hexdigest()
        assert http_post(base + "/hooks/git", body, {"X-Hub-Signature-256": signature})[0] == 202
        until(lambda: running_version(clusters["a"], MESH) == "1.0.0", seconds=10)
        gitlab = http_post(base + "/hooks/git", b"{}", {"X-Gitlab-Token": SECRET.decode()})
        assert gitlab[0] == 202

        status, text = http_get(base + "/metrics")
        assert status == 200
        assert "reconciler_last_successful_poll_timestamp_seconds" in text
        assert 'reconciler_runtime_state{runtime="a",state="Ready"} 1.0' in text
        assert 'reconciler_modules{module="widget",state="Ready"} ' in text
        assert json.loads(http_get(base + "/status")[1])["ready"] is True
    finally:
        server.shutdown()
        server.server_close()


def _start_daemon(tmp_path: Path, server: GitServer, port: int) -> subprocess.Popen[str]:
    """``reconciler daemon`` following ``server`` (webhook secret in ``tmp_path/secret``, snapshot
    clusters in ``tmp_path/clusters/``, JSON logs on its stderr)."""
    (tmp_path / "secret").write_text("hook-secret\n")
    (tmp_path / "token").write_text("api-token\n")
    env = {
        **os.environ,
        "RECONCILER_REPO": server.url,
        "RECONCILER_PATH": "fleet",
        "RECONCILER_STATE": f"sqlite:///{tmp_path / 'state.db'}",
    }
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "reconciler",
            "daemon",
            "--interval",
            "1s",
            "--listen",
            f"127.0.0.1:{port}",
            "--snapshot",
            f"{tmp_path / 'clusters'}/",
            "--snapshot-create",
            "--webhook-secret-file",
            str(tmp_path / "secret"),
            "--api-token-file",
            str(tmp_path / "token"),
            "--log-format",
            "json",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _stop(daemon: subprocess.Popen[str], send: Callable[[], None]) -> str:
    """``send`` a stop signal; the daemon's stderr once it ended (killed after 120 s, a hang)."""
    send()
    try:
        _, errors = daemon.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        daemon.kill()
        _, errors = daemon.communicate()
        pytest.fail(f"the daemon did not stop; its log:\n{errors[-2000:]}")
    return errors


def test_the_daemon_command_serves_reconciles_and_stops_on_sigterm(tmp_path: Path) -> None:
    """Waits on conditions (the port answering, /readyz, the snapshot file's content); their
    deadline only bounds a hang."""
    fleet = Fleet(tmp_path)
    server = GitServer(tmp_path)
    server.start()
    port = free_port()
    clusters = tmp_path / "clusters"
    daemon = _start_daemon(tmp_path, server, port)
    base = f"http://127.0.0.1:{port}"
    try:
        until(lambda: reachable(base) and http_get(base + "/readyz")[0] == 200, seconds=120)
        until(lambda: "widget-operator" in _read(clusters / "a.yaml"), seconds=120)
        fleet.commit(
            "bump",
            {
                "channels/regular.yaml": channel_yaml(
                    "regular", {"widget": "2.0.0", "gadget": "1.0.0", "mesh": "1.0.0"}
                )
            },
        )
        sync = [sys.executable, "-m", "reconciler", "sync", "--daemon", base, "--secret-file"]
        with_secret = subprocess.run(
            [*sync, str(tmp_path / "secret")], capture_output=True, text=True, check=False
        )
        assert "403 missing or wrong token" in with_secret.stderr + with_secret.stdout
        asked = subprocess.run(
            [*sync, str(tmp_path / "token")], capture_output=True, text=True, check=False
        )
        assert asked.returncode == 0, asked.stderr
        until(lambda: "2.0.0" in _versions(clusters / "a.yaml"), seconds=120)
    finally:
        errors = _stop(daemon, lambda: daemon.send_signal(signal.SIGTERM))
        server.stop()
    assert daemon.returncode == 0
    lines = [json.loads(line) for line in errors.splitlines() if line.strip()]  # every one
    messages = [line["message"] for line in lines]
    assert any(line.get("runtime") == "a" and "operation" in line for line in lines)
    assert "stopping: letting running steps finish" in messages
    assert any(m.startswith("reconciler daemon following ") for m in messages)
    assert not [m for m in messages if "succeeded succeeded" in m]
    done = [m for m in messages if re.match(r"runtime a: (provision|update) \w+ succeeded: ", m)]
    assert done, messages


def _versions(snapshot: Path) -> set[str]:
    """The ``app.kubernetes.io/version`` labels of the objects in ``snapshot``."""
    objects = load_snapshot(snapshot).objects()
    return {o["metadata"].get("labels", {}).get("app.kubernetes.io/version", "") for o in objects}


def _read(path: Path) -> str:
    """The text of ``path``, empty while it does not exist."""
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


def _tgkill(pid: int, tid: int, signum: int) -> None:
    """Send ``signum`` to thread ``tid`` of process ``pid`` only (Linux ``tgkill``)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.tgkill(pid, tid, signum) != 0:
        raise OSError(ctypes.get_errno(), f"tgkill {pid} {tid}")


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux's /proc")
def test_sigterm_stops_the_daemon_whichever_thread_receives_it(tmp_path: Path) -> None:
    """The kernel hands a process's signal to any of its threads. A daemon whose main thread
    slept on an Event never woke when a worker thread got SIGTERM (the test hung at shutdown 1
    run in 40); here SIGTERM is sent to a thread that is not the main one, on purpose."""
    Fleet(tmp_path)
    server = GitServer(tmp_path)
    server.start()
    port = free_port()
    daemon = _start_daemon(tmp_path, server, port)
    base = f"http://127.0.0.1:{port}"
    others: list[int] = []
    try:
        until(lambda: reachable(base) and http_get(base + "/readyz")[0] == 200, seconds=120)
        others = [int(t) for t in os.listdir(f"/proc/{daemon.pid}/task") if int(t) != daemon.pid]
        assert others, "the daemon runs threads besides its main one"
    finally:
        errors = _stop(
            daemon,
            lambda: (
                _tgkill(daemon.pid, max(others), signal.SIGTERM)
                if others
                else daemon.send_signal(signal.SIGTERM)
            ),
        )
        server.stop()

    assert daemon.returncode == 0, errors[-2000:]
    assert "stopping: letting running steps finish" in errors


def test_a_commit_reconciles_only_the_runtimes_it_changes(setup: Any) -> None:
    fleet, _, daemon, clusters = setup
    poll_and_reconcile(daemon)
    before = {n: len(daemon.store.operations(runtime=n)) for n in "abc"}
    writes = clusters["c"].writes

    fleet.commit(
        "bump regular",
        {
            "channels/regular.yaml": channel_yaml(
                "regular", {"widget": "2.0.0", "gadget": "1.0.0", "mesh": "1.0.0"}
            )
        },
    )
    assert daemon.poll()
    daemon.wait_idle()

    after = {n: len(daemon.store.operations(runtime=n)) for n in "abc"}
    assert after == {"a": before["a"] + 1, "b": before["b"] + 1, "c": before["c"]}  # c is on fast
    assert clusters["c"].writes == writes


def test_channels_from_a_second_repository(tmp_path: Path) -> None:
    fleet = Fleet(tmp_path)
    server = GitServer(tmp_path)
    server.start()
    channels_work = tmp_path / "channels-work"
    subprocess.run(["git", "init", "-q", "--bare", str(tmp_path / "channels.git")], check=True)
    channel_files = {
        k.removeprefix("channels/"): v for k, v in BASE_FILES.items() if k.startswith("channels/")
    }
    write_tree(channels_work / "channels", channel_files)
    git(channels_work, "init", "-q", "-b", "main")

    def push_channels(message: str) -> None:
        git(channels_work, "add", "-A")
        git(channels_work, "commit", "-qm", message)
        git(channels_work, "push", "-q", str(tmp_path / "channels.git"), "HEAD:refs/heads/main")

    push_channels("channels")
    url = server.url.replace("remote.git", "channels.git")
    settings = (
        "apiVersion: reconciler.dev/v1alpha1\nkind: Settings\nmetadata: {name: fleet}\n"
        f"spec: {{channelsFrom: {{git: '{url}', ref: main, subPath: channels}}}}\n"
    )
    fleet.commit("channels apart", {"fleet/reconciler.yaml": settings, "channels": None})
    clusters: dict[str, InMemoryCluster] = {}

    def connect(access: ClusterAccess, name: str) -> InMemoryCluster:
        return clusters.setdefault(name, InMemoryCluster())

    def second(url: str, ref: str, path: str) -> RemoteSource:
        return RemoteSource(url, ref, path, tmp_path / "channels-cache")

    source = RemoteSource(server.url, "main", "fleet", tmp_path / "cache")
    daemon = Daemon(
        source,
        SqliteStore(tmp_path / "state.db"),
        connect,
        lambda: datetime.now(UTC),
        make_source=second,
    )
    try:
        assert poll_and_reconcile(daemon)
        assert running_version(clusters["a"], WIDGET) == "1.0.0"
        assert daemon.state.commit is not None
        assert daemon.state.commit.channels  # the head names both commits
        channels = daemon.channels
        assert isinstance(channels, RemoteSource)
        checks = (source.checks, channels.checks)
        assert not poll_and_reconcile(daemon)  # nothing new in either: one check per source
        assert (source.checks, channels.checks) == (checks[0] + 1, checks[1] + 1)

        write_tree(
            channels_work / "channels",
            {
                "regular.yaml": channel_yaml(
                    "regular", {"widget": "2.0.0", "gadget": "1.0.0", "mesh": "1.0.0"}
                )
            },
        )
        push_channels("bump")
        assert poll_and_reconcile(daemon)
        assert running_version(clusters["a"], WIDGET) == "2.0.0"
    finally:
        daemon.close()
        server.stop()


def test_a_poll_that_ends_after_the_daemon_stopped_starts_nothing_and_raises_nothing(
    setup: tuple[Fleet, GitServer, Daemon, dict[str, InMemoryCluster]],
) -> None:
    """A webhook's poll runs in a thread of its own; when it accepts a commit after the daemon
    closed its worker pool, the runtimes are left for the next start (no exception escapes)."""
    _, _, daemon, clusters = setup
    daemon.close()

    assert daemon.poll()

    # the brake read each cluster's inventories (none yet); nothing was applied
    assert all(not cluster.objects() for cluster in clusters.values())
    assert daemon.submit("a").cancelled()
