"""Opt-in health of more than the operator, on a real API server through ``reconciler sync``:
a module version names objects in ``healthChecks`` (Flux's ``healthChecks``), judged as kstatus
judges them. A named Job keeps the module Processing until it is Complete, and makes it Error
(reason ``HealthCheckFailed``, naming the condition, its reason and message) when it failed; a
named custom resource (here the default configuration) with ``Ready=False`` is waited for, with
``Stalled=True`` is an Error, and the module is Ready once it recovers; a default configuration
no check names does not count, whatever its status (seed decision 1). No kubelet and no Job
controller acts on these Jobs (``spec.managedBy`` hands them to the test): the test writes
their ``status`` as the Job controller would."""

from __future__ import annotations

from typing import Any

from tests.support.e2e_harness import TestModule
from tests.support.e2e_world import World
from tests.support.kube_workloads import finished_job_status, managed_job


def _finish_job(world: World, namespace: str, name: str, *, failed: bool) -> None:
    status = finished_job_status(failed=failed)
    world.kube.batch.patch_namespaced_job_status(name, namespace, {"status": status})


def _installed(world: World, module: TestModule, runtime: str) -> dict[str, Any]:
    """Sync, make the operator available (no kubelet), sync again: the module's status."""
    assert world.sync().exit_code == 0
    world.kube.make_available(module.namespace, module.operator)
    world.sync()
    return world.status(runtime)[module.name]


def _job_installed(world: World) -> tuple[TestModule, str, dict[str, Any]]:
    """A module whose version names its Job ``migrate``, installed on a runtime of its own:
    the module, the runtime, the module's status."""
    fleet = world.fleet
    app = fleet.module(
        "app",
        shipped=(managed_job("migrate"),),
        health_checks={"1.0.0": [{"kind": "Job", "name": "migrate"}]},
    )
    fleet.channel[app.name] = "1.0.0"
    runtime = fleet.runtime("rt", [{"name": app.name}])
    return app, runtime, _installed(world, app, runtime)


def test_a_named_job_keeps_the_module_processing_until_it_completes(world: World) -> None:
    app, runtime, waiting = _job_installed(world)

    assert (waiting["state"], waiting["reason"]) == ("Processing", "WaitingForHealthChecks")
    assert "Job migrate: Job in progress" in waiting["message"], waiting

    _finish_job(world, app.namespace, "migrate", failed=False)
    done = world.sync()

    assert done.exit_code == 0, done.output
    assert world.status(runtime)[app.name]["state"] == "Ready"


def test_a_named_job_that_failed_is_an_error_naming_its_condition(world: World) -> None:
    app, runtime, _ = _job_installed(world)
    _finish_job(world, app.namespace, "migrate", failed=True)

    failed = world.sync()

    assert failed.exit_code != 0, failed.output
    status = world.status(runtime)[app.name]
    assert (status["state"], status["reason"]) == ("Error", "HealthCheckFailed"), status
    assert (
        "Job migrate: Failed=True (BackoffLimitExceeded): Job has reached the specified backoff "
        "limit" in status["message"]
    ), status


def _conditions(*conditions: tuple[str, str, str, str]) -> dict[str, Any]:
    return {
        "status": {
            "conditions": [
                {"type": kind, "status": state, "reason": reason, "message": message}
                for kind, state, reason, message in conditions
            ]
        }
    }


def test_a_named_custom_resource_is_judged_as_kstatus_does_and_an_unnamed_one_not(
    world: World,
) -> None:
    fleet, kube = world.fleet, world.kube
    default = {"kind": "NamedConfig", "name": "default"}
    named = fleet.module("named", default=True, health_checks={"1.0.0": [default]})
    plain = fleet.module("plain", default=True)
    for module in (named, plain):
        fleet.channel[module.name] = "1.0.0"
    runtime = fleet.runtime("rt", [{"name": named.name}, {"name": plain.name}])
    assert world.sync().exit_code == 0
    for module in (named, plain):
        kube.make_available(module.namespace, module.operator)
        not_ready = _conditions(("Ready", "False", "Provisioning", "creating the database"))
        kube.patch_resource(module.crd, module.namespace, "default", not_ready)

    world.sync()

    status = world.status(runtime)
    assert (status[named.name]["state"], status[named.name]["reason"]) == (
        "Processing",
        "WaitingForHealthChecks",
    ), status[named.name]
    assert "Ready=False (Provisioning): creating the database" in status[named.name]["message"]
    assert status[plain.name]["state"] == "Ready"  # its default configuration does not count

    for module in (named, plain):
        stalled = _conditions(
            ("Ready", "False", "InvalidSpec", "spec.size must be odd"),
            ("Stalled", "True", "InvalidSpec", "spec.size must be odd"),
        )
        kube.patch_resource(module.crd, module.namespace, "default", stalled)
    failed = world.sync()

    assert failed.exit_code != 0, failed.output
    status = world.status(runtime)
    assert (status[named.name]["state"], status[named.name]["reason"]) == (
        "Error",
        "HealthCheckFailed",
    ), status[named.name]
    assert (
        "NamedConfig default: Stalled=True (InvalidSpec): spec.size must be odd"
        in status[named.name]["message"]
    )
    assert status[plain.name]["state"] == "Ready"

    kube.patch_resource(
        named.crd, named.namespace, "default", _conditions(("Ready", "True", "Ready", "ok"))
    )
    recovered = world.sync()

    assert recovered.exit_code == 0, recovered.output
    assert world.status(runtime)[named.name]["state"] == "Ready"
