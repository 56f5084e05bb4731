"""Rollouts as values, and their planning (pure).

A commit that changes what runtimes run (versions or configuration) reaches the fleet in
**waves** when the config repo's Settings carry a rollout policy (``spec.rollout``): each wave
is a label selector (``tier=dev``), a share of the runtimes the commit changes (``percent``),
or the rest. A :class:`Rollout` records, for that commit, every changed runtime's wave and
state, and the commit each one had before (``base``): a runtime whose wave has not started
keeps that commit's desired state (:func:`desired_head`).

:func:`plan_waves` assigns waves deterministically (labels first, then shares picked by a hash
of the runtime's name, so the same fleet gives the same waves on every replica and in
``diff --base``); :func:`start_rollout` makes the rollout of a commit, folding in the runtimes
an earlier rollout had not reached yet, by the policy :func:`governing_policy` picks (the
rollout's under way, else the commit in force's; never the commit's own alone). Advancing a
rollout and the commands on it are in :mod:`reconciler.core.rollout_steps`.

Callers: the daemon's rollout job, the state store (at its edge), ``reconciler rollout``,
``diff --base``.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from reconciler.core.head import Head
from reconciler.core.model import RolloutPolicy, Runtime, WavePolicy
from reconciler.core.selectors import parse_label_selector


class RolloutState(StrEnum):
    """Where a rollout is: part of the user's contract (``rollout list``, ``/status``)."""

    PROGRESSING = "Progressing"
    PAUSED = "Paused"
    HALTED = "Halted"
    COMPLETED = "Completed"
    CANCELED = "Canceled"
    #: A newer commit's rollout took over the runtimes it had not reached.
    SUPERSEDED = "Superseded"

    @property
    def gates(self) -> bool:
        """Whether runtimes of waves not started keep their previous commit."""
        return self in _GATING

    @property
    def finished(self) -> bool:
        """Whether nothing moves this rollout any more (but a new commit)."""
        return self not in (RolloutState.PROGRESSING, RolloutState.PAUSED)


_GATING = frozenset(
    {RolloutState.PROGRESSING, RolloutState.PAUSED, RolloutState.HALTED, RolloutState.CANCELED}
)


class MemberState(StrEnum):
    """A runtime in a rollout: waiting for its wave, or released and how it is doing."""

    #: Its wave has not started: it keeps its previous commit's desired state.
    PENDING = "Pending"
    #: Its wave started; not Ready (yet) on the rollout's commit.
    PROGRESSING = "Progressing"
    READY = "Ready"
    ERROR = "Error"
    #: Suspended (in git or by ``reconciler suspend``): not rolled out to, and reported.
    SKIPPED = "Skipped"

    @property
    def released(self) -> bool:
        """Whether the runtime takes the rollout's commit."""
        return self in (MemberState.PROGRESSING, MemberState.READY, MemberState.ERROR)


class HaltReason(StrEnum):
    """Why a rollout stopped (with a message naming the runtimes)."""

    ERRORS = "FailureThreshold"
    CANCELED = "Canceled"
    SUPERSEDED = "Superseded"


@dataclass(frozen=True, slots=True)
class Wave:
    """A planned wave: its name, what chose it and its runtimes (sorted)."""

    name: str
    chosen_by: str
    runtimes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Member:
    """A runtime of a rollout: its wave (an index), its state, the commit it had before
    (``base``, text form of a :class:`Head`) and a word on a skip or an error."""

    runtime: str
    wave: int
    state: MemberState
    base: str
    note: str = ""


@dataclass(frozen=True, slots=True)
class Rollout:
    """The rollout of one commit. ``wave`` is the index of the wave under way (or the last
    one, once completed); ``version`` counts its saves (the store writes a rollout only over
    the version it read)."""

    id: str
    commit: str
    created: datetime
    state: RolloutState
    waves: tuple[Wave, ...]
    members: tuple[Member, ...]
    healthy_for: timedelta
    max_errors: int
    wave: int = 0
    wave_started: datetime | None = None
    #: Since when every runtime of the wave under way is Ready (None: not all of them now).
    healthy_since: datetime | None = None
    reason: HaltReason | None = None
    message: str = ""
    updated: datetime | None = None
    version: int = 0
    _index: Mapping[str, Member] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {m.runtime: m for m in self.members})

    def member(self, runtime: str) -> Member | None:
        """``runtime``'s place in this rollout (None: the commit does not change it)."""
        return self._index.get(runtime)

    def in_wave(self, wave: int) -> list[Member]:
        """The members of wave ``wave``."""
        return [m for m in self.members if m.wave == wave]

    def counts(self) -> dict[str, int]:
        """Members by state, every state named."""
        found = {str(state): 0 for state in MemberState}
        for member in self.members:
            found[str(member.state)] += 1
        return found

    @property
    def progress(self) -> float:
        """The share of members (skipped ones aside) Ready on the rollout's commit."""
        counted = [m for m in self.members if m.state is not MemberState.SKIPPED]
        if not counted:
            return 1.0
        return sum(m.state is MemberState.READY for m in counted) / len(counted)

    @property
    def shown(self) -> str:
        """The commit, short, for messages."""
        head = Head.parse(self.commit)
        return head.shown if head is not None else self.commit


def rollout_id(commit: str) -> str:
    """The id of the rollout of ``commit`` (text form of a :class:`Head`): its config
    commit's first 12 characters, and its channels commit's first 8 when apart."""
    head = Head.parse(commit)
    if head is None:
        return ""
    return head.config[:12] + (f"-{head.channels[:8]}" if head.channels else "")


