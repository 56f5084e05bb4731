"""How a rollout moves (pure): one :func:`advance` per tick, and the commands on it.

:func:`advance` takes what the state store says of each member (:class:`Health`: its state
and the commit it was last reconciled on) and the time, and returns the rollout after it with
the moments worth telling people about (:class:`Moment`, turned into notifications by the
daemon):

- the members of started waves take their observed state (Ready or Error only once
  reconciled on the rollout's commit);
- ``max_errors`` members in Error halt the rollout: no further wave starts, nobody is
  downgraded (L5), and the halt names the runtimes;
- a member whose upgrade waits for its maintenance window (L10) is not Ready yet: its wave
  waits for the window (``promote`` moves on without it);
- once every member of the wave under way is Ready (skipped ones aside), it must stay so for
  ``healthy_for``; then the next wave starts, or the rollout completes after the last.

A paused, halted, canceled or finished rollout does not move. The commands people give
(:class:`RolloutCommand`: :func:`pause`, :func:`resume`, :func:`cancel`, :func:`promote`, each
applying in the states :data:`NEEDS` names; :func:`commands_for` a state, :func:`run_command`
one of them) raise :class:`RolloutCommandError` when they do not apply, in a line that says
why. They are written here once for ``reconciler rollout`` (on the store, through the daemon's
port) and the status page's command lines.

Callers: the daemon's rollout job and its rollouts page, ``reconciler rollout`` (through the
daemon or on the store).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum

from reconciler.core.notifications import NotificationKind
from reconciler.core.redaction import mask
from reconciler.core.rollouts import HaltReason, Member, MemberState, Rollout, RolloutState
from reconciler.core.status import ModuleState
from reconciler.errors import PermanentError


class RolloutCommandError(PermanentError):
    """A rollout command that does not apply to the rollout as it is."""


@dataclass(frozen=True, slots=True)
class Health:
    """A member as the state store knows it: its state and the commit of its last record;
    ``deferred``: an upgrade of it waits for its maintenance window (L10), so it is not on
    the rollout's versions yet, whatever its state."""

    state: ModuleState
    commit: str
    deferred: bool = False


@dataclass(frozen=True, slots=True)
class Moment:
    """A moment of a rollout to tell people about: its kind, the wave (index), a summary."""

    kind: NotificationKind
    wave: int
    summary: str


def advance(
    rollout: Rollout, health: Mapping[str, Health], now: datetime
) -> tuple[Rollout, list[Moment]]:
    """``rollout`` after one look at its members' ``health`` at ``now`` (see the module)."""
    if rollout.state is not RolloutState.PROGRESSING:
        return rollout, []
    observed = _observe(rollout, health)
    failing = [m.runtime for m in observed.members if m.state is MemberState.ERROR]
    if len(failing) >= rollout.max_errors:
        return _halt(observed, failing, now)
    if not _wave_ready(observed):
        return _changed(rollout, replace(observed, healthy_since=None), now), []
    since = observed.healthy_since or now
    if now - since < rollout.healthy_for:
        return _changed(rollout, replace(observed, healthy_since=since), now), []
    return _next_wave(replace(observed, healthy_since=since), now, promoted=False)


def _observe(rollout: Rollout, health: Mapping[str, Health]) -> Rollout:
    members = tuple(_observed(m, health.get(m.runtime), rollout.commit) for m in rollout.members)
    return replace(rollout, members=members)


def _observed(member: Member, health: Health | None, commit: str) -> Member:
    if not member.state.released:
        return member
    if health is None or health.commit != commit or health.deferred:
        return replace(member, state=MemberState.PROGRESSING)
    if health.state is ModuleState.READY:
        return replace(member, state=MemberState.READY)
    if health.state is ModuleState.ERROR:
        return replace(member, state=MemberState.ERROR)
    return replace(member, state=MemberState.PROGRESSING)


def _wave_ready(rollout: Rollout) -> bool:
    wave = [m for m in rollout.in_wave(rollout.wave) if m.state is not MemberState.SKIPPED]
    return all(m.state is MemberState.READY for m in wave)


def _changed(before: Rollout, after: Rollout, now: datetime) -> Rollout:
    """``after``, stamped when it differs from ``before``; ``before`` itself when not."""
    if after == before:
        return before
    return replace(after, updated=now)


def _halt(rollout: Rollout, failing: list[str], now: datetime) -> tuple[Rollout, list[Moment]]:
    named = ", ".join(failing[:5]) + (f" and {len(failing) - 5} more" if len(failing) > 5 else "")
    message = (
        f"{len(failing)} runtime(s) in Error (threshold {rollout.max_errors}): {named}; "
        "no further runtime changes, upgraded ones stay; push a fixing commit or cancel"
    )
    halted = replace(
        rollout,
        state=RolloutState.HALTED,
        reason=HaltReason.ERRORS,
        message=message,
        updated=now,
    )
    summary = f"rollout {rollout.id} halted in wave {_wave_name(rollout)}: {message}"
    return halted, [Moment(NotificationKind.ROLLOUT_HALTED, rollout.wave, summary)]


def _wave_name(rollout: Rollout, index: int | None = None) -> str:
    return rollout.waves[rollout.wave if index is None else index].name


def _next_wave(rollout: Rollout, now: datetime, *, promoted: bool) -> tuple[Rollout, list[Moment]]:
    done = rollout.wave
    how = "promoted" if promoted else f"healthy for {rollout.healthy_for}"
    moments = [
        Moment(
            NotificationKind.WAVE_HEALTHY,
            done,
            f"rollout {rollout.id}: wave {_wave_name(rollout)} {how}",
        )
    ]
    following = done + 1
    if following >= len(rollout.waves):
        completed = replace(rollout, state=RolloutState.COMPLETED, healthy_since=None, updated=now)
        summary = f"rollout {rollout.id} of commit {rollout.shown} completed"
        return completed, [*moments, Moment(NotificationKind.ROLLOUT_COMPLETED, done, summary)]
    return release(replace(rollout, wave=following), now, moments)


