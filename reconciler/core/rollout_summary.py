"""A rollout without its members (pure): what a list of rollouts shows.

A :class:`~reconciler.core.rollouts.Rollout` carries every runtime it changes (a thousand on a
large fleet); a list of rollouts (``GET /rollouts``, ``/status``, ``reconciler rollout list``,
the rollout metrics) shows each one's waves with their runtimes counted by state, its state,
progress and times, never a runtime's name. :class:`RolloutSummary` is that, made from a
rollout by :func:`summarize` or read from the state store without decoding any member (the
store keeps a rollout's summary beside its members). Both give the same counts and progress:
:mod:`reconciler.operations.rollouts` makes one document of either.

Callers: the state store (at its edge), :mod:`reconciler.operations.rollouts`, the daemon's
rollout metrics.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from reconciler.core.rollouts import HaltReason, MemberState, Rollout, RolloutState

#: The states of a released runtime (one that takes the rollout's commit).
_RELEASED = tuple(s.value for s in MemberState if s.released)


@dataclass(frozen=True, slots=True)
class WaveSummary:
    """A wave without its runtimes' names: how many it plans, and its members by state
    (every :class:`~reconciler.core.rollouts.MemberState` named, in its order)."""

    name: str
    chosen_by: str
    runtimes: int
    states: Mapping[str, int]

    @property
    def released(self) -> int:
        """How many of its members take the rollout's commit."""
        return sum(self.states[s] for s in _RELEASED)


@dataclass(frozen=True, slots=True)
class RolloutSummary:
    """A rollout as lists show it (see the module docstring); fields as
    :class:`~reconciler.core.rollouts.Rollout`'s."""

    id: str
    commit: str
    created: datetime
    state: RolloutState
    waves: tuple[WaveSummary, ...]
    healthy_for: timedelta
    max_errors: int
    wave: int = 0
    wave_started: datetime | None = None
    healthy_since: datetime | None = None
    reason: HaltReason | None = None
    message: str = ""
    updated: datetime | None = None
    version: int = 0

    def counts(self) -> dict[str, int]:
        """Members by state, every state named (as :meth:`Rollout.counts`)."""
        found = {str(state): 0 for state in MemberState}
        for wave in self.waves:
            for state, count in wave.states.items():
                found[state] += count
        return found

    @property
    def progress(self) -> float:
        """As :attr:`Rollout.progress`: the share of members (skipped ones aside) Ready."""
        counts = self.counts()
        counted = sum(counts.values()) - counts[MemberState.SKIPPED.value]
        if not counted:
            return 1.0
        return counts[MemberState.READY.value] / counted


def wave_states(counted: Mapping[str, int]) -> dict[str, int]:
    """Members by state, every state named in :class:`MemberState`'s order (``counted``
    may leave a state out: none of it)."""
    return {state.value: int(counted.get(state.value, 0)) for state in MemberState}


def summarize(rollout: Rollout) -> RolloutSummary:
    """``rollout`` without its members (one pass over them)."""
    tallies: list[dict[str, int]] = [wave_states({}) for _ in rollout.waves]
    for member in rollout.members:
        tallies[member.wave][member.state.value] += 1
    return RolloutSummary(
        id=rollout.id,
        commit=rollout.commit,
        created=rollout.created,
        state=rollout.state,
        waves=tuple(
            WaveSummary(wave.name, wave.chosen_by, len(wave.runtimes), tally)
            for wave, tally in zip(rollout.waves, tallies, strict=True)
        ),
        healthy_for=rollout.healthy_for,
        max_errors=rollout.max_errors,
        wave=rollout.wave,
        wave_started=rollout.wave_started,
        healthy_since=rollout.healthy_since,
        reason=rollout.reason,
        message=rollout.message,
        updated=rollout.updated,
        version=rollout.version,
    )
