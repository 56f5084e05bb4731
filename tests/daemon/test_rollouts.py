"""Rollouts on a fleet of 100 runtimes: the daemon follows a real git server (``git daemon`` on
127.0.0.1), reconciles in-memory clusters and keeps a real SQLite store; time is a fake clock
the test moves. The rollout job (``daemon.rollouts.tick``) is called directly, as the scheduler
would.

A channel bump goes wave by wave (canary ``tier=dev``, then 10%, then the rest), each wave only
after it stayed Ready for the policy's time; a failing version in the canary halts the rollout
and no runtime outside the canary changes; pause, resume, promote and cancel; a restart and a
replica takeover in the middle resume where it was.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import FrameType

import pytest

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.fleetdiff import FleetDiffer
from reconciler.core.model import ClusterAccess
from reconciler.core.notifications import Notification, NotificationKind
from reconciler.core.objects import ObjectRef
from reconciler.core.rollout_steps import RolloutCommand
from reconciler.core.rollouts import MemberState, Rollout, RolloutState
from reconciler.daemon.service import Daemon, DaemonOptions
from reconciler.operations.store import SqliteStore
from reconciler.source.git import RemoteSource
from tests.support.daemons import GitServer, poll_and_reconcile, running_version
from tests.support.fleet_history import (
    channel_yaml,
    default_yaml,
    git,
    manifest_yaml,
    module_yaml,
    write_tree,
)

RUNTIMES = 100
DEV = 4  # the canary: runtimes labelled tier=dev
WIDGET = ObjectRef("apps/v1", "Deployment", "widget-system", "widget-operator")
SETTINGS = """\
apiVersion: reconciler.dev/v1alpha1
kind: Settings
metadata: {name: fleet}
spec:
  channelsFrom: {path: ../channels}
  rollout:
    waves:
      - {name: canary, selector: tier=dev}
      - {name: early, percent: 10}
      - {name: everyone}
    healthyFor: 30m
    haltAfterErrors: 2
