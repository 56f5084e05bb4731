"""Stopping the daemon (in this process) on the real API server while a run waits for an
operator that never becomes available (no kubelet): ``close()`` wakes the run at once, the
operation stays resumable (the readiness check still to run, nothing failed), and a daemon
started again on the same store finishes it once the operator is available. The wait for
operators is set to an hour and the test's time limit is three minutes (the control plane may
start within it): a close that sat out the wait fails by the limit, not by a clock reading."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from reconciler.cluster.api import Cluster
from reconciler.cluster.kube import connect
from reconciler.core.model import ClusterAccess
from reconciler.daemon.service import Daemon, DaemonOptions
from reconciler.lifecycle import apply
from reconciler.operations.model import OperationState, StepState
from reconciler.operations.store import SqliteStore
from reconciler.source.git import RemoteSource
from tests.support.e2e_harness import until
from tests.support.e2e_world import World
from tests.support.kube_daemons import served_repo
from tests.support.stopping import NotedStop, steps_of


def _daemon(world: World, url: str, root: Path) -> Daemon:
    def reach(access: ClusterAccess, name: str) -> Cluster:
        return connect(access, name=name, kubeconfig_dir=world.control_plane.kubeconfig_dir)

    source = RemoteSource(url, "main", "", root / "cache")
    store = SqliteStore(root / "state.db")
    return Daemon(source, store, reach, lambda: datetime.now(UTC), DaemonOptions(watch=False))


@pytest.mark.timeout(180)
def test_close_wakes_a_run_waiting_for_an_operator_and_a_restart_finishes_it(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(apply, "READY_WAIT_SECONDS", 3600.0)
    fleet, kube = world.fleet, world.kube
    module = fleet.module("op")
    fleet.channel[module.name] = "1.0.0"
    runtime = fleet.runtime("rt", [{"name": module.name}])
    fleet.write()
    server = served_repo(fleet.root, tmp_path, "one module")
    try:
        daemon = _daemon(world, server.url, tmp_path)
        stop = daemon.stopping = NotedStop()
        assert daemon.poll()
        until(  # past its wait for its CRD: the operator applied
            lambda: kube.deployment(module.namespace, module.operator) is not None,
            "the operator applied",
            120,
        )
        applied = stop.waits
        until(lambda: stop.waits > applied, "the run waits for its operator", 120)
        daemon.close()  # within the test's limit, not after the hour's wait

        operation = daemon.store.unfinished(runtime)
        assert operation is not None
        assert operation.state is OperationState.IN_PROGRESS
        steps = steps_of(operation)
        assert StepState.FAILED not in steps.values()
        assert steps["Apply_Modules"] is StepState.DONE  # the pass ended whole
        assert steps["Check_Modules_Ready"] in (StepState.PENDING, StepState.RETRYING)
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