def desired_head(rollout: Rollout | None, runtime: str) -> str | None:
    """The commit (text form) ``runtime`` is to be reconciled on while ``rollout`` is the
    newest one: its own base while its wave has not started (or it is skipped), None (the
    commit in force) otherwise."""
    if rollout is None or not rollout.state.gates:
        return None
    member = rollout.member(runtime)
    if member is None:
        return None
    if member.state.released:
        return rollout.commit
    return member.base


def governing_policy(
    own: RolloutPolicy | None,
    in_force: RolloutPolicy | None,
    under_way: RolloutPolicy | None = None,
) -> RolloutPolicy | None:
    """The policy a commit is rolled out by, never its ``own`` alone (a commit does not set its
    own rollout): the waves of the rollout still under way (``under_way``: the policy the newest
    rollout was planned by, while it holds runtimes back: progressing, paused, halted or
    canceled), so that no change of ``spec.rollout`` skips its waves; else those of the policy
    ``in_force`` (the commit in force's ``spec.rollout``); else the commit's own (waves where
    there were none are only slower). The healthy time is the longest of the three, the failure
    threshold the lowest. None (every runtime at once) only when none of them has waves: a
    change of ``spec.rollout`` applies to the first rollout after its own commit that starts
    with none under way."""
    present = [p for p in (under_way, in_force, own) if p is not None]
    if not present:
        return None
    return RolloutPolicy(
        present[0].waves,
        healthy_for=max(p.healthy_for for p in present),
        max_errors=min(p.max_errors for p in present),
    )


def policy_of(rollout: Rollout) -> RolloutPolicy:
    """The policy ``rollout`` was planned by, as its waves tell it (a wave that took no
    runtime was not kept)."""
    return RolloutPolicy(
        tuple(_wave_policy(wave) for wave in rollout.waves),
        healthy_for=rollout.healthy_for,
        max_errors=rollout.max_errors,
    )


def _wave_policy(wave: Wave) -> WavePolicy:
    """The :class:`WavePolicy` whose :attr:`~WavePolicy.describe` is ``wave.chosen_by`` (a
    selector never reads ``10%`` or ``the rest``)."""
    chosen = wave.chosen_by
    if chosen == "the rest":
        return WavePolicy(wave.name)
    if chosen.endswith("%") and chosen[:-1].isdigit():
        return WavePolicy(wave.name, percent=int(chosen[:-1]))
    return WavePolicy(wave.name, selector=chosen)


def _spread(name: str) -> str:
    """A stable, well-mixed order of runtimes for the percentage waves."""
    return hashlib.sha256(name.encode()).hexdigest()


def plan_waves(policy: RolloutPolicy, runtimes: Sequence[Runtime]) -> list[Wave]:
    """The waves of ``runtimes`` (those a commit changes) by ``policy``: each wave takes,
    from the runtimes no earlier wave took, those matching its selector, or its percentage of
    all of them (at least one, in the order of a hash of their names), or all that are left;
    runtimes no wave took form a last wave ``rest``. Empty waves are left out."""
    left = sorted(runtimes, key=lambda r: _spread(r.name))
    total = len(left)
    waves: list[Wave] = []
    for wave in policy.waves:
        if wave.selector is not None:
            selector = parse_label_selector(wave.selector)
            taken = [r for r in left if selector.matches(r.labels)]
        elif wave.percent is not None:
            taken = left[: min(len(left), max(1, math.ceil(total * wave.percent / 100)))]
        else:
            taken = list(left)
        chosen = {r.name for r in taken}
        left = [r for r in left if r.name not in chosen]
        if taken:
            waves.append(Wave(wave.name, wave.describe, tuple(sorted(chosen))))
    if left:
        waves.append(Wave("rest", "the rest", tuple(sorted(r.name for r in left))))
    return waves


def start_rollout(
    policy: RolloutPolicy,
    commit: str,
    changed: Sequence[Runtime],
    bases: Mapping[str, str],
    suspended: frozenset[str],
    now: datetime,
) -> Rollout | None:
    """The rollout of ``commit`` over the ``changed`` runtimes, its first wave under way;
    each member's base from ``bases`` (the commit it has now). Suspended runtimes are
    skipped. None when no runtime changes."""
    waves = plan_waves(policy, changed)
    if not waves:
        return None
    members = []
    for index, wave in enumerate(waves):
        for name in wave.runtimes:
            if name in suspended:
                members.append(Member(name, index, MemberState.SKIPPED, bases[name], "suspended"))
            else:
                state = MemberState.PROGRESSING if index == 0 else MemberState.PENDING
                members.append(Member(name, index, state, bases[name]))
    return Rollout(
        id=rollout_id(commit),
        commit=commit,
        created=now,
        state=RolloutState.PROGRESSING,
        waves=tuple(waves),
        members=tuple(members),
        healthy_for=policy.healthy_for,
        max_errors=policy.max_errors,
        wave_started=now,
        updated=now,
    )


def bases_after(previous: Rollout | None, in_force: str, runtimes: Sequence[str]) -> dict[str, str]:
    """The commit each of ``runtimes`` has now: its base in ``previous`` (the newest rollout)
    while that rollout held it back, else the commit in force before."""
    bases = {}
    for name in runtimes:
        head = desired_head(previous, name)
        bases[name] = head if head is not None else in_force
    return bases


def held_back(rollout: Rollout | None) -> list[str]:
    """The runtimes ``rollout`` has not reached (pending or skipped while it gates): a newer
    commit's rollout takes them over."""
    if rollout is None or not rollout.state.gates:
        return []
    return [m.runtime for m in rollout.members if not m.state.released]