"""
#: The Settings without ``spec.rollout``, and with one wave of every runtime.
NO_POLICY = SETTINGS[: SETTINGS.index("  rollout:")]
ONE_WAVE = NO_POLICY + "  rollout: {waves: [{name: everyone}], healthyFor: 0s}\n"
BROKEN = (
    manifest_yaml("widget", "3.0.0")
    + "---\napiVersion: nowhere.example.io/v1\nkind: Gizmo\nmetadata: {name: g}\n"
)


def runtime_yaml(index: int) -> str:
    tier = "dev" if index < DEV else "prod"
    name = f"rt-{index:03d}"
    return (
        "apiVersion: reconciler.dev/v1alpha1\nkind: Runtime\n"
        f"metadata: {{name: {name}, labels: {{tier: {tier}}}}}\nspec:\n  channel: regular\n"
        f"  cluster: {{context: {name}}}\n  modules: [{{name: widget}}]\n"
    )


def base_files() -> dict[str, str | None]:
    files: dict[str, str | None] = {
        "fleet/reconciler.yaml": SETTINGS,
        "fleet/modules/widget/module.yaml": module_yaml("widget"),
        "channels/regular.yaml": channel_yaml("regular", {"widget": "1.0.0"}),
    }
    for version in ("1.0.0", "2.0.0", "3.0.1", "3.1.0"):
        files[f"fleet/modules/widget/{version}/manifest.yaml"] = manifest_yaml("widget", version)
        files[f"fleet/modules/widget/{version}/default.yaml"] = default_yaml("widget")
    files["fleet/modules/widget/3.0.0/manifest.yaml"] = BROKEN
    for index in range(RUNTIMES):
        files[f"fleet/runtimes/rt-{index:03d}.yaml"] = runtime_yaml(index)
    return files


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@dataclass
class Recorder:
    """A notifier that keeps what it is told, in order."""

    told: list[Notification] = field(default_factory=list)

    def notify(self, notification: Notification) -> None:
        self.told.append(notification)

    def kinds(self) -> list[str]:
        return [str(n.kind) for n in self.told]


@dataclass
class World:
    root: Path
    work: Path
    clock: Clock
    clusters: dict[str, InMemoryCluster]
    server: GitServer
    daemons: list[Daemon] = field(default_factory=list)
    told: Recorder = field(default_factory=Recorder)

    def commit(self, channel_version: str, settings: str | None = None) -> None:
        """Bump the channel to ``channel_version``, with new Settings (``reconciler.yaml``)."""
        files: dict[str, str | None] = {
            "channels/regular.yaml": channel_yaml("regular", {"widget": channel_version})
        }
        if settings is not None:
            files["fleet/reconciler.yaml"] = settings
        write_tree(self.work, files)
        git(self.work, "add", "-A")
        git(self.work, "commit", "-qm", f"widget {channel_version}")
        git(self.work, "push", "-q", str(self.root / "remote.git"), "HEAD:refs/heads/main")

    def daemon(self, member: str = "one") -> Daemon:
        def connect(access: ClusterAccess, name: str) -> InMemoryCluster:
            return self.clusters.setdefault(name, InMemoryCluster())

        source = RemoteSource(self.server.url, "main", "fleet", self.root / f"cache-{member}")
        made = Daemon(
            source,
            SqliteStore(self.root / "state.db"),
            connect,
            self.clock,
            # a lease longer than the clock's jumps: a loaded machine's real-time heartbeat
            # in the middle of a wave would otherwise lapse it and fence the wave's reconciles
            options=DaemonOptions(member=member, workers=4, lease=timedelta(days=7)),
        )
        made.notifier = self.told
        self.daemons.append(made)
        return made

    def versions(self) -> dict[str, str | None]:
        return {
            f"rt-{i:03d}": running_version(self.clusters[f"rt-{i:03d}"], WIDGET)
            for i in range(RUNTIMES)
        }


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    work = tmp_path / "work"
    work.mkdir()
    git(tmp_path, "init", "-q", "--bare", str(tmp_path / "remote.git"))
    write_tree(work, base_files())
    git(work, "init", "-q", "-b", "main")
    git(work, "add", "-A")
    git(work, "commit", "-qm", "base")
    git(work, "push", "-q", str(tmp_path / "remote.git"), "HEAD:refs/heads/main")
    server = GitServer(tmp_path)
    server.start()
    made = World(tmp_path, work, Clock(), {}, server)
    try:
        yield made
    finally:
        for daemon in made.daemons:
            daemon.close()
        server.stop()


def tick(daemon: Daemon) -> Rollout:
    """The rollout job once, and the reconciles it started, to the end."""
    rollout = daemon.rollouts.tick()
    daemon.wait_idle()
    assert rollout is not None
    return rollout


def healthy_wave(world: World, daemon: Daemon) -> Rollout:
    """Let the wave under way stay healthy for the policy's 30 minutes."""
    tick(daemon)
    world.clock.advance(minutes=30)
    return tick(daemon)


def started(world: World) -> Daemon:
    daemon = world.daemon()
    assert poll_and_reconcile(daemon)
    assert set(world.versions().values()) == {"1.0.0"}
    assert daemon.rollouts.current() is None  # the first commit reaches everyone
    return daemon


def on(world: World, version: str) -> set[str]:
    return {name for name, running in world.versions().items() if running == version}


@contextmanager
def fleet_diffs() -> Iterator[list[str]]:
    """The fleet diffs made on this thread meanwhile (a profile hook sees each call of
    :meth:`FleetDiffer.diff`; it replaces nothing)."""
    made: list[str] = []
    code = FleetDiffer.diff.__code__

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call" and frame.f_code is code:
            made.append(frame.f_back.f_code.co_qualname if frame.f_back else "")

    sys.setprofile(profile)
    try:
        yield made
    finally:
        sys.setprofile(None)


def test_a_commit_with_a_rollout_policy_is_diffed_once_for_its_rollout_and_reconciles(
    world: World,
) -> None:
    daemon = started(world)
    world.commit("2.0.0")
    with fleet_diffs() as made:
        assert daemon.poll()
    rollout = daemon.rollouts.current()
    assert rollout is not None
    assert len(rollout.members) == RUNTIMES  # every runtime changes
    assert made == ["Daemon._submit_changed"]  # the rollout's waves came from the same diff


