"""``reconciler daemon`` as a real process on the real API server, sent SIGTERM while its
operation waits for an operator that never becomes available (no kubelet; a run never waits for
it: it ends "not yet", to be run again): it exits 0 at once, the operation resumable, and a
daemon started again finishes the operation once the operator is available. The test's time
limit guards the exit."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.operations.model import StepState
from tests.support.e2e_harness import until
from tests.support.e2e_world import World, world_of
from tests.support.kube_control_plane import ControlPlane
from tests.support.kube_daemons import KubeDaemon, served_repo, shown_and_stopped


@pytest.fixture
def world(kube_control_plane: ControlPlane, tmp_path: Path) -> Iterator[World]:
    yield from world_of(kube_control_plane, tmp_path)


@pytest.mark.timeout(240)
def test_sigterm_while_waiting_for_an_operator_exits_0_at_once_and_a_restart_finishes(
    world: World, tmp_path: Path
) -> None:
    fleet, kube = world.fleet, world.kube
    module = fleet.module("op")
    fleet.channel[module.name] = "1.0.0"
    runtime = fleet.runtime("rt", [{"name": module.name}])
    fleet.write()
    server = served_repo(fleet.root, tmp_path, "one module")
    daemon = KubeDaemon(world, server.url, tmp_path, runtime, "")
    with shown_and_stopped(daemon, server):
        process = daemon.start()
        until(
            lambda: (
                kube.deployment(module.namespace, module.operator) is not None
                and daemon.step("Check_Modules_Ready") is StepState.RETRYING
            ),
            "the operation waits for its operator",
            120,
        )
        process.send_signal(signal.SIGTERM)
        assert process.wait() == 0  # within the test's limit
        assert daemon.step("Apply_Modules") in (StepState.DONE, StepState.PENDING)  # none failed
        assert daemon.step("Check_Modules_Ready") in (StepState.PENDING, StepState.RETRYING)

        kube.make_available(module.namespace, module.operator)
        daemon.start()
        until(lambda: daemon.step("Record_Status") is StepState.DONE, "the operation finished", 120)
