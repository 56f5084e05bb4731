"""Stopping the daemon (in this process) on the real API server while an operation waits for an
operator that never becomes available (no kubelet): a run never waits for it (it ends "not
yet" and gives its worker back), so ``close()`` finds no run to wait for; the operation stays
resumable (the readiness check still to run, nothing failed), and a daemon started again on
the same store finishes it once the operator is available. The in-memory test of a stop while
a step is under way: tests/daemon/test_daemon_stopping.py."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from reconciler.cluster.api import Cluster
from reconciler.cluster.kube import connect
from reconciler.core.model import ClusterAccess
from reconciler.daemon.service import Daemon, DaemonOptions
from reconciler.operations.model import OperationState, StepState
from reconciler.operations.store import SqliteStore
from reconciler.source.git import RemoteSource
from tests.support.e2e_harness import until
from tests.support.e2e_world import World
from tests.support.kube_daemons import served_repo
from tests.support.stopping import steps_of


def _daemon(world: World, url: str, root: Path) -> Daemon:
    def reach(access: ClusterAccess, name: str) -> Cluster:
        return connect(access, name=name, kubeconfig_dir=world.control_plane.kubeconfig_dir)

    source = RemoteSource(url, "main", "", root / "cache")
    store = SqliteStore(root / "state.db")
    return Daemon(source, store, reach, lambda: datetime.now(UTC), DaemonOptions(watch=False))


@pytest.mark.timeout(180)
def test_close_while_an_operation_waits_for_an_operator_and_a_restart_finishes_it(
    world: World, tmp_path: Path
) -> None:
    fleet, kube = world.fleet, world.kube
    module = fleet.module("op")
    fleet.channel[module.name] = "1.0.0"
    runtime = fleet.runtime("rt", [{"name": module.name}])
    fleet.write()
    server = served_repo(fleet.root, tmp_path, "one module")
    try:
        daemon = _daemon(world, server.url, tmp_path)
        assert daemon.poll()

        def waits_for_its_operator() -> bool:
            daemon.reconcile_all(wait=True)  # a retry timer's run (its CRD Established first)
            waiting = daemon.store.unfinished(runtime)
            return (
                waiting is not None
                and kube.deployment(module.namespace, module.operator) is not None
                and steps_of(waiting)["Check_Modules_Ready"] is StepState.RETRYING
            )

        until(waits_for_its_operator, "the operation waits for its operator", 120)
        daemon.close()  # no run under way: each gave its worker back

        operation = daemon.store.unfinished(runtime)
        assert operation is not None
        assert operation.state is OperationState.IN_PROGRESS
        steps = steps_of(operation)
        assert StepState.FAILED not in steps.values()
        assert steps["Check_Modules_Ready"] is StepState.RETRYING
        assert steps["Apply_Modules"] is StepState.PENDING  # its stage runs again (O1)
        assert isinstance(daemon.store, SqliteStore)
        daemon.store.close()

        kube.make_available(module.namespace, module.operator)
        again = _daemon(world, server.url, tmp_path)
        try:
            again.poll()

            def finished() -> bool:
                again.reconcile_all(wait=True)  # the step that waited: its stage again
                return again.store.unfinished(runtime) is None

            until(finished, "the operation finished after the restart", 120)
            done = again.store.get(operation.id)
            assert done is not None
            assert done.state is OperationState.SUCCEEDED
        finally:
            again.close()
    finally:
        server.stop()