def test_a_bump_goes_wave_by_wave_after_each_stays_healthy(world: World) -> None:
    daemon = started(world)
    world.commit("2.0.0")
    assert poll_and_reconcile(daemon)

    rollout = daemon.rollouts.current()
    assert rollout is not None
    canary, early, rest = (set(w.runtimes) for w in rollout.waves)
    assert canary == {f"rt-{i:03d}" for i in range(DEV)}
    assert (len(early), len(rest)) == (10, RUNTIMES - DEV - 10)
    assert on(world, "2.0.0") == canary  # the others keep their previous desired state
    daemon.reconcile_all(wait=True)  # a resync changes nothing outside the wave
    assert on(world, "2.0.0") == canary

    tick(daemon)
    world.clock.advance(minutes=29)
    assert tick(daemon).wave == 0  # healthy, but not for 30 minutes yet
    world.clock.advance(minutes=1)
    assert tick(daemon).wave == 1
    assert on(world, "2.0.0") == canary | early

    rollout = healthy_wave(world, daemon)
    assert rollout.wave == 2
    assert on(world, "2.0.0") == canary | early | rest
    rollout = healthy_wave(world, daemon)
    assert rollout.state is RolloutState.COMPLETED
    assert rollout.progress == 1.0
    assert world.told.kinds() == [
        "rollout.scheduled",
        "rollout.wave_started",
        "rollout.wave_healthy",
        "rollout.wave_started",
        "rollout.wave_healthy",
        "rollout.wave_started",
        "rollout.wave_healthy",
        "rollout.completed",
    ]
    status = daemon.status()["rollouts"][0]
    assert (status["state"], status["progress"]) == ("Completed", 1.0)
    metrics = daemon.metrics.exposition().decode()
    assert f'reconciler_rollout_runtimes{{rollout="{rollout.id}",state="Ready"}} 100.0' in metrics


def test_a_failing_canary_halts_and_no_runtime_outside_it_changes(world: World) -> None:
    daemon = started(world)
    outside = {name: world.clusters[name].snapshot() for name in sorted(world.clusters)[DEV:]}
    world.commit("3.0.0")
    assert poll_and_reconcile(daemon)
    rollout = tick(daemon)
    assert rollout.state is RolloutState.HALTED
    assert rollout.reason == "FailureThreshold"
    assert "rt-000" in rollout.message
    assert world.told.kinds()[-1] == "rollout.halted"

    world.clock.advance(days=2)
    daemon.reconcile_all(wait=True)
    assert tick(daemon).state is RolloutState.HALTED  # nothing moves it on
    for name, objects in outside.items():
        assert world.clusters[name].snapshot() == objects, name
    status = daemon.status()["rollouts"][0]
    assert status["reason"] == "FailureThreshold"
    assert status["waves"][0]["error"] == DEV

    canceled = daemon.rollouts.command(rollout.id, RolloutCommand.CANCEL, "3.0.0 is broken")
    assert canceled.message == "3.0.0 is broken"
    assert world.told.kinds()[-1] == "rollout.canceled"

    world.commit("3.0.1")  # the fix: a new rollout, from the first wave
    assert poll_and_reconcile(daemon)
    fixed = daemon.rollouts.current()
    assert fixed is not None
    assert fixed.id != rollout.id
    assert fixed.wave == 0
    assert len(fixed.members) == RUNTIMES
    assert on(world, "3.0.1") == set(fixed.waves[0].runtimes)
    assert on(world, "1.0.0") == {f"rt-{i:03d}" for i in range(DEV, RUNTIMES)}
    old = daemon.store.rollout(rollout.id)
    assert old is not None
    assert old.state is RolloutState.CANCELED


