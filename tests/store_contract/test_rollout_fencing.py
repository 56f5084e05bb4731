"""Rollout writes fenced by the writer's lease token, on SQLite and PostgreSQL alike: a daemon
replica's save of a rollout (a new one, or one moved on) carries its :class:`FenceToken`, and
once another member fenced it (its lease lapsed) the store refuses the save in the statement
that writes, even when its compare-and-set on the version would match: a typed
:class:`LostOwnershipError`, nothing written. A person's command carries no token: it is
guarded by the version alone (docs/runtime-operations.md says why).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from reconciler.core.model import ClusterAccess, RolloutPolicy, Runtime, WavePolicy
from reconciler.core.rollout_steps import pause, promote
from reconciler.core.rollouts import Rollout, RolloutState, start_rollout
from reconciler.errors import FencedError, LostOwnershipError
from reconciler.operations.model import FenceToken
from reconciler.operations.store import StateStore
from tests.store_contract.conftest import Backend

T0 = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=30)
POLICY = RolloutPolicy(
    (WavePolicy("canary", selector="tier=dev"), WavePolicy("rest")),
    healthy_for=timedelta(minutes=30),
    max_errors=2,
)


def _rollout(commit: str = "a" * 40) -> Rollout:
    runtimes = [
        Runtime(f"rt-{i}", "regular", ClusterAccess(context="x"), labels={"tier": "dev"})
        if i < 2
        else Runtime(f"rt-{i}", "regular", ClusterAccess(context="x"))
        for i in range(6)
    ]
    made = start_rollout(
        POLICY, commit, runtimes, {r.name: "c" * 40 for r in runtimes}, frozenset(), T0
    )
    assert made is not None
    return made


def _member(store: StateStore, name: str, at: datetime = T0) -> FenceToken:
    member = store.heartbeat(name, at, LEASE)
    return FenceToken(member.name, member.epoch)


def _fence(store: StateStore, name: str) -> None:
    """Another member finds ``name``'s lease lapsed and fences it."""
    member = next(m for m in store.members() if m.name == name)
    assert store.fence(name, member.epoch, member.heartbeat + timedelta(seconds=1))


def test_a_live_members_token_saves_and_moves_a_rollout(backend: Backend) -> None:
    store = backend.open()
    token = _member(store, "a")

    saved = store.put_rollout(_rollout(), token)
    assert saved is not None
    moved = store.put_rollout(pause(saved, T0 + timedelta(minutes=1)), token)

    assert moved is not None
    assert backend.open().latest_rollout() == moved


def test_a_fenced_members_move_is_refused_though_its_version_matches(backend: Backend) -> None:
    """The replica read the rollout, paused past its lease, and was fenced; nobody wrote the
    rollout since, so its compare-and-set alone would let the stale move through."""
    store, other = backend.open(), backend.open()
    token = _member(store, "a")
    saved = store.put_rollout(_rollout(), token)
    assert saved is not None
    _member(other, "b", T0 + timedelta(minutes=1))
    _fence(other, "a")

    promoted, _ = promote(saved, T0 + timedelta(minutes=2))
    with pytest.raises(LostOwnershipError, match="epoch 1 is no longer current") as refused:
        store.put_rollout(promoted, token)

    assert isinstance(refused.value, FencedError)  # transient: the daemon's fenced handling
    assert f"rollout {saved.id} not saved" in str(refused.value)
    stored = backend.open().rollout(saved.id)
    assert stored == saved  # nothing written: version 1, wave 0
    assert other.put_rollout(promoted, _member(other, "b", T0 + timedelta(minutes=2)))


def test_a_fenced_member_starts_no_rollout(backend: Backend) -> None:
    store = backend.open()
    token = _member(store, "a")
    _fence(store, "a")

    with pytest.raises(LostOwnershipError):
        store.put_rollout(_rollout(), token)

    assert backend.open().rollouts() == []


def test_a_token_of_an_older_epoch_is_refused_and_the_new_one_writes(backend: Backend) -> None:
    store = backend.open()
    old = _member(store, "a")
    saved = store.put_rollout(_rollout(), old)
    assert saved is not None
    _fence(store, "a")
    new = _member(store, "a", T0 + timedelta(seconds=2))
    assert new.epoch == old.epoch + 1

    with pytest.raises(LostOwnershipError):
        store.put_rollout(pause(saved, T0), old)
    paused = store.put_rollout(pause(saved, T0), new)

    assert paused is not None
    assert paused.state is RolloutState.PAUSED


def test_a_lost_compare_and_set_under_a_live_token_is_no_refusal(backend: Backend) -> None:
    """Another writer came first: ``None`` (read it again), not a fencing error."""
    first, second = backend.open(), backend.open()
    token = _member(first, "a")
    saved = first.put_rollout(_rollout(), token)
    assert saved is not None
    assert first.put_rollout(pause(saved, T0), token) is not None

    assert second.put_rollout(promote(saved, T0)[0], token) is None
    assert second.put_rollout(_rollout(), token) is None  # one rollout per commit


def test_a_persons_command_carries_no_token_and_is_guarded_by_the_version(
    backend: Backend,
) -> None:
    """``reconciler rollout pause`` is no member: a fenced replica elsewhere changes nothing
    for it, and it never writes over a version it did not read."""
    store = backend.open()
    token = _member(store, "a")
    saved = store.put_rollout(_rollout(), token)
    assert saved is not None
    _fence(store, "a")

    paused = store.put_rollout(pause(saved, T0))
    assert paused is not None
    assert store.put_rollout(promote(saved, T0)[0]) is None  # it read version 1
    assert backend.open().rollout(saved.id) == paused
