"""``reconciler rollout list|show|pause|resume|cancel|promote`` on a state store, and through the
daemon's authenticated HTTP port (a real waitress server on 127.0.0.1): the same answers, the
refusals in one line, a command without the token refused."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.model import ClusterAccess, RolloutPolicy, Runtime, WavePolicy
from reconciler.core.rollouts import RolloutState, start_rollout
from reconciler.daemon.http import serve
from reconciler.daemon.service import Daemon
from reconciler.operations.store import SqliteStore
from tests.support.sources import UnusedSource

T0 = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
SECRET = b"rollout-secret"
COMMIT = "f" * 40


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    store = SqliteStore(tmp_path / "state.db")
    runtimes = [
        Runtime(f"rt-{i:03d}", "regular", ClusterAccess(context="x"), labels={"tier": "dev"})
        if i < 2
        else Runtime(f"rt-{i:03d}", "regular", ClusterAccess(context="x"))
        for i in range(100)
    ]
    policy = RolloutPolicy(
        (WavePolicy("canary", selector="tier=dev"), WavePolicy("early", percent=10)),
        healthy_for=timedelta(minutes=30),
    )
    made = start_rollout(
        policy, COMMIT, runtimes, {r.name: "e" * 40 for r in runtimes}, frozenset(), T0
    )
    assert made is not None
    assert store.put_rollout(made) is not None
    store.close()
    return f"sqlite:///{tmp_path / 'state.db'}"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["rollout", *args], terminal_width=200)
    return result.exit_code, result.output


def test_the_commands_on_the_store(store_url: str) -> None:
    code, text = run("list", "--state", store_url)
    assert code == 0
    assert "ffffffffffff" in text
    assert "canary (1/3)" in text

    code, text = run("show", "ffff", "--state", store_url, "-o", "json")
    shown = json.loads(text)
    assert (shown["kind"], shown["state"], len(shown["members"])) == ("Rollout", "Progressing", 100)
    assert [w["runtimes"] for w in shown["waves"]] == [2, 10, 88]

    assert run("pause", "ffff", "--state", store_url) == (
        0,
        "rollout ffffffffffff: Paused, wave canary\n",
    )
    code, text = run("promote", "ffff", "--state", store_url)
    assert (code, text) == (0, "rollout ffffffffffff: Paused, wave early\n")
    assert run("resume", "ffff", "--state", store_url)[0] == 0
    code, text = run("cancel", "ffff", "--reason", "widget 2 leaks", "--state", store_url)
    assert code == 0
    code, text = run("show", "ffff", "--state", store_url)
    assert "Canceled: widget 2 leaks" in text

    code, text = run("resume", "ffff", "--state", store_url)
    assert code != 0
    assert "cannot resume rollout ffffffffffff: it is Canceled (needs Paused)" in text
    assert "Traceback" not in text
    code, text = run("show", "nothing", "--state", store_url)
    assert code != 0
    assert "no rollout 'nothing'" in text


@pytest.fixture
def daemon_url(store_url: str, tmp_path: Path) -> Iterator[str]:
    def connect(access: ClusterAccess, name: str) -> InMemoryCluster:
        return InMemoryCluster()

    daemon = Daemon(UnusedSource(), SqliteStore(tmp_path / "state.db"), connect, lambda: T0)
    told: list[str] = []
    daemon.notifier = type("Told", (), {"notify": lambda self, n: told.append(str(n.kind))})()
    server = serve(daemon, "127.0.0.1", 0, SECRET)
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        daemon.close()
    assert told == ["rollout.wave_healthy", "rollout.wave_started", "rollout.canceled"]


def test_the_commands_through_the_daemon(daemon_url: str, tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_bytes(SECRET)
    code, text = run("list", "--daemon", daemon_url, "-o", "json")
    assert code == 0
    assert json.loads(text)["items"][0]["state"] == "Progressing"

    code, text = run("promote", "ffff", "--daemon", daemon_url)
    assert code != 0
    assert "403 missing or wrong token" in text
    auth = ("--daemon", daemon_url, "--secret-file", str(secret))
    assert run("promote", "ffff", *auth) == (0, "rollout ffffffffffff: Progressing, wave early\n")
    code, text = run("resume", "ffff", *auth)
    assert code != 0
    assert "409 cannot resume rollout ffffffffffff: it is Progressing (needs Paused)" in text
    assert run("cancel", "ffff", "--reason", "not now", *auth)[0] == 0
    code, text = run("show", "ffff", "--daemon", daemon_url, "-o", "json")
    shown = json.loads(text)
    assert shown["state"] == str(RolloutState.CANCELED)
    assert shown["message"] == "not now"
