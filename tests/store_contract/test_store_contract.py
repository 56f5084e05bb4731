"""What every state store must do the same way (StateStore, DESIGN.md O2, O3, O6).

Runs against SQLite always and against a real PostgreSQL server when RECONCILER_TEST_POSTGRES is
set (see conftest.py). Times are fixed values, never the wall clock; races are proven from what
the store recorded, not from how long anything took.
"""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.cluster.api import ClusterIdentity
from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.brake import Limits
from reconciler.core.head import Head
from reconciler.core.model import ClusterAccess, ModuleRef
from reconciler.core.objects import ObjectRef
from reconciler.core.plan_values import ModuleAction, PlannedModule
from reconciler.core.reasons import Reason
from reconciler.core.status import (
    ChangeAction,
    ChangeSetEntry,
    ModuleError,
    ModuleState,
    ModuleStatus,
    PassResult,
)
from reconciler.core.templates import Capabilities
from reconciler.errors import NotFoundError, SourceError, ThrottledError
from reconciler.operations.engine import Engine
from reconciler.operations.model import (
    NO_CHANGE,
    CommitRecord,
    CommitVerdict,
    Operation,
    OperationData,
    OperationState,
    OperationType,
    Retention,
    RuntimeRecord,
    StageRecord,
    StepRecord,
    StepState,
    Suspension,
)
from reconciler.operations.runner import Runner
from reconciler.operations.store import ALLOWED_DELETIONS, SCHEMA_VERSION, StateStore
from tests.support.lifecycle_helpers import NAMESPACE, repo
from tests.support.store_backends import Backend

T0 = datetime(2026, 11, 18, 12, 0, tzinfo=UTC)
SAMPLE = Path(__file__).parent.parent.parent / "sample-repo"


