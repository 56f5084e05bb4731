"""Rollouts in the state store, on SQLite and PostgreSQL alike: saved with each runtime's wave,
state and base; one per commit; read back by another connection (a restart, another replica);
written only over the version read (of two writers, one wins); listed as summaries that decode
no member and document as the whole rollouts do, byte for byte (also of a row an older version
saved without its summary)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from reconciler.core.model import ClusterAccess, RolloutPolicy, Runtime, WavePolicy
from reconciler.core.rollout_steps import pause, promote
from reconciler.core.rollout_summary import summarize
from reconciler.core.rollouts import MemberState, Rollout, RolloutState, start_rollout
from reconciler.operations.rollouts import rollout_document
from reconciler.operations.store.rollouts import encode_rollout
from tests.support.store_backends import Backend

T0 = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
POLICY = RolloutPolicy(
    (WavePolicy("canary", selector="tier=dev"), WavePolicy("early", percent=10)),
    healthy_for=timedelta(minutes=30),
    max_errors=2,
)
COMMIT = "a" * 40 + "+" + "b" * 40


def _rollout(commit: str = COMMIT, count: int = 120) -> Rollout:
    runtimes = [
        Runtime(f"rt-{i:03d}", "regular", ClusterAccess(context="x"), labels={"tier": "dev"})
        if i < 3
        else Runtime(f"rt-{i:03d}", "regular", ClusterAccess(context="x"))
        for i in range(count)
    ]
    bases = {r.name: "c" * 40 for r in runtimes}
    made = start_rollout(POLICY, commit, runtimes, bases, frozenset({"rt-010"}), T0)
    assert made is not None
    return made


def test_a_rollout_is_kept_with_every_runtimes_wave_and_state(backend: Backend) -> None:
    rollout = _rollout()
    saved = backend.open().put_rollout(rollout)
    assert saved is not None
    assert saved.version == 1

    again = backend.open()  # another connection: a restart, or another replica
    loaded = again.rollout(rollout.id[:6])
    assert loaded == saved
    assert loaded.id == "aaaaaaaaaaaa-bbbbbbbb"
    member = loaded.member("rt-010")
    assert member is not None
    assert member.state is MemberState.SKIPPED
    assert [len(w.runtimes) for w in loaded.waves] == [3, 12, 105]
    assert again.latest_rollout() == saved


def test_one_rollout_per_commit(backend: Backend) -> None:
    store = backend.open()
    assert store.put_rollout(_rollout()) is not None
    assert store.put_rollout(_rollout()) is None  # another replica started the same one
    assert len(store.rollouts()) == 1


def test_a_rollout_is_written_only_over_the_version_read(backend: Backend) -> None:
    first, second = backend.open(), backend.open()
    saved = first.put_rollout(_rollout())
    assert saved is not None
    read = second.rollout(saved.id)
    assert read is not None
    paused = first.put_rollout(pause(saved, T0 + timedelta(minutes=1)))
    assert paused is not None
    promoted, _ = promote(read, T0 + timedelta(minutes=2))
    assert second.put_rollout(promoted) is None  # it read version 1; version 2 is there
    current = second.rollout(saved.id)
    assert current is not None
    assert current.state is RolloutState.PAUSED
    assert current.wave == 0
    assert current.version == 2


def test_the_newest_rollout_is_the_latest_and_lists_come_newest_first(backend: Backend) -> None:
    store = backend.open()
    older = store.put_rollout(_rollout())
    newer = store.put_rollout(replace(_rollout("d" * 40), created=T0 - timedelta(days=1)))
    assert older is not None
    assert newer is not None
    assert store.latest_rollout() == newer  # insertion order, whatever the clocks said
    assert [r.id for r in store.rollouts()] == [newer.id, older.id]
    assert store.rollout("nothing") is None


def _moved_on(rollout: Rollout) -> Rollout:
    """``rollout`` in its second wave, its runtimes in every state."""
    states = list(MemberState)
    members = tuple(
        replace(m, state=states[i % len(states)], note="why" if i % 7 == 0 else m.note)
        for i, m in enumerate(rollout.members)
    )
    later = T0 + timedelta(minutes=5)
    return replace(rollout, members=members, wave=1, wave_started=later, healthy_since=later)


def test_a_list_reads_summaries_documented_as_the_whole_rollouts(backend: Backend) -> None:
    store = backend.open()
    skipped = _rollout("e" * 40, count=3)  # one wave of runtimes, all skipped: progress 1
    skipped = replace(
        skipped, members=tuple(replace(m, state=MemberState.SKIPPED) for m in skipped.members)
    )
    for made in (_rollout(), _moved_on(_rollout("d" * 40)), skipped):
        assert store.put_rollout(made) is not None
    superseded = store.put_rollout(replace(_rollout("f" * 40), state=RolloutState.SUPERSEDED))
    assert superseded is not None

    summaries = backend.open().rollout_summaries()
    whole = store.rollouts()

    assert summaries == [summarize(r) for r in whole]
    assert [json.dumps(rollout_document(s)) for s in summaries] == [
        json.dumps(rollout_document(r)) for r in whole
    ]
    assert len(store.rollout_summaries(limit=2)) == 2


def test_a_list_decodes_no_member(backend: Backend) -> None:
    """The members' JSON is not even read: spoilt, the list still reads, the rollout not."""
    store = backend.open()
    saved = store.put_rollout(_moved_on(_rollout()))
    assert saved is not None
    data = json.loads(encode_rollout(saved))
    data["members"] = "not members"
    backend.execute(f"UPDATE rollouts SET data = '{json.dumps(data)}'")

    assert backend.open().rollout_summaries() == [summarize(saved)]
    with pytest.raises(ValueError, match="unpack"):
        store.rollouts()


def test_a_rollout_saved_before_summaries_were_kept_is_listed(backend: Backend) -> None:
    store = backend.open()
    saved = store.put_rollout(_moved_on(_rollout()))
    assert saved is not None
    data = json.loads(encode_rollout(saved))
    del data["summary"]  # as an older reconciler wrote it
    backend.execute(f"UPDATE rollouts SET data = '{json.dumps(data)}'")

    assert backend.open().rollout_summaries() == [summarize(saved)]
