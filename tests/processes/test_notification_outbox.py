"""Notifications survive a killed daemon: the real ``reconciler daemon`` command, following a
real git server, refuses a commit while the notification receiver (real HTTP on 127.0.0.1)
fails every request; it is killed with SIGKILL with the notification still waiting, and the
daemon started again on the same state store sends it to the endpoint once (the refusal is not
judged again: the verdict stands). Nothing waits in the store at the end.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.operations.store import SqliteStore
from tests.support.daemons import (
    SETTINGS_SPEC,
    Fleet,
    GitServer,
    free_port,
    http_get,
    reachable,
    until,
)
from tests.support.fleet_history import SETTINGS, runtime_yaml
from tests.support.receiver import LOOPBACK, Receiver


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    served = Receiver().start()
    yield served
    served.close()


def _daemon(tmp_path: Path, url: str, log: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "RECONCILER_REPO": url,
        "RECONCILER_PATH": "fleet",
        "RECONCILER_STATE": f"sqlite:///{tmp_path / 'state.db'}",
        "RECONCILER_NOTIFICATION_ALLOW_NETWORKS": LOOPBACK,
    }
    port = free_port()
    command = [sys.executable, "-m", "reconciler", "daemon", "--interval", "1s"]
    command += ["--listen", f"127.0.0.1:{port}", "--snapshot", f"{tmp_path / 'clusters'}/"]
    command += ["--snapshot-create"] if not (tmp_path / "clusters").exists() else []
    with log.open("a") as output:
        process = subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    until(lambda: reachable(base))
    until(lambda: http_get(base + "/readyz")[0] == 200)
    return process


def test_a_notification_waiting_when_the_daemon_is_killed_is_sent_once_after_a_restart(
    tmp_path: Path, receiver: Receiver
) -> None:
    fleet = Fleet(tmp_path)
    spec = (
        "spec:\n  channelsFrom: {path: ../channels}\n"
        "  notifications:\n    kubernetesEvents: false\n    attempts: 10\n    endpoints:\n"
        f"      - {{name: hook, type: webhook, url: '{receiver.url}/hook'}}\n"
    )
    fleet.commit("settings", {"fleet/reconciler.yaml": SETTINGS.replace(SETTINGS_SPEC, spec)})
    server = GitServer(tmp_path)
    server.start()
    log = tmp_path / "daemon.log"
    receiver.status = 503  # every try fails until the daemon is killed
    try:
        first = _daemon(tmp_path, server.url, log)
        try:
            bad = fleet.commit("typo", {"fleet/runtimes/a.yaml": runtime_yaml("a", "x", "[]")})
            until(lambda: len(receiver.tries) > 0)  # kept, and being tried
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=60)
        assert receiver.accepted == []
        assert SqliteStore(tmp_path / "state.db").waiting_notifications() == 1
        receiver.status = None

        second = _daemon(tmp_path, server.url, log)
        try:
            until(lambda: len(receiver.accepted) == 1)
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(timeout=60)
    finally:
        server.stop()

    (sent,) = receiver.accepted
    assert (sent.path, sent.body["kind"], sent.body["commit"]) == ("/hook", "commit.refused", bad)
    assert SqliteStore(tmp_path / "state.db").waiting_notifications() == 0