def release(
    rollout: Rollout, now: datetime, moments: list[Moment] | None = None
) -> tuple[Rollout, list[Moment]]:
    """``rollout`` with its wave ``rollout.wave`` started: its members (skipped ones aside)
    take the rollout's commit."""
    members = tuple(
        replace(m, state=MemberState.PROGRESSING)
        if m.wave == rollout.wave and m.state is MemberState.PENDING
        else m
        for m in rollout.members
    )
    started = replace(rollout, members=members, wave_started=now, healthy_since=None, updated=now)
    count = len(started.in_wave(rollout.wave))
    summary = (
        f"rollout {rollout.id}: wave {_wave_name(rollout)} started "
        f"({count} runtime(s), wave {rollout.wave + 1} of {len(rollout.waves)})"
    )
    return started, [*(moments or []), Moment(NotificationKind.WAVE_STARTED, rollout.wave, summary)]


# -- commands --------------------------------------------------------------------------------------


class RolloutCommand(StrEnum):
    """What a person may ask of a rollout (``reconciler rollout``, ``POST /rollout``)."""

    PAUSE = "pause"
    RESUME = "resume"
    CANCEL = "cancel"
    PROMOTE = "promote"

    @property
    def keeps_reason(self) -> bool:
        """Whether the rollout keeps the reason given with the command (a cancel does)."""
        return self is RolloutCommand.CANCEL


#: The states each command applies to; in any other it raises :class:`RolloutCommandError`.
NEEDS: Mapping[RolloutCommand, tuple[RolloutState, ...]] = {
    RolloutCommand.PAUSE: (RolloutState.PROGRESSING,),
    RolloutCommand.RESUME: (RolloutState.PAUSED,),
    RolloutCommand.CANCEL: (RolloutState.PROGRESSING, RolloutState.PAUSED, RolloutState.HALTED),
    RolloutCommand.PROMOTE: (RolloutState.PROGRESSING, RolloutState.PAUSED),
}


#: The characters of a command's reason kept.
REASON_LENGTH = 500


def commands_for(state: RolloutState) -> tuple[RolloutCommand, ...]:
    """The commands that apply to a rollout in ``state`` (none once it ended)."""
    return tuple(command for command in RolloutCommand if state in NEEDS[command])


def command_reason(text: str) -> str:
    """A reason given with a command as it is sent and kept: one line of at most
    :data:`REASON_LENGTH` characters, a secret pasted into it masked (S4)."""
    return mask(" ".join(text.split())[:REASON_LENGTH])


def run_command(
    rollout: Rollout, command: RolloutCommand, now: datetime, why: str = ""
) -> tuple[Rollout, list[Moment]]:
    """``rollout`` after ``command`` at ``now``, and the moments it makes (a promote starts a
    wave); a cancel keeps ``why`` (:func:`command_reason`)."""
    if command is RolloutCommand.PROMOTE:
        return promote(rollout, now)
    if command is RolloutCommand.CANCEL:
        return cancel(rollout, now, command_reason(why)), []
    if command is RolloutCommand.PAUSE:
        return pause(rollout, now), []
    return resume(rollout, now), []


def pause(rollout: Rollout, now: datetime) -> Rollout:
    """Stop starting waves (the wave under way keeps its runtimes)."""
    _expect(rollout, RolloutCommand.PAUSE)
    return replace(rollout, state=RolloutState.PAUSED, healthy_since=None, updated=now)


def resume(rollout: Rollout, now: datetime) -> Rollout:
    """Go on where a paused rollout stopped (the wave's healthy time counts again)."""
    if rollout.state is RolloutState.HALTED:
        raise RolloutCommandError(
            f"rollout {rollout.id} is halted ({rollout.message}); a halted rollout does not "
            "resume: push a commit that fixes it (it starts a new rollout), or cancel it"
        )
    _expect(rollout, RolloutCommand.RESUME)
    return replace(rollout, state=RolloutState.PROGRESSING, healthy_since=None, updated=now)


def cancel(rollout: Rollout, now: datetime, why: str) -> Rollout:
    """Start no further wave, for good: runtimes already upgraded stay (L5); the others keep
    their previous commit until a newer commit's rollout reaches them. ``why`` is kept."""
    _expect(rollout, RolloutCommand.CANCEL)
    return replace(
        rollout,
        state=RolloutState.CANCELED,
        reason=HaltReason.CANCELED,
        message=why or "canceled",
        healthy_since=None,
        updated=now,
    )


def promote(rollout: Rollout, now: datetime) -> tuple[Rollout, list[Moment]]:
    """Start the next wave now, without waiting for the wave under way to stay healthy."""
    _expect(rollout, RolloutCommand.PROMOTE)
    return _next_wave(rollout, now, promoted=True)


def supersede(rollout: Rollout, by: str, now: datetime) -> Rollout:
    """``rollout`` taken over by the rollout of commit ``by`` (its held-back runtimes move)."""
    return replace(
        rollout,
        state=RolloutState.SUPERSEDED,
        reason=HaltReason.SUPERSEDED,
        message=f"superseded by the rollout of {by[:12]}",
        healthy_since=None,
        updated=now,
    )


def _expect(rollout: Rollout, command: RolloutCommand) -> None:
    states = NEEDS[command]
    if rollout.state not in states:
        allowed = " or ".join(str(s) for s in states)
        raise RolloutCommandError(
            f"cannot {command} rollout {rollout.id}: it is {rollout.state} (needs {allowed})"
        )