class Clock:
    """A clock tests move by hand."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def _operation(
    operation_id: str,
    runtime: str = "rt",
    created: datetime = T0,
    state: OperationState = OperationState.PENDING,
) -> Operation:
    return Operation(
        id=operation_id,
        runtime=runtime,
        type=OperationType.UPDATE,
        state=state,
        created=created,
        deadline=created + timedelta(hours=3),
        stages=[StageRecord("plan", [StepRecord("Plan_Changes")])],
    )


def _full_operation() -> Operation:
    """Every field set, times with microseconds and in other zones, nested JSON data."""
    berlin = timezone(timedelta(hours=1))
    return Operation(
        id="3f2a91c0d7e4",
        runtime="prod-eu-1",
        type=OperationType.DEPROVISION,
        state=OperationState.IN_PROGRESS,
        created=T0,
        deadline=T0 + timedelta(days=1),
        stages=[
            StageRecord(
                "plan",
                [StepRecord("Resolve_Kubeconfig", StepState.DONE, 1, T0, T0, T0, None, "ok")],
                done=True,
                finished=T0 + timedelta(seconds=1, microseconds=250),
            ),
            StageRecord(
                "remove",
                [
                    StepRecord(
                        "Remove_Modules",
                        StepState.RETRYING,
                        attempts=3,
                        first_started=datetime(2026, 11, 18, 13, 0, 2, 123456, tzinfo=berlin),
                        started=T0 + timedelta(minutes=5),
                        retry_at=T0 + timedelta(minutes=6),
                        message="deletion of serverless waits for Serverless/kyma-system/mine ✓",
                    ),
                    StepRecord("Delete_Inventory"),
                ],
            ),
        ],
        commit=Head("a" * 40, "b" * 40),
        message="waiting in remove/Remove_Modules",
        updated=T0 + timedelta(minutes=5),
        owner="host-a:4242",
        lease_until=T0 + timedelta(minutes=7),
        retrigger_of="0badc0ffee00",
        data=_full_data(),
    )


def _full_data() -> OperationData:
    """Every kind of value an operation carries, with text that is not ASCII."""
    failed = ModuleStatus(
        "serverless",
        ModuleState.ERROR,
        Reason.RETRYING,
        "throttled ✓",
        "1.2.0",
        ModuleError(ThrottledError, "too many requests", 42.0),
    )
    change = ChangeSetEntry(
        "serverless", ObjectRef("v1", "ConfigMap", "kyma-system", "é"), ChangeAction.PRUNED
    )
    return OperationData(
        access=ClusterAccess(kubeconfig_secret="rt-kubeconfig"),
        plan=(PlannedModule("serverless", ModuleAction.UPGRADE, Reason.UPGRADE, "1.1.0", "1.2.0"),),
        applied=PassResult((failed,), (change,)),
        removals=PassResult((ModuleStatus("istio", None, Reason.REMOVED, "gone", "1.0.0"),)),
        blocking="Serverless/kyma-system/mine ü",
        inventories_left=("istio",),
    )


# -- schema --------------------------------------------------------------------------------------


def test_a_new_store_has_the_current_schema_and_reopens(backend: Backend) -> None:
    first = backend.open()
    first.save(_operation("op1"))
    assert first.schema_version() == SCHEMA_VERSION  # type: ignore[attr-defined]

    again = backend.open()

    assert again.schema_version() == SCHEMA_VERSION  # type: ignore[attr-defined]
    assert again.get("op1") == _operation("op1")


def test_a_store_of_an_older_version_is_migrated_keeping_its_records(backend: Backend) -> None:
    backend.create_at_version(1)
    backend.execute(
        "INSERT INTO runtimes (runtime, state, reason, message, commit_id, updated, modules) "
        "VALUES ('rt', 'Ready', 'Ready', 'all ready', 'c1', '2026-11-18T12:00:00+00:00', "
        '\'[{"module": "widget", "state": "Ready", "version": "1.0.0"}]\');'
        "INSERT INTO operations (id, runtime, type, state, created, deadline) "
        "VALUES ('old1', 'rt', 'update', 'succeeded', '2026-11-18T11:00:00+00:00', "
        "'2026-11-18T14:00:00+00:00')"
    )

    store = backend.open()

    assert store.schema_version() == SCHEMA_VERSION  # type: ignore[attr-defined]
    record = store.runtime("rt")
    assert record is not None
    assert (record.access.describe(), record.deployed()) == ("", {"widget": "1.0.0"})
    old = store.get("old1")
    assert old is not None
    assert (old.state, old.created) == (OperationState.SUCCEEDED, T0 - timedelta(hours=1))
    store.record_access(
        "rt", ClusterIdentity.parse("snapshot /srv/clusters")
    )  # version 2: runtimes.access
    store.accept_commit(CommitRecord(Head("c2"), CommitVerdict.ACCEPTED, T0), None)  # version 2
    assert store.runtime("rt") == replace(
        record, access=ClusterIdentity.parse("snapshot /srv/clusters")
    )
    assert store.last_accepted() == CommitRecord(Head("c2"), CommitVerdict.ACCEPTED, T0)
    assert store.limits_in_force() is None  # version 6: brake_limits, empty


def test_a_store_of_a_newer_version_is_refused_in_one_line(backend: Backend) -> None:
    backend.open()
    backend.execute(f"INSERT INTO schema_version (version) VALUES ({SCHEMA_VERSION + 1})")

    with pytest.raises(SourceError) as caught:
        backend.open()

    message = str(caught.value)
    assert f"schema version {SCHEMA_VERSION + 1}, newer than this reconciler" in message
    assert message.endswith("upgrade reconciler")
    assert "\n" not in message


# -- operations ----------------------------------------------------------------------------------


def test_an_operation_round_trips_with_every_field(backend: Backend) -> None:
    store = backend.open()
    operation = _full_operation()

    store.save(operation)

    for key in (operation.id, "3f2a", "3F2A"):  # a unique prefix, in either case, is enough
        loaded = backend.open().get(key)
        assert loaded == operation, key
    assert loaded is not None
    assert loaded.created.tzinfo == UTC
    assert loaded.stages[1].steps[0].first_started == datetime(2026, 11, 18, 12, 0, 2, 123456, UTC)


def test_saving_again_replaces_the_stages_and_steps(backend: Backend) -> None:
    store = backend.open()
    operation = _full_operation()
    store.save(operation)

    operation.stages = [StageRecord("finish", [StepRecord("Remove_Runtime_Record")])]
    operation.state, operation.data = OperationState.FAILED, OperationData()
    store.save(operation)

    assert backend.open().get(operation.id) == operation
    assert len(store.operations()) == 1


def test_each_save_keeps_the_data_of_that_moment(backend: Backend) -> None:
    """The JSON of an operation's data is kept between saves while the data object is the same
    (the engine saves after every step); a step that replaces it is saved with the new data."""
    store = backend.open()
    operation = _full_operation()
    store.save(operation)
    store.save(operation)

    operation.data = replace(operation.data, blocking="something else", inventories_left=())
    store.save(operation)

    loaded = backend.open().get(operation.id)
    assert loaded is not None
    assert (loaded.state, loaded.data) == (operation.state, operation.data)


def test_an_unknown_or_ambiguous_prefix_finds_nothing(backend: Backend) -> None:
    store = backend.open()
    store.save(_operation("abc1"))
    store.save(_operation("abc2"))

    assert store.get("abc") is None
    assert store.get("zzz") is None
    assert store.get("abc2") == _operation("abc2")


def test_a_prefix_is_text_not_a_pattern(backend: Backend) -> None:
    """``operations show`` takes a prefix: % and _ are characters there, not SQL wildcards;
    case does not count (ids are lower-case hex)."""
    store = backend.open()
    store.save(_operation("c0ffee"))

    assert store.get("%") is None
    assert store.get("c_ff") is None
    assert store.get("C0FF") == _operation("c0ffee")
    assert store.get("c0ff") == _operation("c0ffee")


def test_operations_are_listed_newest_first_then_last_saved_first(backend: Backend) -> None:
    store = backend.open()
    for name, runtime, minutes in [
        ("a", "rt", 0),
        ("b", "rt", 5),
        ("c", "other", 5),
        ("d", "rt", 1),
    ]:
        store.save(_operation(name, runtime, T0 + timedelta(minutes=minutes)))

    assert [o.id for o in store.operations()] == ["c", "b", "d", "a"]
    assert [o.id for o in store.operations(runtime="rt")] == ["b", "d", "a"]
    assert [o.id for o in store.operations(runtime="rt", limit=2)] == ["b", "d"]
    assert store.operations(runtime="nobody") == []


def test_unfinished_is_the_oldest_pending_or_in_progress(backend: Backend) -> None:
    store = backend.open()
    assert store.unfinished("rt") is None
    store.save(_operation("done", created=T0, state=OperationState.SUCCEEDED))
    store.save(_operation("late", created=T0 + timedelta(minutes=2)))
    store.save(_operation("early", created=T0 + timedelta(minutes=1)))

    found = store.unfinished("rt")

    assert found is not None
    assert found.id == "early"
    assert store.unfinished("other") is None


def test_unfinished_all_is_the_unfinished_of_each_runtime_in_one_read(backend: Backend) -> None:
    store = backend.open()
    assert store.unfinished_all() == {}
    store.save(_operation("done", created=T0, state=OperationState.SUCCEEDED))
    store.save(_operation("late", created=T0 + timedelta(minutes=2)))
    store.save(_operation("early", created=T0 + timedelta(minutes=1)))
    store.save(_operation("other", "rt-2", T0 + timedelta(minutes=3), OperationState.IN_PROGRESS))

    found = store.unfinished_all()

    assert {runtime: o.id for runtime, o in found.items()} == {"rt": "early", "rt-2": "other"}
    assert found["rt"].stages[0].steps[0].name == "Plan_Changes"


# -- claims (O3) ---------------------------------------------------------------------------------


def _claim(store: StateStore, operation_id: str, owner: str, alive: bool = True) -> str | None:
    return store.claim(operation_id, owner, T0, T0 + timedelta(minutes=2), lambda _: alive)


def test_a_claim_moves_the_operation_to_in_progress_for_its_owner(backend: Backend) -> None:
    store = backend.open()
    store.save(_operation("op1"))

    assert _claim(store, "op1", "host-a:1") is None

    claimed = backend.open().get("op1")
    assert claimed is not None
    assert (claimed.state, claimed.owner) == (OperationState.IN_PROGRESS, "host-a:1")
    assert (claimed.lease_until, claimed.updated) == (T0 + timedelta(minutes=2), T0)
    assert _claim(store, "op1", "host-a:1") is None  # its own owner claims it again


def test_a_live_owner_with_a_lease_blocks_every_other_claim(backend: Backend) -> None:
    store = backend.open()
    store.save(_operation("op1"))
    store.save(_operation("op2", created=T0 + timedelta(seconds=1)))
    store.save(_operation("elsewhere", runtime="other"))
    assert _claim(store, "op1", "host-a:1") is None

    assert _claim(store, "op2", "host-b:2") == "operation op1 of host-a:1"
    assert _claim(store, "op1", "host-b:2") == "operation op1 of host-a:1"
    assert _claim(store, "elsewhere", "host-b:2") is None  # another runtime is free
    assert backend.open().get("op2") == _operation("op2", created=T0 + timedelta(seconds=1))


def test_an_operation_of_a_dead_owner_or_a_lapsed_lease_is_taken_over(backend: Backend) -> None:
    store = backend.open()
    store.save(_operation("op1"))
    assert _claim(store, "op1", "host-a:1") is None

    assert _claim(store, "op1", "host-b:2", alive=False) is None  # host-a:1 is dead
    taken = store.get("op1")
    assert taken is not None
    assert taken.owner == "host-b:2"
    later = T0 + timedelta(minutes=3)  # host-b:2's lease ended at T0 + 2 minutes
    assert store.claim("op1", "host-c:3", later, later, lambda _: True) is None
    assert _claim(store, "op1", "host-d:4") == "operation op1 of host-c:3"


def test_a_claim_of_an_unknown_operation_says_so(backend: Backend) -> None:
    with pytest.raises(NotFoundError, match="no operation gone in the state store"):
        _claim(backend.open(), "gone", "host-a:1")


def test_racing_claims_on_two_connections_let_exactly_one_win(backend: Backend) -> None:
    """Two connections (two threads) claim different pending operations of the same runtime at
    once, round after round; the record must show one winner per runtime, the loser told who."""
    rounds = 25
    setup = backend.open()
    for n in range(rounds):
        for side in ("a", "b"):
            setup.save(_operation(f"{side}{n}", runtime=f"rt{n}"))
    stores = {"a": backend.open(), "b": backend.open()}
    answers: dict[tuple[str, int], str | None] = {}
    barrier = threading.Barrier(2, timeout=60)

    def race(side: str) -> None:
        for n in range(rounds):
            barrier.wait()
            answers[(side, n)] = _claim(stores[side], f"{side}{n}", f"owner-{side}")

    threads = [threading.Thread(target=race, args=(side,)) for side in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    for n in range(rounds):
        records = backend.open().operations(runtime=f"rt{n}")
        running = [o for o in records if o.state is OperationState.IN_PROGRESS]
        assert len(running) == 1, (n, [(o.id, o.state, o.owner) for o in records])
        (winner,) = running
        side = winner.id[0]
        loser = "b" if side == "a" else "a"
        assert winner.owner == f"owner-{side}"
        assert answers[(side, n)] is None
        assert answers[(loser, n)] == f"operation {winner.id} of owner-{side}"


# -- runtimes and commits ------------------------------------------------------------------------


def _runtime(name: str, access: str = "", state: str = "Ready") -> RuntimeRecord:
    error = ModuleError(ThrottledError, "slow down", 3.0) if state == "Error" else None
    modules = (ModuleStatus("widget", ModuleState(state), Reason.READY, "", "1.0.0", error),)
    return RuntimeRecord(
        name,
        ModuleState(state),
        Reason.READY,
        "all ready",
        Head("c1"),
        T0,
        modules,
        ClusterIdentity.parse(access),
    )


def test_deployed_modules_are_read_as_the_records_say(backend: Backend) -> None:
    """What the deletion brake counts from: the modules each record says the runtime runs
    (not the ones gone, nor the ones left unmanaged), with their versions."""
    store = backend.open()
    modules = (
        ModuleStatus("widget", ModuleState.READY, Reason.READY, "", "1.0.0"),
        ModuleStatus("gadget", ModuleState.ERROR, Reason.RETRYING, "", None),
        ModuleStatus("mesh", ModuleState.UNMANAGED, Reason.STRATEGY_IGNORE, "", "2.0.0"),
        ModuleStatus("istio", None, Reason.REMOVED, "gone", "1.0.0"),
    )
    store.put_runtime(replace(_runtime("beta"), modules=modules))
    store.put_runtime(_runtime("alpha", state="Error"))

    deployed = backend.open().deployed()

    assert deployed == {r.runtime: r.deployed() for r in store.runtimes()}
    assert deployed["beta"] == {"widget": "1.0.0", "gadget": ""}


def test_runtime_records_round_trip_and_keep_where_they_were_synced(backend: Backend) -> None:
    store = backend.open()
    store.put_runtime(_runtime("zeta", access="server https://z"))
    store.put_runtime(_runtime("alpha"))

    assert store.runtimes() == [_runtime("alpha"), _runtime("zeta", access="server https://z")]
    store.record_access("alpha", ClusterIdentity.parse("snapshot /srv/alpha"))
    store.put_runtime(_runtime("alpha", state="Error"))  # no access given: the known one stays
    assert backend.open().runtime("alpha") == _runtime("alpha", "snapshot /srv/alpha", "Error")
    store.put_runtime(_runtime("alpha", access="server https://a"))
    assert store.runtime("alpha") == _runtime("alpha", access="server https://a")
    store.record_access(
        "nobody", ClusterIdentity.parse("server https://n")
    )  # not known: nothing recorded
    assert store.runtime("nobody") is None

    store.forget_runtime("zeta")

    assert [r.runtime for r in backend.open().runtimes()] == ["alpha"]
    assert backend.open().runtime_names() == ["alpha"]


def test_commit_verdicts_round_trip_and_the_last_accepted_is_in_force(backend: Backend) -> None:
    store = backend.open()
    assert store.last_accepted() is None
    held = CommitRecord(
        Head("c3"), CommitVerdict.HELD, T0 + timedelta(minutes=3), "brake", {"n": 7}
    )
    first = CommitRecord(Head("c1", "d1"), CommitVerdict.ACCEPTED, T0, "ok", {"runtimes": ["a"]}, 1)
    second = CommitRecord(Head("c2"), CommitVerdict.ACCEPTED, T0 + timedelta(minutes=2))
    assert store.accept_commit(first, None) == first
    assert store.accept_commit(second, first.commit) == second
    assert store.decide_commit(held) == held

    assert store.commit(Head("c3")) == held
    assert store.commit(Head("c9")) is None
    assert store.last_accepted() == second
    again = replace(first, decided=T0 + timedelta(minutes=2), attempts=2)
    assert store.accept_commit(again, second.commit) == again  # a revert: the same time as c2
    assert backend.open().last_accepted() == again  # the verdict recorded last is in force
    assert store.commit(Head("c1", "d1")) == again


def test_a_verdict_is_decided_once(backend: Backend) -> None:
    """READING gives way to a verdict; a verdict stays, whoever writes another; a held commit
    may still be accepted (--allow-deletions), a refused one never."""
    store = backend.open()
    reading = CommitRecord(Head("c1"), CommitVerdict.READING, T0, detail={"reader": "a"})
    refused = CommitRecord(Head("c1"), CommitVerdict.REFUSED, T0, "bad")
    held = CommitRecord(Head("c1"), CommitVerdict.HELD, T0 + timedelta(seconds=1), "brake")

    assert store.decide_commit(reading) == reading
    assert store.decide_commit(refused) == refused
    assert store.decide_commit(held) == refused
    assert store.decide_commit(replace(reading, attempts=2)) == refused
    accepted = CommitRecord(Head("c1"), CommitVerdict.ACCEPTED, T0 + timedelta(seconds=2))
    assert store.accept_commit(accepted, None) is None  # refused: nothing in force
    assert store.commit(Head("c1")) == refused

    store.decide_commit(replace(held, commit=Head("c2")))
    judged_alone = replace(accepted, commit=Head("c2"))
    assert store.accept_commit(judged_alone, None) is None  # a replica that judged without it
    allowed = replace(judged_alone, detail={ALLOWED_DELETIONS: "c2"})
    assert store.accept_commit(allowed, None) == allowed
    assert backend.open().commit(Head("c2")) == allowed


def test_a_pending_commit_gives_way_and_an_accepted_one_not_in_force_may_be_held(
    backend: Backend,
) -> None:
    """PENDING (a read that failed and may pass) is no verdict: anything replaces it, and it
    replaces no verdict. A commit accepted before and no longer in force (git forced back to
    it) may be held by the brake; the commit in force never is."""
    store = backend.open()
    pending = CommitRecord(Head("c1"), CommitVerdict.PENDING, T0, "waits", {"failures": 1})
    reading = CommitRecord(Head("c1"), CommitVerdict.READING, T0, detail={"reader": "a"})
    assert store.decide_commit(pending) == pending
    assert backend.open().commit(Head("c1")) == pending
    assert store.decide_commit(reading) == reading
    c1 = CommitRecord(Head("c1"), CommitVerdict.ACCEPTED, T0)
    assert store.accept_commit(c1, None) == c1
    assert store.decide_commit(replace(pending, decided=T0 + timedelta(seconds=1))) == c1
    held = CommitRecord(Head("c1"), CommitVerdict.HELD, T0 + timedelta(seconds=2), "brake")
    assert store.decide_commit(held) == c1  # in force: its verdict stays

    c2 = CommitRecord(Head("c2"), CommitVerdict.ACCEPTED, T0 + timedelta(minutes=1))
    assert store.accept_commit(c2, Head("c1")) == c2
    assert store.decide_commit(held) == held  # no longer in force: judged again, held
    assert backend.open().last_accepted() == c2


def test_the_brake_limits_of_the_last_sync_are_kept_and_replaced(backend: Backend) -> None:
    store = backend.open()
    assert store.limits_in_force() is None

    store.record_limits(Limits(3, allow=False), T0)
    store.record_limits(Limits(10, allow=True), T0 + timedelta(minutes=1))

    assert backend.open().limits_in_force() == Limits(10, allow=True)


def test_the_commit_in_force_moves_only_from_the_one_expected(backend: Backend) -> None:
    """Compare-and-set: a replica that read c1 in force accepts c3 only while c1 still is; after
    another moved it to c2, it is told c2 instead."""
    store = backend.open()
    c1 = CommitRecord(Head("c1"), CommitVerdict.ACCEPTED, T0)
    c2 = CommitRecord(Head("c2"), CommitVerdict.ACCEPTED, T0 + timedelta(minutes=1))
    c3 = CommitRecord(Head("c3"), CommitVerdict.ACCEPTED, T0 + timedelta(minutes=2))
    store.accept_commit(c1, None)
    assert store.accept_commit(c2, Head("c1")) == c2

    assert store.accept_commit(c3, Head("c1")) == c2
    assert store.commit(Head("c3")) is None
    assert backend.open().last_accepted() == c2


def test_the_commit_in_force_is_the_one_accepted_last_whatever_the_clocks_said(
    backend: Backend,
) -> None:
    """Replicas' clocks differ: c2, accepted from c1 by a replica whose clock is a minute
    behind, is in force (a compare-and-set that succeeded moved it), and c1's replica, a minute
    ahead, cannot move it back from c1."""
    store = backend.open()
    c1 = CommitRecord(Head("c1"), CommitVerdict.ACCEPTED, T0 + timedelta(minutes=1))
    c2 = CommitRecord(Head("c2"), CommitVerdict.ACCEPTED, T0)
    c3 = CommitRecord(Head("c3"), CommitVerdict.ACCEPTED, T0 + timedelta(minutes=2))
    store.accept_commit(c1, None)

    assert store.accept_commit(c2, Head("c1")) == c2
    assert backend.open().last_accepted() == c2
    assert store.accept_commit(c3, Head("c1")) == c2


def test_replicas_deciding_one_commit_at_once_end_with_one_verdict(backend: Backend) -> None:
    """Eight connections decide the same commit at the same moment, half of them REFUSED and
    half HELD: every one is told the same verdict, the one the store keeps."""
    stores = [backend.open() for _ in range(8)]  # opened first: only the decisions race
    barrier = threading.Barrier(8)
    told: list[CommitRecord] = []

    def decide(index: int) -> None:
        verdict = CommitVerdict.REFUSED if index % 2 else CommitVerdict.HELD
        barrier.wait(timeout=60)
        record = CommitRecord(Head("c1"), verdict, T0, f"by {index}")
        told.append(stores[index].decide_commit(record))

    threads = [threading.Thread(target=decide, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    kept = backend.open().commit(Head("c1"))
    assert kept is not None
    assert told == [kept] * 8


def test_replicas_accepting_commits_at_once_from_one_in_force_move_it_once(
    backend: Backend,
) -> None:
    """Eight connections each accept a commit of their own from c0 at the same moment: one
    compare-and-set wins, and every one is told the winner's commit, the one in force."""
    stores = [backend.open() for _ in range(8)]
    stores[0].accept_commit(CommitRecord(Head("c0"), CommitVerdict.ACCEPTED, T0), None)
    barrier = threading.Barrier(8)
    told: list[CommitRecord | None] = []

    def accept(index: int) -> None:
        record = CommitRecord(Head(f"c{index + 1}"), CommitVerdict.ACCEPTED, T0)
        barrier.wait(timeout=60)
        told.append(stores[index].accept_commit(record, Head("c0")))

    threads = [threading.Thread(target=accept, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    in_force = backend.open().last_accepted()
    assert in_force is not None
    assert told == [in_force] * 8
    moved = [i for i in range(1, 9) if backend.open().commit(Head(f"c{i}")) is not None]
    assert [f"c{i}" for i in moved] == [in_force.commit.config]


# -- the engine on the store ---------------------------------------------------------------------


def test_the_engine_provisions_updates_and_deprovisions_on_the_store(backend: Backend) -> None:
    store, cluster, clock = backend.open(), InMemoryCluster(), Clock()
    config = repo(ModuleRef("widget"))
    runner = Runner(
        store, Engine(store, clock=clock, plugins=[]), config, lambda a, n: cluster, clock
    )

    first = runner.run(runner.operation_for("rt")).operation
    second = runner.run(runner.operation_for("rt")).operation
    gone = Runner(store, runner.engine, replace(config, runtimes={}), lambda a, n: cluster, clock)
    last = gone.run(gone.operation_for("rt")).operation

    kinds = [(o.type, o.state) for o in (first, second, last)]
    assert kinds == [
        (OperationType.PROVISION, OperationState.SUCCEEDED),
        (OperationType.UPDATE, OperationState.SUCCEEDED),
        (OperationType.DEPROVISION, OperationState.SUCCEEDED),
    ]
    assert backend.open().get(first.id) == first
    assert store.runtimes() == []
    assert cluster.get(ObjectRef("apps/v1", "Deployment", NAMESPACE, "widget-operator")) is None


def test_a_runtime_in_progress_elsewhere_is_resumed_not_doubled(backend: Backend) -> None:
    store, cluster, clock = backend.open(), InMemoryCluster(auto_ready=False), Clock()
    config = repo(ModuleRef("widget"))
    mine = Runner(
        store, Engine(store, clock=clock, plugins=[]), config, lambda a, n: cluster, clock
    )
    waiting = mine.run(mine.operation_for("rt")).operation  # waits in apply, stays in progress
    other_store = backend.open()
    other = Engine(other_store, clock=clock, plugins=[], owner="elsewhere:1", alive=lambda o: True)
    theirs = Runner(other_store, other, config, lambda a, n: cluster, clock)

    operation = theirs.operation_for("rt")

    assert operation.id == waiting.id  # resumed, not a second one
    blocked = other_store.claim(operation.id, "elsewhere:1", clock.now, clock.now, lambda o: True)
    assert blocked is not None
    assert waiting.id in blocked


# -- the command line on the store's URL ---------------------------------------------------------


def test_sync_status_and_operations_work_on_the_store_url(backend: Backend, tmp_path: Path) -> None:
    runner, clusters = CliRunner(), f"{tmp_path / 'clusters'}/"
    state = ["--state", backend.url]

    synced = runner.invoke(
        cli,
        [
            "sync",
            str(SAMPLE),
            "--runtime",
            "prod-eu-1",
            "--snapshot",
            clusters,
            "--snapshot-create",
            *state,
        ],
    )
    status = runner.invoke(cli, ["status", "--format", "json", *state])
    listed = runner.invoke(cli, ["operations", "list", "--no-headers", *state])
    shown = runner.invoke(cli, ["operations", "show", listed.stdout.split()[0][:6], *state])

    assert synced.exit_code == 0, synced.output
    assert [r["runtime"] for r in json.loads(status.stdout)["items"]] == ["prod-eu-1"]
    assert "provision" in listed.stdout
    assert "stage apply" in shown.stdout


def test_a_suspension_is_kept_replaced_and_lifted(backend: Backend) -> None:
    store = backend.open()

    store.suspend(Suspension("rt", T0, "incident 42"))
    store.suspend(Suspension("rt", T0 + timedelta(minutes=5), "still on it"))
    store.suspend(Suspension("other", T0))

    assert backend.open().suspensions() == {
        "other": Suspension("other", T0),
        "rt": Suspension("rt", T0 + timedelta(minutes=5), "still on it"),
    }
    assert store.resume("rt") is True
    assert store.resume("rt") is False
    assert list(store.suspensions()) == ["other"]


# -- members: replicas sharing the store ----------------------------------------------

LEASE = timedelta(seconds=30)


def test_a_member_keeps_its_epoch_while_it_beats_and_starts_a_new_one_after_a_lapse(
    backend: Backend,
) -> None:
    store = backend.open()

    first = store.heartbeat("replica-a", T0, LEASE)
    again = store.heartbeat("replica-a", T0 + timedelta(seconds=20), LEASE)
    lapsed = store.heartbeat("replica-a", T0 + timedelta(seconds=60), LEASE)

    assert (first.epoch, first.started, first.heartbeat) == (1, T0, T0)
    assert (again.epoch, again.started) == (1, T0)
    assert again.heartbeat == T0 + timedelta(seconds=20)
    assert (lapsed.epoch, lapsed.started) == (2, T0 + timedelta(seconds=60))
    assert store.members() == [lapsed]


def test_members_are_listed_by_name_with_who_is_alive_and_leave(backend: Backend) -> None:
    store = backend.open()
    store.heartbeat("replica-b", T0, LEASE)
    store.heartbeat("replica-a", T0 + timedelta(seconds=45), LEASE)

    members = store.members()
    now = T0 + timedelta(seconds=50)
    store.leave("replica-a")

    assert [m.name for m in members] == ["replica-a", "replica-b"]
    assert [m.live(now, LEASE) for m in members] == [True, False]
    assert [m.name for m in store.members()] == ["replica-b"]


def test_two_members_beating_at_once_each_keep_their_own_epoch(backend: Backend) -> None:
    stores = [backend.open(), backend.open()]
    epochs: dict[str, list[int]] = {"a": [], "b": []}

    def beat(store: StateStore, name: str) -> None:
        for second in range(20):
            member = store.heartbeat(name, T0 + timedelta(seconds=second), LEASE)
            epochs[name].append(member.epoch)

    threads = [
        threading.Thread(target=beat, args=(s, n)) for s, n in zip(stores, "ab", strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert epochs == {"a": [1] * 20, "b": [1] * 20}
    assert {m.name for m in stores[0].members()} == {"a", "b"}


def _finished(
    operation_id: str, runtime: str, minutes: int, state: OperationState, message: str
) -> Operation:
    done = _operation(operation_id, runtime, T0 + timedelta(minutes=minutes), state)
    done.message = message
    return done


def test_prune_merges_runs_of_no_change_then_keeps_the_newest_and_young_failures(
    backend: Backend,
) -> None:
    """Pruning removes operations, so the store does not grow for ever (a 1,000-runtime fleet's
    store grew by about 12 MB a resync before)."""
    store = backend.open()
    ok, failed = OperationState.SUCCEEDED, OperationState.FAILED
    for operation in [
        _finished("a", "rt", 0, ok, "4 installed"),
        _finished("b", "rt", 1, ok, NO_CHANGE),
        _finished("c", "rt", 2, ok, NO_CHANGE),
        _finished("d", "rt", 3, failed, "Apply_Modules: forbidden"),
        _finished("e", "rt", 4, ok, NO_CHANGE),
        _finished("f", "rt", 5, ok, NO_CHANGE),
        _operation("g", "rt", T0 + timedelta(minutes=6), OperationState.IN_PROGRESS),
        _finished("h", "other", -10 * 24 * 60, failed, "timed out"),
        _finished("i", "other", 0, ok, NO_CHANGE),
    ]:
        store.save(operation)

    removed = store.prune(Retention(3, timedelta(days=7)), T0 + timedelta(hours=1))

    # b and e merged into the no-change run's newest; then a and c beyond the newest 3 of rt
    assert removed == 4
    assert [o.id for o in store.operations(runtime="rt")] == ["g", "f", "d"]
    assert [o.id for o in store.operations(runtime="other")] == ["i", "h"]
    assert store.get("b") is None

    again = store.prune(Retention(1, timedelta(days=7)), T0 + timedelta(hours=1))

    assert again == 2  # f (the newest is g, in progress: never removed) and h (an old failure)
    assert [o.id for o in store.operations(runtime="rt")] == ["g", "d"]  # d: a young failure
    assert [o.id for o in store.operations(runtime="other")] == ["i"]
    assert store.prune(Retention(1, timedelta(days=7)), T0 + timedelta(hours=1)) == 0
    saved = _finished("g", "rt", 6, ok, NO_CHANGE)  # a pruned neighbour never breaks a save
    store.save(saved)
    assert store.get("g") == saved


def test_a_clusters_capabilities_are_kept_and_replaced(backend: Backend) -> None:
    store = backend.open()
    seen = Capabilities("v1.31.2", ("apps/v1", "apps/v1/Deployment", "v1", "v1/Pod"), T0)

    store.record_capabilities("rt", seen)
    store.record_capabilities("other", replace(seen, kube_version="v1.30.0"))
    newer = Capabilities("v1.32.0", ("v1", "v1/Pod"), T0 + timedelta(hours=1))
    store.record_capabilities("rt", newer)

    assert backend.open().capabilities() == {
        "other": replace(seen, kube_version="v1.30.0"),
        "rt": newer,
    }
