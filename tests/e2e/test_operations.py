"""Operations' time rules on a real API server, through ``reconciler sync`` as a user runs it:
an operation past its time limit (``spec.operations.timeouts``, O4) fails ``TimedOut``, naming
the step that kept it waiting, the runtime is ``Error`` until a later sync succeeds; a
deprovision that a user's resource blocks waits in ``Wait_For_Managed_Resources`` only until
that step's own limit (O5), then the step is skipped and recorded, the module nothing blocks is
deleted, the blocked one is left ``Deleting`` and a later sync finishes it.

Time passes on a clock the test moves (the command line's ``now``), not in real time, so that
what is past a limit and what is not never depends on how fast the machine is: everything else,
the API server included, is real."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

import reconciler.cli.clusters
from tests.support.e2e_harness import until
from tests.support.e2e_world import World


def _states(world: World, runtime: str) -> dict[str, tuple[str, str]]:
    return {name: (m["state"], m["reason"]) for name, m in world.status(runtime).items()}


def _latest_operation(world: World, runtime: str) -> dict[str, Any]:
    listed = world.reconciler_json("operations", "list", "--runtime", runtime)
    latest: dict[str, Any] = listed["items"][0]
    return latest


def _steps(operation: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for s in operation["stages"] for t in s["steps"]}


class _Clock:
    """The command line's clock (``reconciler.cli.clusters.now``), ``ahead`` of the real one."""

    def __init__(self) -> None:
        self.ahead = timedelta()
        self._real = reconciler.cli.clusters.now

    def __call__(self) -> datetime:
        return self._real() + self.ahead


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    """The command line's clock, moved by the test."""
    moved = _Clock()
    monkeypatch.setattr(reconciler.cli.clusters, "now", moved)
    return moved


def test_an_operation_past_its_time_limit_fails_timed_out_and_a_later_sync_recovers(
    world: World, clock: _Clock
) -> None:
    fleet, kube = world.fleet, world.kube
    app = fleet.module("app")
    fleet.channel[app.name] = "1.0.0"
    runtime = fleet.runtime("rt", [{"name": app.name}])
    # O4: a provision may take ten minutes (not 24 h); the operator never becomes Available (no
    # kubelet runs), so the provision waits in Check_Modules_Ready.
    fleet.operations = {"timeouts": {"provision": "10m"}}
    waiting = world.sync()
    assert waiting.exit_code == 0, waiting.output
    assert "in progress: waiting" in waiting.output
    clock.ahead = timedelta(minutes=5)
    assert world.sync().exit_code == 0, "still within its limit"
    assert world.runtime_status(runtime)["state"] == "Processing"

    # Past the limit the next sync fails the operation, naming the step that kept it waiting.
    clock.ahead = timedelta(minutes=11)
    result = world.sync()
    assert result.exit_code == 1, result.output
    assert "timed out after 0:10:00" in result.output
    assert kube.deployment(app.namespace, app.operator) is not None, "applied within the limit"
    status = world.runtime_status(runtime)
    assert (status["state"], status["reason"]) == ("Error", "TimedOut"), status
    assert "step Check_Modules_Ready still asking to retry" in status["message"]
    assert "WaitingForOperator" in status["message"]
    operation = _latest_operation(world, runtime)
    assert (operation["type"], operation["state"]) == ("provision", "failed")
    assert operation["message"] == status["message"].split(" failed: ", 1)[1]

    # The operator Available: the next sync's update (a new operation, a new limit) succeeds.
    kube.make_available(app.namespace, app.operator)
    recovered = world.sync()
    assert recovered.exit_code == 0, recovered.output
    assert "update" in recovered.output
    assert "succeeded" in recovered.output
    assert world.runtime_status(runtime)["state"] == "Ready"
    assert _states(world, runtime) == {app.name: ("Ready", "Ready")}