def test_pause_resume_and_promote(world: World) -> None:
    daemon = started(world)
    world.commit("2.0.0")
    assert poll_and_reconcile(daemon)
    current = daemon.rollouts.current()
    assert current is not None
    paused = daemon.rollouts.command(current.id[:7], RolloutCommand.PAUSE)
    assert paused.state is RolloutState.PAUSED
    tick(daemon)
    world.clock.advance(hours=3)
    assert tick(daemon).wave == 0  # paused: healthy for hours, no next wave

    promoted = daemon.rollouts.command(current.id, RolloutCommand.PROMOTE)
    daemon.wait_idle()
    assert promoted.wave == 1  # promote skips the wait, also while paused
    assert promoted.state is RolloutState.PAUSED
    assert on(world, "2.0.0") == set(current.waves[0].runtimes + current.waves[1].runtimes)

    resumed = daemon.rollouts.command(current.id, RolloutCommand.RESUME)
    assert resumed.state is RolloutState.PROGRESSING
    assert healthy_wave(world, daemon).wave == 2


def test_a_restart_and_a_takeover_resume_the_rollout_where_it_was(world: World) -> None:
    first = started(world)
    world.commit("2.0.0")
    assert poll_and_reconcile(first)
    assert healthy_wave(world, first).wave == 1
    first.close()  # a restart: a new process on the same store
    told = len(world.told.told)

    second = world.daemon("two")
    assert poll_and_reconcile(second)
    rollout = second.rollouts.current()
    assert rollout is not None
    assert rollout.wave == 1
    assert len(world.told.told) == told  # not scheduled again
    canary, early, rest = (set(w.runtimes) for w in rollout.waves)
    assert on(world, "2.0.0") == canary | early  # the rest are still held back
    member = rollout.member(sorted(rest)[0])
    assert member is not None
    assert member.state is MemberState.PENDING

    assert healthy_wave(world, second).wave == 2
    assert on(world, "2.0.0") == canary | early | rest
    assert healthy_wave(world, second).state is RolloutState.COMPLETED
    assert world.told.told[-1].kind is NotificationKind.ROLLOUT_COMPLETED


def test_a_wave_waits_for_its_runtimes_maintenance_windows(world: World) -> None:
    """L10 in a wave: an upgrade that requires downtime waits for each runtime's window, and a
    runtime waiting for it is not Ready on the rollout's versions: the wave is not healthy (the
    next one does not start) until it was upgraded and stayed Ready."""
    saturday = "  maintenanceWindow: {days: [Sat], start: '02:00', duration: 2h, timezone: UTC}\n"
    friday = "  maintenanceWindow: {days: [Fri], start: '11:00', duration: 2h, timezone: UTC}\n"
    files: dict[str, str | None] = {
        "fleet/modules/widget/module.yaml": module_yaml(
            "widget", '  versions:\n    "2.0.0": {requiresDowntime: true}\n'
        ),
        "fleet/runtimes/rt-000.yaml": runtime_yaml(0) + saturday,
    }
    for index in range(1, DEV):  # the rest of the canary: a window open now
        files[f"fleet/runtimes/rt-{index:03d}.yaml"] = runtime_yaml(index) + friday
    write_tree(world.work, files)
    git(world.work, "add", "-A")
    git(world.work, "commit", "-qm", "windows for the canary; widget 2.0.0 requires downtime")
    git(world.work, "push", "-q", str(world.root / "remote.git"), "HEAD:refs/heads/main")
    daemon = started(world)  # Friday 12:00 UTC
    world.commit("2.0.0")
    assert poll_and_reconcile(daemon)
    canary = set(tick(daemon).waves[0].runtimes)

    assert on(world, "2.0.0") == canary - {"rt-000"}  # rt-000 waits for Saturday 02:00
    world.clock.advance(hours=3)
    assert tick(daemon).wave == 0  # the others stayed Ready for 3 hours: not enough

    world.clock.advance(hours=11, minutes=30)  # Saturday 02:30: its window is open
    daemon.reconcile_all(wait=True)
    assert on(world, "2.0.0") == canary
    assert tick(daemon).wave == 0  # upgraded and Ready, but not for 30 minutes yet
    assert healthy_wave(world, daemon).wave == 1


