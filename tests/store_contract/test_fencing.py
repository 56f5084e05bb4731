"""Fencing at the write: every write of a daemon replica's run carries a :class:`FenceToken`
(member, epoch) that the store checks in the statement that writes. Once another member fenced it
(its lease lapsed, its runtimes taken over), or it began a newer epoch, nothing it sends is written:
saves of an operation (by their changes or whole), claims and the runtime records; the error is
:class:`LostOwnershipError` and the database is left as it was.

Runs against SQLite always and PostgreSQL when RECONCILER_TEST_POSTGRES is set (see
conftest.py).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from reconciler.cluster.api import ClusterIdentity
from reconciler.core.reasons import Reason
from reconciler.core.status import ModuleState
from reconciler.errors import FencedError, LostOwnershipError
from reconciler.operations.model import (
    FenceToken,
    Operation,
    OperationState,
    RuntimeRecord,
    StepState,
)
from reconciler.operations.store import StateStore
from tests.support.store_backends import Backend
from tests.support.stored_operations import start_step, three_stage_operation

T0 = datetime(2026, 11, 18, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=30)


def _member(store: StateStore, name: str, at: datetime = T0) -> FenceToken:
    member = store.heartbeat(name, at, LEASE)
    return FenceToken(member.name, member.epoch)


def _fence(store: StateStore, name: str) -> None:
    """Another member finds ``name``'s lease lapsed and fences it."""
    member = next(m for m in store.members() if m.name == name)
    later = member.heartbeat + LEASE + timedelta(seconds=1)
    assert store.fence(name, member.epoch, later - LEASE)


def _record(runtime: str = "rt", message: str = "ok") -> RuntimeRecord:
    return RuntimeRecord(runtime, ModuleState.READY, Reason.INSTALL, message, None, T0)


def test_a_live_members_token_writes(backend: Backend) -> None:
    store = backend.open()
    token = _member(store, "a")
    operation = three_stage_operation()
    operation.owner = "a"

    store.save(operation, token)
    start_step(operation, 1, 0)
    store.save(operation, token)
    store.put_runtime(_record(), token)
    store.record_access("rt", ClusterIdentity.parse("snapshot x"), token)

    assert backend.open().get("op1") == operation
    assert (
        backend.open().runtime("rt") or _record(message="none")
    ).access == ClusterIdentity.parse("snapshot x")


def test_a_fenced_members_save_is_refused_in_the_statement(backend: Backend) -> None:
    """The member's own checks passed before a pause; the store refuses after the fence."""
    store, other = backend.open(), backend.open()
    token = _member(store, "a")
    operation = three_stage_operation()
    operation.owner = "a"
    store.save(operation, token)
    _member(other, "b", T0 + timedelta(minutes=1))
    _fence(other, "a")

    start_step(operation, 1, 0)
    with pytest.raises(LostOwnershipError, match="epoch 1 is no longer current") as refused:
        store.save(operation, token)
    with pytest.raises(LostOwnershipError):  # forgotten by then: the whole write is refused too
        store.save(operation, token)

    assert isinstance(refused.value, FencedError)  # the daemon's fenced handling applies
    stored = backend.open().get("op1")
    assert stored is not None
    assert stored.stages[1].steps[0].state is StepState.PENDING


def test_a_fenced_member_inserts_no_operation(backend: Backend) -> None:
    store = backend.open()
    token = _member(store, "a")
    _fence(store, "a")

    with pytest.raises(LostOwnershipError):
        store.save(three_stage_operation("op2"), token)

    assert backend.open().get("op2") is None


def test_a_fenced_members_claim_and_runtime_writes_are_refused(backend: Backend) -> None:
    store = backend.open()
    token = _member(store, "a")
    pending = three_stage_operation()
    pending.state, pending.owner = OperationState.PENDING, ""
    store.save(pending, token)
    store.put_runtime(_record(message="before"), token)
    _fence(store, "a")
    lease = T0 + timedelta(minutes=2)

    with pytest.raises(LostOwnershipError):
        store.claim("op1", "a", T0, lease, lambda _: True, token)
    with pytest.raises(LostOwnershipError):
        store.put_runtime(_record(message="after"), token)
    with pytest.raises(LostOwnershipError):
        store.record_access("rt", ClusterIdentity.parse("snapshot y"), token)
    with pytest.raises(LostOwnershipError):
        store.forget_runtime("rt", token)

    fresh = backend.open()
    assert (fresh.get("op1") or pending).state is OperationState.PENDING
    record = fresh.runtime("rt")
    assert record is not None
    assert (record.message, record.access.describe()) == ("before", "")


def test_a_token_of_an_older_epoch_is_refused_after_the_member_came_back(
    backend: Backend,
) -> None:
    """Fenced, the member beats again in a new epoch: the reconcile of the old one still
    running in it writes nothing, the new one writes."""
    store = backend.open()
    old = _member(store, "a")
    _fence(store, "a")
    new = _member(store, "a", T0 + timedelta(seconds=2))  # within the lease, but fenced
    assert new.epoch == old.epoch + 1
    operation = three_stage_operation()
    operation.owner = "a"

    with pytest.raises(LostOwnershipError):
        store.save(operation, old)
    store.save(operation, new)

    assert backend.open().get("op1") == operation


def test_only_a_lapsed_member_is_fenced_and_once(backend: Backend) -> None:
    store = backend.open()
    _member(store, "a")

    assert not store.fence("a", 1, T0)  # its heartbeat is not older than that
    assert not store.fence("a", 2, T0 + timedelta(hours=1))  # not its epoch
    assert store.fence("a", 1, T0 + timedelta(seconds=1))
    assert not store.fence("a", 1, T0 + timedelta(seconds=1))
    assert [m.fenced for m in store.members()] == [True]


def test_writes_without_a_token_are_guarded_by_owner_and_version_alone(
    backend: Backend,
) -> None:
    """``reconciler sync`` is no member: its saves carry no token, and fenced members elsewhere
    change nothing for it."""
    store = backend.open()
    _member(store, "a")
    _fence(store, "a")
    operation: Operation = three_stage_operation()

    store.save(operation)
    start_step(operation, 1, 0)
    store.save(operation)
    store.put_runtime(_record())
    store.forget_runtime("rt")
    store.forget_runtime("rt")  # nothing to forget: no error

    assert backend.open().get("op1") == operation
    assert backend.open().runtime("rt") is None


def test_a_store_of_schema_6_gains_the_fence_column(backend: Backend) -> None:
    backend.create_at_version(6)
    backend.execute(
        "INSERT INTO members (name, epoch, heartbeat, started) "
        "VALUES ('a', 3, '2026-11-18T12:00:00+00:00', '2026-11-18T12:00:00+00:00')"
    )
    store = backend.open()

    assert [(m.name, m.epoch, m.fenced) for m in store.members()] == [("a", 3, False)]
    token = FenceToken("a", 3)
    store.put_runtime(_record(), token)
    assert store.fence("a", 3, T0 + timedelta(seconds=1))
    with pytest.raises(LostOwnershipError):
        store.put_runtime(_record(message="after"), token)