def test_a_blocked_deprovision_skips_its_wait_past_the_step_limit_and_deletes_what_is_free(
    world: World, clock: _Clock
) -> None:
    fleet, kube = world.fleet, world.kube
    held, free = fleet.module("held"), fleet.module("free")
    fleet.channel.update({held.name: "1.0.0", free.name: "1.0.0"})
    runtime = fleet.runtime("rt", [{"name": held.name}, {"name": free.name}])
    assert world.sync().exit_code == 0
    for module in (held, free):
        kube.make_available(module.namespace, module.operator)
    installed = world.sync()
    assert installed.exit_code == 0, installed.output
    assert _states(world, runtime) == {held.name: ("Ready", "Ready"), free.name: ("Ready", "Ready")}

    users = f"e2e-{fleet.suffix}-apps"
    kube.create_namespace(users)
    try:
        kube.create_resource(held.crd, users, held.crd.instance("mine", size=1))
        blocker = f"{held.crd.kind}/{users}/mine"
        fleet.runtimes.pop(runtime)

        # Within the step's limit the deprovision waits, naming the blocker; nothing is deleted.
        # (A server still filling its cache of a new kind answers 429 at first: the step retries
        # then, and names the blocker once the server answers.)
        def waits_naming_the_blocker() -> bool:
            waiting = world.sync("--allow-deletions", runtime)
            assert waiting.exit_code == 0, waiting.output
            return blocker in waiting.output

        until(waits_naming_the_blocker, f"the deprovision waits for {blocker}")
        first = _latest_operation(world, runtime)
        assert (first["type"], first["state"]) == ("deprovision", "in progress")
        wait_step = _steps(first)["Wait_For_Managed_Resources"]
        assert wait_step["state"] == "retrying"
        assert blocker in wait_step["message"]
        for module in (held, free):
            assert kube.deployment(module.namespace, module.operator) is not None

        # O5: five minutes on, the step is skipped and recorded; the free module is deleted, the
        # held one stays Deleting, and the operation fails naming it (never "succeeded").
        # (the server may still be deleting what the free module left past one sync's bound: a
        # sync then says the deprovision waits for it, and the next one goes on)
        clock.ahead = timedelta(seconds=301)

        def ended_failed() -> bool:
            ran = world.sync("--allow-deletions", runtime)
            assert ran.exit_code in (0, 1), ran.output
            return ran.exit_code == 1

        until(ended_failed, "the deprovision ends, failed")
        operation = _latest_operation(world, runtime)
        assert operation["id"] == first["id"]
        assert operation["state"] == "failed"
        wait_step = _steps(operation)["Wait_For_Managed_Resources"]
        assert wait_step["state"] == "skipped"
        assert wait_step["message"].startswith(
            "skipped after 5m (retry-without-fail limit, the default): waiting for"
        )
        assert blocker in wait_step["message"]
        assert _steps(operation)["Delete_Module_Manifests"]["state"] == "done"
        assert kube.deployment(free.namespace, free.operator) is None
        until(lambda: kube.crd(free.crd.name) is None, f"CRD {free.crd.name} gone")
        assert kube.config_map(fleet.system_namespace, f"inventory-{free.name}") is None
        assert kube.deployment(held.namespace, held.operator) is not None
        assert kube.crd(held.crd.name) is not None
        status = world.runtime_status(runtime)
        assert (status["state"], status["reason"]) == ("Deleting", "WaitingForResources")
        assert blocker in status["message"]
        assert free.name not in status["message"]

        # The user's resource gone, the next sync's new deprovision finishes: nothing is left.
        kube.delete_resource(held.crd, users, "mine")

        def succeeded() -> bool:  # (each sync bounded while the server deletes the CRDs)
            ran = world.sync("--allow-deletions", runtime)
            assert ran.exit_code == 0, ran.output
            return bool(_latest_operation(world, runtime)["state"] == "succeeded")

        until(succeeded, "the new deprovision succeeds")
        last = _latest_operation(world, runtime)
        assert last["id"] != first["id"]
        assert (last["type"], last["state"]) == ("deprovision", "succeeded")
        assert _steps(last)["Wait_For_Managed_Resources"]["state"] == "done"
        assert kube.deployment(held.namespace, held.operator) is None
        until(lambda: kube.crd(held.crd.name) is None, f"CRD {held.crd.name} gone")
        statuses = world.reconciler_json("status")["items"]
        assert runtime not in [item["runtime"] for item in statuses]
    finally:
        kube.delete_namespace(users)