# -- a commit does not set its own rollout ----------------------------------------------------


def _canary(rollout: Rollout | None) -> set[str]:
    assert rollout is not None
    assert [w.name for w in rollout.waves] == ["canary", "early", "everyone"]
    return set(rollout.waves[0].runtimes)


@pytest.mark.parametrize("settings", [NO_POLICY, ONE_WAVE], ids=["removed", "one-wave"])
def test_a_commit_that_drops_or_loosens_the_policy_is_rolled_out_by_the_one_in_force(
    world: World, settings: str
) -> None:
    daemon = started(world)
    world.commit("2.0.0", settings)
    assert poll_and_reconcile(daemon)

    rollout = daemon.rollouts.current()
    canary = _canary(rollout)
    assert on(world, "2.0.0") == canary  # not every runtime at once
    assert rollout is not None
    assert rollout.healthy_for == timedelta(minutes=30)
    assert "not this commit's own spec.rollout" in world.told.told[0].summary

    world.commit("3.0.1", settings)  # the next commit: the rollout in progress keeps its waves
    assert poll_and_reconcile(daemon)
    assert on(world, "3.0.1") == _canary(daemon.rollouts.current())
    assert on(world, "1.0.0") == {f"rt-{i:03d}" for i in range(DEV, RUNTIMES)}
    for _ in range(3):
        healthy_wave(world, daemon)
    completed = tick(daemon)
    assert completed.state is RolloutState.COMPLETED
    assert on(world, "3.0.1") == set(world.versions())

    world.commit("3.1.0", settings)  # a commit after that: the new policy is in force
    assert poll_and_reconcile(daemon)
    if settings == NO_POLICY:
        assert daemon.rollouts.current() == completed  # no rollout: every runtime at once
        assert on(world, "3.1.0") == set(world.versions())
    else:
        rollout = daemon.rollouts.current()
        assert rollout is not None
        assert [w.name for w in rollout.waves] == ["everyone"]


def test_a_fix_without_a_policy_leaves_a_halted_rollout_in_the_waves_in_force(
    world: World,
) -> None:
    """A halt stays until a person acts; the fix they push (here without ``spec.rollout``) is
    rolled out from the first wave of the policy in force, as any fix of a halted rollout."""
    daemon = started(world)
    world.commit("3.0.0")
    assert poll_and_reconcile(daemon)
    halted = tick(daemon)
    assert halted.state is RolloutState.HALTED

    world.commit("3.0.1", NO_POLICY)
    assert poll_and_reconcile(daemon)

    fixed = daemon.rollouts.current()
    canary = _canary(fixed)
    assert fixed is not None
    assert fixed.id != halted.id
    assert len(fixed.members) == RUNTIMES
    assert on(world, "3.0.1") == canary  # the fix lands on the canary
    assert on(world, "1.0.0") == {f"rt-{i:03d}" for i in range(DEV, RUNTIMES)}
    daemon.reconcile_all(wait=True)  # a resync changes nothing outside the wave
    assert on(world, "3.0.1") == canary
    assert healthy_wave(world, daemon).wave == 1
    assert on(world, "3.0.1") == canary | set(fixed.waves[1].runtimes)


def test_a_paused_rollout_is_taken_over_in_the_waves_in_force(world: World) -> None:
    daemon = started(world)
    world.commit("2.0.0")
    assert poll_and_reconcile(daemon)
    paused = daemon.rollouts.command(_id(daemon), RolloutCommand.PAUSE)

    world.commit("3.0.1", ONE_WAVE)
    assert poll_and_reconcile(daemon)

    newer = daemon.rollouts.current()
    canary = _canary(newer)
    assert on(world, "3.0.1") == canary
    assert on(world, "1.0.0") == {f"rt-{i:03d}" for i in range(DEV, RUNTIMES)}
    old = daemon.store.rollout(paused.id)
    assert old is not None
    assert old.state is RolloutState.SUPERSEDED


def _id(daemon: Daemon) -> str:
    current = daemon.rollouts.current()
    assert current is not None
    return current.id
