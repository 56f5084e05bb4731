"""What a sync costs in API calls: one list per kind for the live view, no per-object GETs for
objects the lists show, and about one write per applied object on a cold install.

Counted on the in-memory cluster (``InMemoryCluster.calls``) for a runtime of 30 modules, each
with a Namespace, a CRD, a ServiceAccount, a ConfigMap, a Service, the operator Deployment and a
default configuration (a custom resource of its CRD): 210 objects of 7 kinds.
"""

from __future__ import annotations

from pathlib import Path

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.model import ConfigRepo
from reconciler.lifecycle.executor import ModuleState, sync_runtime
from reconciler.operations.engine import Engine
from reconciler.operations.model import OperationState, OperationType
from reconciler.operations.runner import Runner
from reconciler.operations.store import SqliteStore
from tests.support.big_runtime import MODULES, NOW, big_runtime_repo
from tests.support.repos import RepoFactory
from tests.support.scenarios import Clock


def _sync(cluster: InMemoryCluster, repo: ConfigRepo) -> dict[str, int]:
    before = dict(cluster.calls)
    result = sync_runtime(cluster, repo, "big", now=NOW)
    assert {s.state for s in result.modules} == {ModuleState.READY}
    return {k: v - before.get(k, 0) for k, v in cluster.calls.items() if v != before.get(k, 0)}


def test_a_cold_install_writes_about_once_per_object(make_repo: RepoFactory) -> None:
    repo = big_runtime_repo(make_repo)
    cluster = InMemoryCluster()
    calls = _sync(cluster, repo)
    applied = MODULES * 7  # objects of the manifests and the default configurations
    writes = sum(calls.get(k, 0) for k in ("apply", "patch", "delete", "event"))
    print(f"cold install: {calls}, writes per applied object {writes / applied:.3f}")
    # Each object once; per module its inventory twice (the intent before any object, then
    # with the default configuration created: L3 needs that recorded) and one Event (issue
    # 31: per module and sync, was one per object); the system namespace once.
    assert writes <= applied + 3 * MODULES + 1
    assert calls.get("event", 0) == MODULES
    assert calls.get("dry-run", 0) == applied  # L14: each object dry-run once before it is written


def test_a_sync_that_changes_nothing_lists_once_per_kind_and_writes_nothing(
    make_repo: RepoFactory, tmp_path: Path
) -> None:
    repo = big_runtime_repo(make_repo)
    cluster = InMemoryCluster()
    _sync(cluster, repo)
    calls = _sync(cluster, repo)
    kinds = 5 + 1 + MODULES  # Namespace, CRD, SA, ConfigMap, Service, Deployment, one CR each
    print(f"no-change sync: {calls}")
    assert calls.get("apply", 0) == calls.get("patch", 0) == calls.get("delete", 0) == 0
    assert calls.get("dry-run", 0) == 0
    assert calls.get("get", 0) == 0
    assert calls.get("list", 0) <= kinds + 1  # + the inventories


def _operation_calls(
    runner: Runner, cluster: InMemoryCluster
) -> tuple[OperationType, dict[str, int]]:
    before = dict(cluster.calls)
    operation = runner.operation_for("big")
    outcome = runner.run(operation)
    assert outcome.operation.state is OperationState.SUCCEEDED, outcome.operation.message
    calls = {k: v - before.get(k, 0) for k, v in cluster.calls.items() if v != before.get(k, 0)}
    return operation.type, calls


def test_an_update_operation_reads_the_cluster_once_for_all_its_stages(
    make_repo: RepoFactory, tmp_path: Path
) -> None:
    """``reconciler sync`` runs an update as stages (plan, apply, remove), each of which used to
    read every object again: the live view is shared by the stages of one run."""
    repo = big_runtime_repo(make_repo)
    cluster = InMemoryCluster()
    store = SqliteStore(tmp_path / "state.db")
    clock = Clock(NOW)
    runner = Runner(
        store, Engine(store, clock=clock, plugins=[]), repo, lambda a, n: cluster, clock
    )
    assert _operation_calls(runner, cluster)[0] is OperationType.PROVISION

    kind, calls = _operation_calls(runner, cluster)

    print(f"no-change update operation: {calls}")
    assert kind is OperationType.UPDATE
    assert calls.get("apply", 0) == calls.get("patch", 0) == calls.get("delete", 0) == 0
    assert calls.get("get", 0) == 0
    assert calls.get("list", 0) <= 6 + 1
