"""What the status page shows of the rollouts (``/rollouts`` asked for as HTML), as frozen
values built from plain data (pure, as :mod:`reconciler.daemon.page_model`; import-linter
keeps it so): each rollout, newest first, with its commit, state, the wave under way, every
wave's runtimes with their state, how long the wave under way must stay healthy still, the
halt or cancel reason, and the ``reconciler rollout`` command lines that apply to it (the page
itself changes nothing).

Callers: :mod:`reconciler.daemon.page`, tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from reconciler.core.durations import duration_text
from reconciler.core.rollout_steps import RolloutCommand, commands_for
from reconciler.core.rollouts import Rollout, RolloutState
from reconciler.daemon.page_model import SourceView, short_commit, time_text

#: The rollouts the page shows, newest first (each one read whole from the store: 5 of 5,000
#: runtimes each read and render in about 100 ms; ``reconciler rollout list`` lists more).
ROLLOUTS_SHOWN = 5
#: The runtimes a wave lists, worst state first (``reconciler rollout show`` lists them all):
#: on the page of the newest rollouts, and on the page of one (``?id=``).
MEMBERS_SHOWN = 50
MEMBERS_SHOWN_ONE = 1000
#: The order of a wave's runtimes on the page: the ones to look at first.
_WORST = {"Error": 0, "Progressing": 1, "Pending": 2, "Skipped": 3, "Ready": 4}
#: What each command of ``reconciler rollout`` does, in the order of the page (those that
#: apply to a rollout's state: :func:`~reconciler.core.rollout_steps.commands_for`).
_WHAT = {
    RolloutCommand.PAUSE: "start no further wave",
    RolloutCommand.RESUME: "go on; the healthy time counts again",
    RolloutCommand.PROMOTE: "start the next wave now, without waiting for this one to stay healthy",
    RolloutCommand.CANCEL: "start no further wave, for good (upgraded runtimes stay)",
}


@dataclass(frozen=True, slots=True)
class MemberView:
    """A runtime of a wave: its state, a word on a skip, and the commit it had before."""

    runtime: str
    state: str
    note: str
    base: str


@dataclass(frozen=True, slots=True)
class WaveView:
    """A wave: its name, what chose it, where it is (``done``, ``under way``, ``halted``,
    ``stopped``, ``not started``), its runtimes and how many are Ready (skipped ones aside)."""

    name: str
    chosen_by: str
    status: str
    ready: int
    counted: int
    members: tuple[MemberView, ...]
    #: The runtimes of the wave not listed (past the page's limit).
    more: int


@dataclass(frozen=True, slots=True)
class Action:
    """A command line to run on a rollout, and what it does."""

    command: str
    what: str


@dataclass(frozen=True, slots=True)
class RolloutView:
    """One rollout."""

    id: str
    commit: str
    short: str
    state: str
    wave: str
    #: ``wave 2 of 3``.
    position: str
    #: Ready members (skipped ones aside), as a whole percentage.
    progress: int
    counts: tuple[tuple[str, int], ...]
    created: str
    updated: str
    reason: str
    message: str
    #: How the wave under way moves on: the healthy-for countdown where known ("" when done).
    countdown: str
    waves: tuple[WaveView, ...]
    actions: tuple[Action, ...]


@dataclass(frozen=True, slots=True)
class RolloutsView:
    """``/rollouts``: the newest rollouts first (one when ``?id=`` names it)."""

    rollouts: tuple[RolloutView, ...]
    daemon: SourceView
    generated: str
    #: How many rollouts the page shows at most.
    shown: int = ROLLOUTS_SHOWN


def rollouts_view(rollouts: Sequence[Rollout], source: SourceView, now: datetime) -> RolloutsView:
    """The page of ``rollouts``, newest first whatever their order, at ``now``; each wave
    lists :data:`MEMBERS_SHOWN` runtimes, or :data:`MEMBERS_SHOWN_ONE` on the page of one."""
    newest = sorted(rollouts, key=lambda r: r.created, reverse=True)[:ROLLOUTS_SHOWN]
    shown = MEMBERS_SHOWN_ONE if len(newest) == 1 else MEMBERS_SHOWN
    views = tuple(rollout_view(r, now, shown) for r in newest)
    return RolloutsView(views, source, time_text(now))


def rollout_view(rollout: Rollout, now: datetime, shown: int = MEMBERS_SHOWN) -> RolloutView:
    """``rollout`` as the page shows it at ``now``, ``shown`` runtimes a wave at most."""
    return RolloutView(
        id=rollout.id,
        commit=rollout.commit,
        short=short_commit(rollout.commit),
        state=str(rollout.state),
        wave=rollout.waves[rollout.wave].name,
        position=f"wave {rollout.wave + 1} of {len(rollout.waves)}",
        progress=int(rollout.progress * 100),
        counts=tuple((state, n) for state, n in rollout.counts().items() if n),
        created=time_text(rollout.created),
        updated=time_text(rollout.updated),
        reason=str(rollout.reason or ""),
        message=rollout.message,
        countdown=countdown(rollout, now),
        waves=tuple(_wave_view(rollout, index, shown) for index in range(len(rollout.waves))),
        actions=tuple(
            Action(_command_line(command, rollout.id), what)
            for command, what in _WHAT.items()
            if command in commands_for(rollout.state)
        ),
    )


def countdown(rollout: Rollout, now: datetime) -> str:
    """How the wave under way moves on: the time it must stay healthy still once every runtime
    of it is Ready, what it waits for before, or why it does not move ("" once finished)."""
    wave = rollout.waves[rollout.wave].name
    last = rollout.wave + 1 >= len(rollout.waves)
    then = "the rollout completes" if last else "the next wave starts"
    healthy = duration_text(rollout.healthy_for)
    if rollout.state is RolloutState.PAUSED:
        return f"paused in wave {wave}: no wave starts until it is resumed or promoted"
    if rollout.state is not RolloutState.PROGRESSING:
        return ""
    if rollout.healthy_since is None:
        return (
            f"waiting for every runtime of wave {wave} to be Ready; "
            f"then {then} after {healthy} of health"
        )
    left = max(rollout.healthy_for - (now - rollout.healthy_since), timedelta(0))
    return (
        f"every runtime of wave {wave} Ready since {time_text(rollout.healthy_since)}: "
        f"{then} in {duration_text(left)} (healthy for {healthy})"
    )


def _wave_view(rollout: Rollout, index: int, shown: int) -> WaveView:
    wave = rollout.waves[index]
    members = sorted(rollout.in_wave(index), key=lambda m: (_WORST.get(str(m.state), 0), m.runtime))
    counted = [m for m in members if str(m.state) != "Skipped"]
    return WaveView(
        name=wave.name,
        chosen_by=wave.chosen_by,
        status=_wave_status(rollout, index),
        ready=sum(str(m.state) == "Ready" for m in counted),
        counted=len(counted),
        members=tuple(
            MemberView(m.runtime, str(m.state), m.note, short_commit(m.base))
            for m in members[:shown]
        ),
        more=max(len(members) - shown, 0),
    )


def _wave_status(rollout: Rollout, index: int) -> str:
    started = index <= rollout.wave or any(m.state.released for m in rollout.in_wave(index))
    if not started:
        return "not started"
    if index < rollout.wave or rollout.state is RolloutState.COMPLETED:
        return "done"
    if rollout.state is RolloutState.HALTED:
        return "halted"
    if rollout.state in (RolloutState.PROGRESSING, RolloutState.PAUSED):
        return "under way"
    return "stopped"


def _command_line(command: RolloutCommand, rollout_id: str) -> str:
    if command.keeps_reason:
        return f'reconciler rollout {command} {rollout_id} --reason "why"'
    return f"reconciler rollout {command} {rollout_id}"
