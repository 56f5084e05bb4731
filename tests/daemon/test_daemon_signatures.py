"""The daemon accepts only commits signed by a key it trusts: real git, real
signatures (ssh-keygen and gpg keys made here), the daemon's poll called directly, in-memory
clusters. A refused commit changes nothing in the clusters and keeps the last good one in force
(C7); it is reported in the log, ``/status``, the metrics and a notification."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.model import ClusterAccess
from reconciler.core.notifications import Notification, NotificationKind
from reconciler.daemon.channels import MakeSource
from reconciler.daemon.service import Daemon, DaemonOptions
from reconciler.operations.store import SqliteStore
from reconciler.source.git import RemoteSource
from reconciler.source.signatures import TrustedKeys
from tests.support.daemons import (
    WIDGET,
    GitServer,
    free_port,
    http_get,
    poll_and_reconcile,
    running_version,
    until,
)
from tests.support.fleet_history import BASE_FILES, channel_yaml, write_tree
from tests.support.signing import (
    Keys,
    PgpKey,
    SshKey,
    git,
    keys,
    need_signing_tools,
    signed_commit,
)

__all__ = ["keys"]  # the fixture

BUMP: dict[str, str | None] = {
    "channels/regular.yaml": channel_yaml(
        "regular", {"widget": "2.0.0", "gadget": "1.0.0", "mesh": "1.0.0"}
    )
}


class SignedFleet:
    """A working copy whose commits, each signed with the key given (or not), are pushed to a
    bare repository the daemon follows."""

    def __init__(self, root: Path, key: SshKey | PgpKey | None) -> None:
        self.work = root / "work"
        self.remote = root / "remote.git"
        subprocess.run(["git", "init", "-q", "--bare", str(self.remote)], check=True)
        write_tree(self.work, dict(BASE_FILES))
        git(self.work, "init", "-q", "-b", "main")
        self.commit("base", key)

    def commit(
        self, message: str, key: SshKey | PgpKey | None, files: dict[str, str | None] | None = None
    ) -> str:
        write_tree(self.work, files or {})
        self.head = signed_commit(self.work, message, key)
        git(self.work, "push", "-q", str(self.remote), "HEAD:refs/heads/main")
        return self.head


@dataclass
class Told:
    """The notifier seam, recording (the delivery is not this test's business)."""

    notifications: list[Notification] = field(default_factory=list)

    def notify(self, notification: Notification) -> None:
        self.notifications.append(notification)


@dataclass
class Setup:
    root: Path
    clusters: dict[str, InMemoryCluster]
    told: Told
    daemons: list[Daemon] = field(default_factory=list)

    def daemon(self, trusted: TrustedKeys, make_source: MakeSource | None = None) -> Daemon:
        def connect(access: ClusterAccess, name: str) -> InMemoryCluster:
            return self.clusters.setdefault(name, InMemoryCluster())

        source = RemoteSource(
            str(self.root / "remote.git"), "main", "fleet", self.root / "cache", local=True
        )
        options = DaemonOptions(trusted_keys=trusted)
        made = Daemon(
            source,
            SqliteStore(self.root / "state.db"),
            connect,
            lambda: datetime.now(UTC),
            options,
            make_source=make_source,
        )
        made.notifier = self.told
        self.daemons.append(made)
        return made


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    made = Setup(tmp_path, {}, Told())
    try:
        yield made
    finally:
        for daemon in made.daemons:
            daemon.close()


def _signers(path: Path, *keys: SshKey) -> Path:
    path.write_text("".join(key.signers_line for key in keys))
    return path


def _metric(daemon: Daemon, status: str) -> float:
    text = daemon.metrics.exposition().decode()
    line = f'reconciler_commits_unverified_total{{status="{status}"}} '
    found = [row for row in text.splitlines() if row.startswith(line)]
    return float(found[0].removeprefix(line)) if found else 0.0


def test_a_commit_signed_by_a_trusted_key_is_accepted(keys: Keys, setup: Setup) -> None:
    alice = keys.ssh("alice")
    fleet = SignedFleet(setup.root, alice)
    daemon = setup.daemon(TrustedKeys(ssh_signers=(_signers(setup.root / "signers", alice),)))

    assert poll_and_reconcile(daemon)
    assert running_version(setup.clusters["a"], WIDGET) == "1.0.0"

    bumped = fleet.commit("bump", alice, BUMP)
    assert poll_and_reconcile(daemon)
    assert daemon.status()["source"]["commit"] == bumped
    assert running_version(setup.clusters["a"], WIDGET) == "2.0.0"
    assert setup.told.notifications == []


@pytest.mark.parametrize("signer", [None, "mallory"])
def test_unsigned_or_unknown_key_is_refused_and_changes_nothing(
    keys: Keys, setup: Setup, signer: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    alice = keys.ssh("alice")
    fleet = SignedFleet(setup.root, alice)
    daemon = setup.daemon(TrustedKeys(ssh_signers=(_signers(setup.root / "signers", alice),)))
    poll_and_reconcile(daemon)
    good = daemon.state.commit
    writes = {name: c.writes for name, c in setup.clusters.items()}

    bad = fleet.commit("bump", keys.ssh(signer) if signer else None, BUMP)
    with caplog.at_level(logging.ERROR, logger="reconciler.daemon"):
        assert not poll_and_reconcile(daemon)

    assert daemon.state.commit == good  # C7: the last good commit stays in force
    assert {name: c.writes for name, c in setup.clusters.items()} == writes
    assert running_version(setup.clusters["a"], WIDGET) == "1.0.0"
    status = "Unsigned" if signer is None else "UntrustedKey"
    refused = daemon.status()["source"]["refused"]
    assert refused["commit"] == bad
    assert [s["status"] for s in refused["signatures"]] == [status]
    assert refused["signatures"][0]["commit"] == bad
    reason = "it is not signed" if signer is None else "it is signed by a key that is not trusted"
    assert f"commit {bad[:12]} refused: commit {bad[:12]}: {reason}" in refused["message"]
    assert f"still on {good.shown if good else ''}" in refused["message"]
    assert any(reason in r.getMessage() and bad[:12] in r.getMessage() for r in caplog.records)
    assert _metric(daemon, status) == 1.0
    [told] = setup.told.notifications
    assert told.kind is NotificationKind.COMMIT_REFUSED
    assert told.commit == bad
    assert told.details["status"] == status
    assert reason in told.summary

    assert not poll_and_reconcile(daemon)  # judged once: no second notification
    assert len(setup.told.notifications) == 1

    fixed = fleet.commit("bump, signed", alice)
    assert poll_and_reconcile(daemon)
    assert daemon.status()["source"]["commit"] == fixed
    assert daemon.status()["source"]["refused"] is None
    assert running_version(setup.clusters["a"], WIDGET) == "2.0.0"


def test_a_good_commit_on_top_of_an_unsigned_one_when_every_commit_must_be_signed(
    keys: Keys, setup: Setup
) -> None:
    alice = keys.ssh("alice")
    fleet = SignedFleet(setup.root, alice)
    signers = _signers(setup.root / "signers", alice)
    daemon = setup.daemon(TrustedKeys(ssh_signers=(signers,), every_commit=True))
    poll_and_reconcile(daemon)
    good = daemon.state.commit

    unsigned = fleet.commit("bump, unsigned", None, BUMP)
    head = fleet.commit("harmless, signed", alice)
    assert not poll_and_reconcile(daemon)

    assert daemon.state.commit == good
    assert running_version(setup.clusters["a"], WIDGET) == "1.0.0"
    refused = daemon.status()["source"]["refused"]
    assert refused["commit"] == head
    assert [(s["commit"], s["status"]) for s in refused["signatures"]] == [(unsigned, "Unsigned")]
    assert f"every commit since {good.shown if good else ''} must carry" in refused["message"]
    assert setup.told.notifications[0].details["blame"] == unsigned


def test_the_head_alone_is_checked_unless_every_commit_is_asked_for(
    keys: Keys, setup: Setup
) -> None:
    alice = keys.ssh("alice")
    fleet = SignedFleet(setup.root, alice)
    daemon = setup.daemon(TrustedKeys(ssh_signers=(_signers(setup.root / "signers", alice),)))
    poll_and_reconcile(daemon)

    fleet.commit("bump, unsigned", None, BUMP)
    head = fleet.commit("harmless, signed", alice)

    assert poll_and_reconcile(daemon)
    assert daemon.status()["source"]["commit"] == head


def test_key_rotation_with_two_trusted_keys(keys: Keys, setup: Setup) -> None:
    old, new, carol = keys.ssh("old"), keys.ssh("new"), keys.pgp("carol")
    folder = setup.root / "trusted"  # as a Secret is mounted: one file per key of its data
    folder.mkdir()
    _signers(folder / "allowed_signers", old, new)
    (folder / "carol.asc").write_bytes(carol.armored())
    fleet = SignedFleet(setup.root, old)
    daemon = setup.daemon(TrustedKeys(folders=(folder,), every_commit=True))
    assert poll_and_reconcile(daemon)

    fleet.commit("signed with the new key", new)
    assert poll_and_reconcile(daemon)
    head = fleet.commit("bump, signed with OpenPGP", carol, BUMP)
    assert poll_and_reconcile(daemon)
    assert daemon.status()["source"]["commit"] == head
    assert running_version(setup.clusters["a"], WIDGET) == "2.0.0"

    _signers(folder / "allowed_signers", new)  # the old key retired, read again at once
    late = fleet.commit("signed with the retired key", old)
    assert not poll_and_reconcile(daemon)
    assert daemon.status()["source"]["refused"]["commit"] == late
    assert daemon.status()["source"]["commit"] == head


def test_unreadable_keys_make_the_commit_wait_not_refused(keys: Keys, setup: Setup) -> None:
    alice = keys.ssh("alice")
    fleet = SignedFleet(setup.root, alice)
    signers = _signers(setup.root / "signers", alice)
    daemon = setup.daemon(TrustedKeys(ssh_signers=(signers,)))
    poll_and_reconcile(daemon)

    signers.unlink()  # a Secret mount being replaced
    head = fleet.commit("bump", alice, BUMP)
    assert not poll_and_reconcile(daemon)
    source = daemon.status()["source"]
    assert source["refused"] is None
    assert source["waiting"]["commit"] == head
    assert "signers: No such file or directory" in source["waiting"]["reason"]
    assert setup.told.notifications == []


def test_the_daemon_command_refuses_an_unsigned_commit(keys: Keys, tmp_path: Path) -> None:
    """``reconciler daemon --trusted-keys-dir``: the process, its /status and /metrics."""
    alice = keys.ssh("alice")
    folder = tmp_path / "trusted"
    folder.mkdir()
    _signers(folder / "allowed_signers", alice)
    fleet = SignedFleet(tmp_path, None)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RECONCILER_", "XDG_"))}
    env["HOME"] = str(tmp_path / "home")
    command = [sys.executable, "-m", "reconciler", "daemon", "--repo", str(fleet.remote)]
    command += ["--path", "fleet", "--listen", f"127.0.0.1:{port}"]
    command += ["--snapshot", f"{tmp_path / 'clusters'}/", "--snapshot-create"]
    command += ["--trusted-keys-dir", str(folder), "--verify-every-commit"]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        until(lambda: _refused(base) is not None, seconds=60)
        refused = _refused(base)
        assert refused is not None
        assert [s["status"] for s in refused["signatures"]] == ["Unsigned"]
        assert http_get(base + "/readyz")[0] != 200  # nothing in force: not ready
        metrics = http_get(base + "/metrics")[1]
        assert 'reconciler_commits_unverified_total{status="Unsigned"} 1.0' in metrics
    finally:
        process.terminate()
        _, errors = process.communicate(timeout=60)
    logged = errors.decode()
    assert "verifying commit signatures: every commit since the last accepted one" in logged
    assert "1 SSH signer, 0 OpenPGP keys" in logged
    assert f"commit {fleet.head[:12]} refused: commit {fleet.head[:12]}: it is not signed" in logged


def _refused(base: str) -> dict[str, Any] | None:
    try:
        code, body = http_get(base + "/status")
    except OSError:
        return None
    refused = json.loads(body)["source"]["refused"] if code == 200 else None
    return refused if isinstance(refused, dict) else None


def test_a_key_file_to_fix_stops_the_daemon_at_start(tmp_path: Path) -> None:
    need_signing_tools()
    SignedFleet(tmp_path, None)
    signers = tmp_path / "allowed_signers"
    signers.write_text("# nobody\n")
    result = CliRunner().invoke(
        cli,
        [
            "daemon",
            "--repo",
            str(tmp_path / "remote.git"),
            "--trusted-ssh-signers",
            str(signers),
            "--snapshot",
            f"{tmp_path / 'clusters'}/",
            "--snapshot-create",
            "--listen",
            "127.0.0.1:0",
        ],
        env={"HOME": str(tmp_path / "home")},
    )
    assert result.exit_code == 2, result.output
    assert f"error: trusted ssh signers {signers}: no entry in it" in result.stderr
    assert "Traceback" not in result.output + result.stderr


def test_every_commit_without_keys_is_a_usage_error(tmp_path: Path) -> None:
    SignedFleet(tmp_path, None)
    result = CliRunner().invoke(
        cli, ["daemon", "--repo", str(tmp_path / "remote.git"), "--verify-every-commit"]
    )
    assert result.exit_code == 2
    assert "--verify-every-commit needs trusted keys" in result.stderr


def test_the_channels_repository_commits_are_verified_too(keys: Keys, setup: Setup) -> None:
    """``channelsFrom.git``: a channel bump nobody trusted signed is refused like a config
    commit; the same keys."""
    alice, bob = keys.ssh("alice"), keys.ssh("bob")
    root = setup.root
    fleet = SignedFleet(root, bob)
    server = GitServer(root)
    server.start()
    try:
        channels_work = root / "channels-work"
        subprocess.run(["git", "init", "-q", "--bare", str(root / "channels.git")], check=True)
        files = {
            k.removeprefix("channels/"): v for k, v in BASE_FILES.items() if k[:9] == "channels/"
        }
        write_tree(channels_work / "channels", files)
        git(channels_work, "init", "-q", "-b", "main")

        def push_channels(message: str, key: SshKey | None) -> str:
            commit = signed_commit(channels_work, message, key)
            git(channels_work, "push", "-q", str(root / "channels.git"), "HEAD:refs/heads/main")
            return commit

        push_channels("channels", alice)
        url = f"git://127.0.0.1:{server.port}/channels.git"
        settings = (
            "apiVersion: reconciler.dev/v1alpha1\nkind: Settings\nmetadata: {name: fleet}\n"
            f"spec: {{channelsFrom: {{git: '{url}', ref: main, subPath: channels}}}}\n"
        )
        fleet.commit("channels apart", bob, {"fleet/reconciler.yaml": settings, "channels": None})
        signers = _signers(root / "signers", alice, bob)
        daemon = setup.daemon(
            TrustedKeys(ssh_signers=(signers,), every_commit=True),
            lambda url, ref, path: RemoteSource(url, ref, path, root / "channels-cache"),
        )
        assert poll_and_reconcile(daemon)
        good = daemon.state.commit
        # bob retired: the config commit he signed stays in force, a channels change is judged
        # by its own signature
        _signers(signers, alice)

        write_tree(channels_work / "channels", {"regular.yaml": BUMP["channels/regular.yaml"]})
        unsigned = push_channels("bump, unsigned", None)
        assert not poll_and_reconcile(daemon)

        assert daemon.state.commit == good
        assert running_version(setup.clusters["a"], WIDGET) == "1.0.0"
        refused = daemon.status()["source"]["refused"]
        assert refused["commit"] == f"{fleet.head}+{unsigned}"
        assert [s["commit"] for s in refused["signatures"]] == [unsigned]
        assert (
            f"refused: channels {url}: commit {unsigned[:12]}: it is not signed"
            in refused["message"]
        )

        push_channels("on top, signed", alice)
        assert not poll_and_reconcile(daemon)  # every commit: the unsigned one is still there

        # the way out: the history without it (a force-push of a signed commit)
        git(channels_work, "reset", "-q", "--soft", "HEAD~2")
        bumped = signed_commit(channels_work, "bump, signed", alice)
        git(channels_work, "push", "-qf", str(root / "channels.git"), "HEAD:refs/heads/main")
        assert poll_and_reconcile(daemon)
        assert daemon.state.commit is not None
        assert daemon.state.commit.channels == bumped
        assert running_version(setup.clusters["a"], WIDGET) == "2.0.0"
    finally:
        server.stop()


def test_a_force_push_back_to_a_signed_commit_is_accepted(keys: Keys, setup: Setup) -> None:
    alice = keys.ssh("alice")
    fleet = SignedFleet(setup.root, alice)
    signers = _signers(setup.root / "signers", alice)
    daemon = setup.daemon(TrustedKeys(ssh_signers=(signers,), every_commit=True))
    assert poll_and_reconcile(daemon)
    base = fleet.head
    fleet.commit("bump", alice, BUMP)
    assert poll_and_reconcile(daemon)

    git(fleet.work, "push", "-qf", str(fleet.remote), f"{base}:refs/heads/main")
    assert poll_and_reconcile(daemon)
    assert daemon.status()["source"]["commit"] == base
