"""Rollout planning and moves as plain data: waves by labels and shares, the policy a commit is
rolled out by (never its own alone), the healthy time, the failure threshold, and the
commands."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from reconciler.core.model import ClusterAccess, RolloutPolicy, Runtime, WavePolicy
from reconciler.core.notifications import NotificationKind
from reconciler.core.rollout_steps import (
    NEEDS,
    REASON_LENGTH,
    Health,
    RolloutCommand,
    RolloutCommandError,
    advance,
    cancel,
    command_reason,
    commands_for,
    pause,
    promote,
    resume,
    run_command,
)
from reconciler.core.rollouts import (
    MemberState,
    RolloutState,
    bases_after,
    desired_head,
    governing_policy,
    held_back,
    plan_waves,
    policy_of,
    start_rollout,
)
from reconciler.core.status import ModuleState

T0 = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
POLICY = RolloutPolicy(
    (WavePolicy("canary", selector="tier=dev"), WavePolicy("early", percent=10), WavePolicy("all")),
    healthy_for=timedelta(minutes=30),
    max_errors=2,
)


def fleet(count: int = 100, dev: int = 5) -> list[Runtime]:
    return [
        Runtime(
            f"rt-{i:03d}",
            "regular",
            ClusterAccess(context=f"rt-{i:03d}"),
            labels={"tier": "dev" if i < dev else "prod"},
        )
        for i in range(count)
    ]


def ready(rollout_commit: str, names: list[str]) -> dict[str, Health]:
    return {name: Health(ModuleState.READY, rollout_commit) for name in names}


def test_waves_take_labels_then_shares_then_the_rest_the_same_every_time() -> None:
    runtimes = fleet()
    waves = plan_waves(POLICY, runtimes)
    assert [w.name for w in waves] == ["canary", "early", "all"]
    assert waves[0].runtimes == tuple(f"rt-{i:03d}" for i in range(5))
    assert len(waves[1].runtimes) == 10  # 10% of the 100 changed runtimes
    assert len(waves[2].runtimes) == 85
    assert plan_waves(POLICY, list(reversed(runtimes))) == waves  # order does not matter
    everyone = [name for wave in waves for name in wave.runtimes]
    assert sorted(everyone) == sorted(r.name for r in runtimes)


def test_a_member_whose_upgrade_waits_for_its_window_is_not_ready_on_the_rollout() -> None:
    rollout = start_rollout(POLICY, "c2", fleet(), _bases("c1"), frozenset(), T0)
    assert rollout is not None
    canary = list(rollout.waves[0].runtimes)
    waiting = ready("c2", canary) | {canary[0]: Health(ModuleState.READY, "c2", deferred=True)}
    for minutes in (0, 30, 24 * 60):
        rollout, _ = advance(rollout, waiting, T0 + timedelta(minutes=minutes))
        assert (rollout.wave, rollout.healthy_since) == (0, None)
    member = rollout.member(canary[0])
    assert member is not None
    assert member.state is MemberState.PROGRESSING


def test_runtimes_no_wave_takes_form_a_last_wave_and_empty_waves_are_left_out() -> None:
    policy = RolloutPolicy((WavePolicy("canary", selector="tier=qa"), WavePolicy("few", percent=1)))
    waves = plan_waves(policy, fleet(10))
    assert [(w.name, len(w.runtimes)) for w in waves] == [("few", 1), ("rest", 9)]


def test_a_rollout_goes_wave_by_wave_only_after_each_stays_healthy() -> None:
    runtimes = fleet()
    rollout = start_rollout(POLICY, "c2", runtimes, _bases("c1"), frozenset(), T0)
    assert rollout is not None
    canary = list(rollout.waves[0].runtimes)
    assert desired_head(rollout, canary[0]) == "c2"
    assert desired_head(rollout, rollout.waves[1].runtimes[0]) == "c1"
    assert desired_head(rollout, "not-a-member") is None

    rollout, moments = advance(rollout, ready("c2", canary), T0)
    assert rollout.wave == 0
    assert rollout.healthy_since == T0
    assert moments == []
    rollout, moments = advance(rollout, ready("c2", canary), T0 + timedelta(minutes=29))
    assert rollout.wave == 0
    assert moments == []
    # one runtime not Ready: the healthy time starts again
    unready = ready("c2", canary) | {canary[0]: Health(ModuleState.PROCESSING, "c2")}
    rollout, _ = advance(rollout, unready, T0 + timedelta(minutes=29))
    assert rollout.healthy_since is None
    later = T0 + timedelta(minutes=40)
    rollout, _ = advance(rollout, ready("c2", canary), later)
    rollout, moments = advance(rollout, ready("c2", canary), later + timedelta(minutes=30))
    assert rollout.wave == 1
    assert [m.kind for m in moments] == [
        NotificationKind.WAVE_HEALTHY,
        NotificationKind.WAVE_STARTED,
    ]
    assert desired_head(rollout, rollout.waves[1].runtimes[0]) == "c2"
    assert desired_head(rollout, rollout.waves[2].runtimes[0]) == "c1"


def test_ready_on_the_old_commit_does_not_count() -> None:
    rollout = start_rollout(POLICY, "c2", fleet(), _bases("c1"), frozenset(), T0)
    assert rollout is not None
    old = {name: Health(ModuleState.READY, "c1") for name in rollout.waves[0].runtimes}
    rollout, _ = advance(rollout, old, T0 + timedelta(hours=5))
    rollout, _ = advance(rollout, old, T0 + timedelta(hours=10))
    assert rollout.wave == 0
    assert rollout.healthy_since is None


def test_the_failure_threshold_halts_and_nothing_moves_after() -> None:
    rollout = start_rollout(POLICY, "c2", fleet(), _bases("c1"), frozenset(), T0)
    assert rollout is not None
    canary = rollout.waves[0].runtimes
    one = ready("c2", list(canary)) | {canary[0]: Health(ModuleState.ERROR, "c2")}
    rollout, moments = advance(rollout, one, T0)
    assert rollout.state is RolloutState.PROGRESSING
    assert moments == []
    two = one | {canary[1]: Health(ModuleState.ERROR, "c2")}
    rollout, moments = advance(rollout, two, T0)
    assert rollout.state is RolloutState.HALTED
    assert [m.kind for m in moments] == [NotificationKind.ROLLOUT_HALTED]
    assert canary[0] in rollout.message
    assert "threshold 2" in rollout.message
    # halted: the released keep the new commit, the others keep theirs, for good
    assert desired_head(rollout, canary[2]) == "c2"
    assert desired_head(rollout, rollout.waves[1].runtimes[0]) == "c1"
    after, moments = advance(rollout, ready("c2", list(canary)), T0 + timedelta(days=1))
    assert after is rollout
    assert moments == []
    with pytest.raises(RolloutCommandError, match="does not resume"):
        resume(rollout, T0)
    with pytest.raises(RolloutCommandError, match="cannot promote"):
        promote(rollout, T0)
    canceled = cancel(rollout, T0, "widget 2.0.0 crashes; fixed in 2.0.1")
    assert canceled.state is RolloutState.CANCELED
    assert canceled.message == "widget 2.0.0 crashes; fixed in 2.0.1"
    assert desired_head(canceled, rollout.waves[1].runtimes[0]) == "c1"
    # a fixing commit starts from the first wave with the held-back runtimes at their base
    assert set(held_back(canceled)) == set(rollout.waves[1].runtimes + rollout.waves[2].runtimes)
    bases = bases_after(canceled, "c2", [canary[0], rollout.waves[2].runtimes[0]])
    assert bases == {canary[0]: "c2", rollout.waves[2].runtimes[0]: "c1"}


def test_pause_resume_and_promote() -> None:
    rollout = start_rollout(POLICY, "c2", fleet(), _bases("c1"), frozenset(), T0)
    assert rollout is not None
    canary = list(rollout.waves[0].runtimes)
    paused = pause(rollout, T0)
    held, _ = advance(paused, ready("c2", canary), T0 + timedelta(hours=2))
    assert held is paused
    with pytest.raises(RolloutCommandError, match="cannot pause"):
        pause(paused, T0)
    resumed = resume(paused, T0)
    assert resumed.state is RolloutState.PROGRESSING
    promoted, moments = promote(resumed, T0)  # not healthy yet: promote skips the wait
    assert promoted.wave == 1
    assert moments[-1].kind is NotificationKind.WAVE_STARTED
    last, _ = promote(promoted, T0)
    done, moments = promote(last, T0)
    assert done.state is RolloutState.COMPLETED
    assert moments[-1].kind is NotificationKind.ROLLOUT_COMPLETED
    assert desired_head(done, canary[0]) is None  # completed: the commit in force for all


def test_suspended_runtimes_are_skipped_and_do_not_hold_the_wave() -> None:
    runtimes = fleet(10, dev=3)
    rollout = start_rollout(POLICY, "c2", runtimes, _bases("c1"), frozenset({"rt-000"}), T0)
    assert rollout is not None
    skipped = rollout.member("rt-000")
    assert skipped is not None
    assert skipped.state is MemberState.SKIPPED
    assert skipped.note == "suspended"
    assert desired_head(rollout, "rt-000") == "c1"
    healthy = ready("c2", ["rt-001", "rt-002"])
    rollout, _ = advance(rollout, healthy, T0)
    rollout, _ = advance(rollout, healthy, T0 + timedelta(minutes=30))
    assert rollout.wave == 1


def _bases(commit: str) -> dict[str, str]:
    return {r.name: commit for r in fleet(1000)}


def test_a_commit_is_rolled_out_by_the_policy_under_way_then_in_force_never_its_own_alone() -> None:
    one = RolloutPolicy((WavePolicy("everyone"),), healthy_for=timedelta(0), max_errors=9)
    rollout = start_rollout(POLICY, "c2", fleet(), _bases("c1"), frozenset(), T0)
    assert rollout is not None
    under_way = policy_of(rollout)
    assert plan_waves(under_way, fleet()) == list(rollout.waves)  # the same waves again

    assert governing_policy(None, POLICY) == POLICY  # dropped: the one in force
    assert governing_policy(one, POLICY) == POLICY  # loosened: the one in force
    assert governing_policy(one, one, under_way) == under_way  # a rollout under way keeps its waves
    assert governing_policy(POLICY, None) == POLICY  # added: waves are only slower
    assert governing_policy(None, None) is None
    longer = RolloutPolicy(POLICY.waves, healthy_for=timedelta(hours=2), max_errors=1)
    assert governing_policy(longer, POLICY) == longer  # a stricter timing applies at once


# -- the commands, written once (``reconciler rollout``, ``POST /rollout``, the status page) ------


@pytest.mark.parametrize("state", list(RolloutState))
@pytest.mark.parametrize("command", list(RolloutCommand))
def test_a_command_applies_in_the_states_it_needs_and_only_there(
    command: RolloutCommand, state: RolloutState
) -> None:
    made = start_rollout(POLICY, "c2", fleet(), _bases("c1"), frozenset(), T0)
    assert made is not None
    rollout = replace(made, state=state)
    applies = command in commands_for(state)
    assert applies == (state in NEEDS[command])
    if applies:
        after, _ = run_command(rollout, command, T0, "why")
        assert after.state is not state or command is RolloutCommand.PROMOTE
    else:
        with pytest.raises(RolloutCommandError):
            run_command(rollout, command, T0)


def test_the_commands_of_each_state() -> None:
    assert [str(c) for c in commands_for(RolloutState.PROGRESSING)] == [
        "pause",
        "cancel",
        "promote",
    ]
    assert [str(c) for c in commands_for(RolloutState.PAUSED)] == ["resume", "cancel", "promote"]
    assert commands_for(RolloutState.HALTED) == (RolloutCommand.CANCEL,)
    assert commands_for(RolloutState.COMPLETED) == ()
    assert [c for c in RolloutCommand if c.keeps_reason] == [RolloutCommand.CANCEL]


def test_a_cancel_keeps_its_reason_on_one_line_masked_and_bounded() -> None:
    made = start_rollout(POLICY, "c2", fleet(), _bases("c1"), frozenset(), T0)
    assert made is not None
    why = "3.0.0  is\nbroken: see https://user:hunter2@ci.example.com/run/1 " + "x" * 600
    canceled, _ = run_command(made, RolloutCommand.CANCEL, T0, why)
    assert canceled.message == command_reason(why)
    assert canceled.message.startswith("3.0.0 is broken: see https://***@ci.example.com/run/1 ")
    assert "hunter2" not in canceled.message
    assert len(canceled.message) <= REASON_LENGTH
    assert command_reason(canceled.message) == canceled.message  # kept as sent: no change again
