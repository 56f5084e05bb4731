"""Crash- and fault-proof bookkeeping, one precise case at a time.

The default configuration is recorded in the inventory before it is created: the states
"intended, not created yet", "created" and "created, then deleted by a user" each lead to the
right next step, and a lost response or a failed create never makes our object look like a
user's. Operations never report "succeeded" while something they own is left. Faults are
injected at our cluster boundary with :class:`tests.support.faults.FaultyCluster` (planned, not
random).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.inventory import Inventory, inventory_from_configmap, inventory_ref
from reconciler.core.model import ConfigRepo, ModuleRef
from reconciler.core.objects import ObjectRef
from reconciler.lifecycle.executor import ModuleState, SyncResult, sync_runtime
from reconciler.operations.engine import Engine
from reconciler.operations.model import OperationState, OperationType
from reconciler.operations.runner import Runner
from reconciler.operations.store import SqliteStore
from tests.support.faults import FaultyCluster
from tests.support.lifecycle_helpers import NAMESPACE, NOW, repo
from tests.support.scenarios import Clock

DEFAULT = ObjectRef("example.io/v1", "Widget", NAMESPACE, "default")
DEPLOYMENT = ObjectRef("apps/v1", "Deployment", NAMESPACE, "widget-operator")
CRD = ObjectRef("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets.example.io")
SYSTEM = "reconciler-system"


def _sync(cluster: FaultyCluster | InMemoryCluster, config: ConfigRepo) -> SyncResult:
    return sync_runtime(cluster, config, "rt", now=NOW)


def _inventory(cluster: InMemoryCluster, module: str = "widget") -> Inventory:
    body = cluster.get(inventory_ref(SYSTEM, module))
    assert body is not None
    return inventory_from_configmap(body)


def _exists(cluster: InMemoryCluster, ref: ObjectRef) -> bool:
    return any(ObjectRef.of(body) == ref for body in cluster.objects())


def _state(result: SyncResult, module: str = "widget") -> tuple[ModuleState | None, str]:
    status = next(s for s in result.modules if s.module == module)
    return status.state, status.reason


def _user_widget(name: str, namespace: str = NAMESPACE) -> dict[str, object]:
    return {
        "apiVersion": "example.io/v1",
        "kind": "Widget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"size": 1},
    }


@pytest.fixture
def cluster() -> InMemoryCluster:
    return InMemoryCluster()


def test_the_default_configuration_is_recorded_as_intended_before_it_is_created(
    cluster: InMemoryCluster,
) -> None:
    faulty = FaultyCluster(cluster)
    faulty.plan("server", "apply", DEFAULT.subject)  # the create never reaches the server

    failed = _sync(faulty, repo(ModuleRef("widget")))

    assert _state(failed) == (ModuleState.ERROR, "Retrying")
    assert cluster.get(DEFAULT) is None
    intended = _inventory(cluster)
    assert (intended.default_configuration, intended.default_configuration_done) == (DEFAULT, False)

    again = _sync(faulty, repo(ModuleRef("widget")))  # as after a kill: created now, once

    assert _state(again)[0] is ModuleState.READY
    assert cluster.get(DEFAULT) is not None
    created = _inventory(cluster)
    assert (created.default_configuration, created.default_configuration_done) == (DEFAULT, True)


def test_a_lost_response_after_the_create_keeps_the_object_ours(cluster: InMemoryCluster) -> None:
    faulty = FaultyCluster(cluster)
    faulty.plan("lost", "apply", DEFAULT.subject)  # created, but we never hear so

    assert _state(_sync(faulty, repo(ModuleRef("widget")))) == (ModuleState.ERROR, "Retrying")
    assert cluster.get(DEFAULT) is not None
    assert _inventory(cluster).default_configuration == DEFAULT

    applies = faulty.calls["apply"]
    assert _state(_sync(faulty, repo(ModuleRef("widget"))))[0] is ModuleState.READY
    created = _inventory(cluster)
    assert (created.default_configuration, created.default_configuration_done) == (DEFAULT, True)
    assert faulty.calls["apply"] - applies == 1  # only the inventory: no second create

    removed = _sync(faulty, repo())  # our own CR never blocks the removal

    assert _state(removed) == (None, "Removed")
    assert not _exists(cluster, DEFAULT)
    assert cluster.get(DEPLOYMENT) is None
    assert cluster.get(inventory_ref(SYSTEM, "widget")) is None


def test_nothing_is_applied_before_the_intent_is_recorded(cluster: InMemoryCluster) -> None:
    faulty = FaultyCluster(cluster)
    faulty.plan("server", "apply", f"ConfigMap/{SYSTEM}/inventory-widget")  # the intent
    _sync(faulty, repo(ModuleRef("widget")))
    assert not _exists(cluster, CRD)
    assert not _exists(cluster, DEFAULT)

    _sync(faulty, repo(ModuleRef("widget")))
    written = _inventory(cluster)
    assert (written.default_configuration, written.default_configuration_done) == (DEFAULT, True)


def test_created_then_deleted_by_the_user_is_never_created_again(cluster: InMemoryCluster) -> None:
    faulty = FaultyCluster(cluster)
    faulty.plan("lost", "apply", DEFAULT.subject)
    _sync(faulty, repo(ModuleRef("widget")))
    _sync(faulty, repo(ModuleRef("widget")))
    cluster.delete(DEFAULT)  # the user's decision (L3)

    _sync(faulty, repo(ModuleRef("widget")))
    _sync(faulty, repo(ModuleRef("widget"), regular={"widget": "2.0.0", "gadget": "1.0.0"}))

    assert cluster.get(DEFAULT) is None
    assert _inventory(cluster).default_configuration_done


def test_a_users_object_made_between_intent_and_create_stays_theirs(
    cluster: InMemoryCluster,
) -> None:
    faulty = FaultyCluster(cluster)
    faulty.plan("timeout", "apply", DEFAULT.subject)
    _sync(faulty, repo(ModuleRef("widget")))
    cluster.apply(_user_widget("default"), field_manager="kubectl")

    _sync(faulty, repo(ModuleRef("widget")))
    recorded = _inventory(cluster)
    assert (recorded.default_configuration, recorded.default_configuration_done) == (None, True)

    blocked = _sync(faulty, repo())  # theirs: it blocks the removal and is never deleted

    assert _state(blocked) == (ModuleState.DELETING, "WaitingForResources")
    live = cluster.get(DEFAULT)
    assert live is not None
    assert live["spec"] == {"size": 1}


def test_a_users_object_made_between_intent_and_create_is_never_deleted_at_removal(
    cluster: InMemoryCluster,
) -> None:
    """The module leaves git right after the race, so no sync of it sees that the object is
    not ours: its labels decide."""
    faulty = FaultyCluster(cluster)
    faulty.plan("timeout", "apply", DEFAULT.subject)
    _sync(faulty, repo(ModuleRef("widget")))
    assert _inventory(cluster).default_configuration == DEFAULT  # intended, not created
    cluster.apply(_user_widget("default"), field_manager="kubectl")

    for _ in range(3):
        blocked = _sync(faulty, repo())

    assert _state(blocked) == (ModuleState.DELETING, "WaitingForResources")
    live = cluster.get(DEFAULT)
    assert live is not None
    assert live["spec"] == {"size": 1}


def test_a_users_object_in_place_of_an_intended_one_survives_a_deprovision(
    tmp_path: Path, cluster: InMemoryCluster
) -> None:
    faulty, clock = FaultyCluster(cluster), Clock()
    config = repo(ModuleRef("widget"))
    runner = _runner(tmp_path, config, faulty, clock)
    runner.run(runner.operation_for("rt"))
    cluster.delete(DEFAULT)
    _inventory_intending_default(cluster)  # as a kill right after the intent leaves it
    cluster.apply(_user_widget("default"), field_manager="kubectl")

    gone = _runner(tmp_path, replace(config, runtimes={}), faulty, clock)
    for _ in range(12):  # the wait for users' objects gives up after 5 minutes
        clock.advance(60)
        last = gone.run(gone.operation_for("rt")).operation
        if last.finished:
            break

    assert last.state is OperationState.FAILED
    assert "Widget/widget-system/default" in last.message
    live = cluster.get(DEFAULT)
    assert live is not None
    assert live["spec"] == {"size": 1}


def _inventory_intending_default(cluster: InMemoryCluster) -> None:
    intended = replace(
        _inventory(cluster), default_configuration=DEFAULT, default_configuration_done=False
    )
    cluster.apply(intended.to_configmap(SYSTEM), field_manager="reconciler")


def test_an_inventory_that_lost_our_default_configuration_gets_it_back(
    cluster: InMemoryCluster,
) -> None:
    _sync(cluster, repo(ModuleRef("widget")))
    broken = replace(_inventory(cluster), default_configuration=None)  # as older versions left it
    cluster.apply(broken.to_configmap(SYSTEM), field_manager="reconciler")

    _sync(cluster, repo(ModuleRef("widget")))

    assert _inventory(cluster).default_configuration == DEFAULT
    assert _state(_sync(cluster, repo())) == (None, "Removed")
    assert not _exists(cluster, DEFAULT)


# -- operations never "succeed" with something left ----------------------------------------------


def _runner(tmp_path: Path, config: ConfigRepo, cluster: FaultyCluster, clock: Clock) -> Runner:
    store = SqliteStore(tmp_path / "state.db")
    engine = Engine(store, clock=clock, plugins=[])
    return Runner(store, engine, config, lambda access, name: cluster, clock)


def test_a_removal_failing_half_way_is_retried_not_succeeded(
    tmp_path: Path, cluster: InMemoryCluster
) -> None:
    faulty, clock = FaultyCluster(cluster), Clock()
    config = repo(ModuleRef("widget"), ModuleRef("gadget"))
    setup = _runner(tmp_path, config, faulty, clock)
    assert setup.run(setup.operation_for("rt")).operation.state is OperationState.SUCCEEDED
    gadget = ObjectRef("apps/v1", "Deployment", NAMESPACE, "gadget-operator")
    faulty.plan("server", "delete", gadget.subject)
    runner = _runner(tmp_path, repo(ModuleRef("widget")), faulty, clock)

    waiting = runner.run(runner.operation_for("rt"))

    assert waiting.retry_at is not None
    assert waiting.operation.state is OperationState.IN_PROGRESS
    assert "gadget" in waiting.operation.message
    clock.now = waiting.retry_at
    done = runner.run(waiting.operation).operation
    assert done.state is OperationState.SUCCEEDED
    assert cluster.get(gadget) is None
    assert cluster.get(inventory_ref(SYSTEM, "gadget")) is None


def test_a_deprovision_failing_half_way_retries_then_deletes_everything(
    tmp_path: Path, cluster: InMemoryCluster
) -> None:
    faulty, clock = FaultyCluster(cluster), Clock()
    config = repo(ModuleRef("widget"))
    setup = _runner(tmp_path, config, faulty, clock)
    setup.run(setup.operation_for("rt"))
    faulty.plan("lost", "delete", DEPLOYMENT.subject)
    faulty.plan("server", "delete", CRD.subject)
    runner = _runner(tmp_path, replace(config, runtimes={}), faulty, clock)

    outcome = runner.run(runner.operation_for("rt"))
    assert outcome.operation.type is OperationType.DEPROVISION
    while outcome.retry_at is not None:
        clock.now = outcome.retry_at
        outcome = runner.run(outcome.operation)

    assert outcome.operation.state is OperationState.SUCCEEDED
    assert [o for o in cluster.objects() if o["metadata"].get("labels")] == []
    assert runner.store.runtimes() == []
