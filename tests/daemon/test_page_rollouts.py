"""The rollouts page's view model (pure): newest first, each wave's runtimes and state, the
healthy-for countdown, the halt reason, and the command lines that apply in each state."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from reconciler.core.durations import duration_text
from reconciler.core.rollouts import (
    Member,
    MemberState,
    Rollout,
    RolloutState,
    Wave,
    rollout_id,
)
from reconciler.daemon.page_model import SourceView
from reconciler.daemon.page_rollouts import (
    MEMBERS_SHOWN,
    MEMBERS_SHOWN_ONE,
    MemberView,
    rollout_view,
    rollouts_view,
)

T0 = datetime(2026, 11, 27, 10, 0, tzinfo=UTC)
BASE = "0" * 40


def rollout(commit: str, created: datetime, **changes: object) -> Rollout:
    """Two waves: ``canary`` (a, b) under way, ``rest`` (c, d skipped) pending."""
    made = Rollout(
        id=rollout_id(commit),
        commit=commit,
        created=created,
        state=RolloutState.PROGRESSING,
        waves=(Wave("canary", "tier=canary", ("a", "b")), Wave("rest", "the rest", ("c", "d"))),
        members=(
            Member("a", 0, MemberState.READY, BASE),
            Member("b", 0, MemberState.PROGRESSING, BASE),
            Member("c", 1, MemberState.PENDING, BASE),
            Member("d", 1, MemberState.SKIPPED, BASE, "suspended"),
        ),
        healthy_for=timedelta(minutes=10),
        max_errors=1,
        wave_started=created,
        updated=created,
    )
    return replace(made, **changes)  # type: ignore[arg-type]


def test_newest_first_with_waves_runtimes_and_progress() -> None:
    older = rollout("1" * 40, T0)
    newer = rollout("2" * 40, T0 + timedelta(hours=1))

    view = rollouts_view([older, newer], SourceView(), T0 + timedelta(hours=2))

    assert [r.id for r in view.rollouts] == ["2" * 12, "1" * 12]
    shown = view.rollouts[0]
    assert shown.short == "22222222"
    assert (shown.state, shown.wave, shown.position) == ("Progressing", "canary", "wave 1 of 2")
    assert shown.progress == 33  # a of a, b, c (d skipped)
    assert dict(shown.counts) == {"Ready": 1, "Progressing": 1, "Pending": 1, "Skipped": 1}
    canary, rest = shown.waves
    assert (canary.status, canary.ready, canary.counted) == ("under way", 1, 2)
    # worst first: the runtimes to look at
    assert [(m.runtime, m.state) for m in canary.members] == [("b", "Progressing"), ("a", "Ready")]
    assert (rest.status, rest.counted) == ("not started", 1)
    assert [(m.runtime, m.note, m.base) for m in rest.members][1] == ("d", "suspended", "00000000")


def test_the_countdown_of_a_healthy_wave_and_what_a_wave_waits_for() -> None:
    waiting = rollout_view(rollout("1" * 40, T0), T0)
    healthy = rollout_view(
        rollout("1" * 40, T0, healthy_since=T0), T0 + timedelta(minutes=5, seconds=50)
    )
    overdue = rollout_view(rollout("1" * 40, T0, healthy_since=T0), T0 + timedelta(hours=1))

    assert waiting.countdown == (
        "waiting for every runtime of wave canary to be Ready; "
        "then the next wave starts after 10m of health"
    )
    assert healthy.countdown == (
        "every runtime of wave canary Ready since 2026-11-27 10:00:00 UTC: "
        "the next wave starts in 4m 10s (healthy for 10m)"
    )
    assert "the next wave starts in 0s" in overdue.countdown
    last = rollout_view(rollout("1" * 40, T0, wave=1, healthy_since=T0), T0)
    assert "the rollout completes in 10m" in last.countdown


def test_a_halted_rollout_shows_its_reason_and_only_cancel() -> None:
    halted = rollout(
        "3" * 40,
        T0,
        state=RolloutState.HALTED,
        reason="FailureThreshold",
        message="1 runtime(s) in Error (threshold 1): b",
    )

    view = rollout_view(halted, T0)

    assert (view.reason, view.message, view.countdown) == (
        "FailureThreshold",
        "1 runtime(s) in Error (threshold 1): b",
        "",
    )
    assert view.waves[0].status == "halted"
    assert [a.command for a in view.actions] == [
        f'reconciler rollout cancel {"3" * 12} --reason "why"'
    ]


def test_the_commands_that_apply_in_each_state() -> None:
    def commands(state: RolloutState) -> list[str]:
        return [
            a.command.split()[2]
            for a in rollout_view(rollout("4" * 40, T0, state=state), T0).actions
        ]

    assert commands(RolloutState.PROGRESSING) == ["pause", "promote", "cancel"]
    assert commands(RolloutState.PAUSED) == ["resume", "promote", "cancel"]
    for finished in (RolloutState.COMPLETED, RolloutState.CANCELED, RolloutState.SUPERSEDED):
        assert commands(finished) == []
    paused = rollout_view(rollout("4" * 40, T0, state=RolloutState.PAUSED), T0)
    assert paused.countdown.startswith("paused in wave canary")
    done = rollout_view(rollout("4" * 40, T0, state=RolloutState.COMPLETED, wave=1), T0)
    assert [w.status for w in done.waves] == ["done", "done"]
    stopped = rollout_view(rollout("4" * 40, T0, state=RolloutState.CANCELED), T0)
    assert [w.status for w in stopped.waves] == ["stopped", "not started"]


def test_durations() -> None:
    assert duration_text(timedelta(hours=1, minutes=5)) == "1h 5m"
    assert duration_text(timedelta(seconds=30)) == "30s"
    assert duration_text(timedelta(0)) == "0s"
    assert duration_text(timedelta(seconds=-5)) == "0s"


def test_a_wave_of_thousands_lists_the_worst_runtimes_and_counts_the_rest() -> None:
    names = tuple(f"rt-{i:05}" for i in range(5000))
    members = tuple(
        Member(name, 0, MemberState.ERROR if i == 4321 else MemberState.READY, BASE)
        for i, name in enumerate(names)
    )
    big = rollout(
        "5" * 40, T0 - timedelta(hours=1), waves=(Wave("all", "the rest", names),), members=members
    )

    listed = rollouts_view([big, rollout("6" * 40, T0)], SourceView(), T0).rollouts[1]
    alone = rollouts_view([big], SourceView(), T0).rollouts[0]

    wave = listed.waves[0]
    assert len(wave.members) == MEMBERS_SHOWN
    assert wave.more == 5000 - MEMBERS_SHOWN
    assert wave.members[0] == MemberView("rt-04321", "Error", "", "00000000")
    assert (wave.ready, wave.counted) == (4999, 5000)
    assert len(alone.waves[0].members) == MEMBERS_SHOWN_ONE
