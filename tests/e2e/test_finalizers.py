"""L13, gone means gone, on a real API server through ``reconciler sync`` as a user runs it: a
module's default configuration carries a finalizer, as operators put on their custom resources.
Removing the module (from the runtime, or the runtime from git: a deprovision) deletes it and
then waits: the operator, the CRD and the inventory stay, the module (and the runtime) is
Deleting and names the object and its finalizer, until the test, acting as the operator,
removes the finalizer; the next sync finishes the removal. Before L13 the same sync deleted the
operator and the CRD and said success, leaving the custom resource Terminating for ever."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.support.e2e_harness import TestModule, until
from tests.support.e2e_world import World

CLEANUP = "e2e.example.io/cleanup"


def _installed(world: World) -> tuple[TestModule, str]:
    """A module with a default configuration and a runtime running it (Ready), the default
    configuration held by a finalizer: the module and the runtime."""
    fleet, kube = world.fleet, world.kube
    module = fleet.module("app", default=True)
    fleet.channel[module.name] = "1.0.0"
    runtime = fleet.runtime("rt", [{"name": module.name}])
    assert world.sync().exit_code == 0
    kube.make_available(module.namespace, module.operator)
    installed = world.sync()
    assert installed.exit_code == 0, installed.output
    assert world.status(runtime)[module.name]["state"] == "Ready"
    hold = {"metadata": {"finalizers": [CLEANUP]}}
    kube.patch_resource(module.crd, module.namespace, "default", hold)
    return module, runtime


@contextmanager
def _released_at_the_end(world: World, module: TestModule) -> Iterator[None]:
    """Whatever happens, the finalizer goes at the end (nothing stays stuck on the server)."""
    try:
        yield
    finally:
        if world.kube.resource(module.crd, module.namespace, "default") is not None:
            _release(world, module)


def _release(world: World, module: TestModule) -> None:
    """What the operator does once its cleanup is done: its finalizer removed."""
    release = {"metadata": {"finalizers": None}}
    world.kube.patch_resource(module.crd, module.namespace, "default", release)


def _default(world: World, module: TestModule) -> dict[str, Any]:
    found = world.kube.resource(module.crd, module.namespace, "default")
    assert found is not None
    return found


def _sync_until_named(world: World, runtime: str, text: str) -> str:
    """Sync until the output names ``text`` (a server still filling its cache of a new kind
    answers 429 at first: the operation retries then); the output that named it."""
    outputs: list[str] = []

    def names_it() -> bool:
        result = world.sync("--allow-deletions", runtime)
        assert result.exit_code in (0, 1), result.output
        outputs.append(result.output)
        return text in result.output

    until(names_it, f"a sync of {runtime} names {text}")
    return outputs[-1]


def _held_text(module: TestModule) -> str:
    subject = f"{module.crd.kind}/{module.namespace}/default"
    return f"{subject} is being deleted, waiting for finalizers {CLEANUP}"


def test_a_removal_waits_for_the_default_configuration_its_finalizer_holds(
    world: World,
) -> None:
    app, runtime = _installed(world)
    fleet, kube = world.fleet, world.kube
    fleet.runtimes[runtime]["modules"] = []

    with _released_at_the_end(world, app):
        _sync_until_named(world, runtime, _held_text(app))

        assert _default(world, app)["metadata"]["deletionTimestamp"]
        assert kube.deployment(app.namespace, app.operator) is not None, "it removes finalizers"
        crd = kube.crd(app.crd.name)
        assert crd is not None
        assert not crd["metadata"].get("deletionTimestamp")
        assert kube.config_map(fleet.system_namespace, f"inventory-{app.name}") is not None
        module = world.status(runtime)[app.name]
        assert (module["state"], module["reason"]) == ("Deleting", "WaitingForResources")
        assert _held_text(app) in module["message"]
        assert world.runtime_status(runtime)["state"] == "Deleting"
        still = world.sync("--allow-deletions", runtime)
        assert _held_text(app) in still.output
        assert kube.deployment(app.namespace, app.operator) is not None

        _release(world, app)
        world.sync_until_removed(runtime)

        assert kube.deployment(app.namespace, app.operator) is None
        until(lambda: kube.crd(app.crd.name) is None, f"CRD {app.crd.name} gone")
        assert kube.config_map(fleet.system_namespace, f"inventory-{app.name}") is None


def test_a_deprovision_waits_for_the_default_configuration_its_finalizer_holds(
    world: World,
) -> None:
    app, runtime = _installed(world)
    fleet, kube = world.fleet, world.kube
    fleet.runtimes.pop(runtime)

    with _released_at_the_end(world, app):
        _sync_until_named(world, runtime, _held_text(app))
        operation = world.reconciler_json("operations", "list", "--runtime", runtime)["items"][0]
        assert (operation["type"], operation["state"]) == ("deprovision", "in progress")
        steps = {t["name"]: t for s in operation["stages"] for t in s["steps"]}
        assert steps["Wait_For_Managed_Resources"]["state"] == "retrying"
        assert _held_text(app) in steps["Wait_For_Managed_Resources"]["message"]
        assert _default(world, app)["metadata"]["deletionTimestamp"]
        assert kube.deployment(app.namespace, app.operator) is not None
        assert kube.crd(app.crd.name) is not None

        _release(world, app)

        def latest() -> dict[str, Any]:
            items = world.reconciler_json("operations", "list", "--runtime", runtime)["items"]
            return dict(items[0])

        def succeeded() -> bool:  # (each sync bounded while the server deletes the CRDs)
            ran = world.sync("--allow-deletions", runtime)
            assert ran.exit_code == 0, ran.output
            return bool(latest()["state"] == "succeeded")

        until(succeeded, "the deprovision succeeds")
        last = latest()
        assert (last["type"], last["state"]) == ("deprovision", "succeeded")
        assert kube.deployment(app.namespace, app.operator) is None
        until(lambda: kube.crd(app.crd.name) is None, f"CRD {app.crd.name} gone")
        statuses = world.reconciler_json("status")["items"]
        assert runtime not in [item["runtime"] for item in statuses]


def test_an_object_of_the_module_still_terminating_keeps_the_module_deleting(
    world: World,
) -> None:
    """The module's own ConfigMap carries a finalizer (of some controller's): the removal
    deletes everything, and the module is gone only once the server shows the ConfigMap gone."""
    fleet, kube = world.fleet, world.kube
    app = fleet.module("app")
    fleet.channel[app.name] = "1.0.0"
    runtime = fleet.runtime("rt", [{"name": app.name}])
    assert world.sync().exit_code == 0
    kube.make_available(app.namespace, app.operator)
    assert world.sync().exit_code == 0
    assert world.status(runtime)[app.name]["state"] == "Ready"
    settings = app.config_map("1.0.0")
    kube.core.patch_namespaced_config_map(
        settings, app.namespace, {"metadata": {"finalizers": [CLEANUP]}}
    )
    fleet.runtimes[runtime]["modules"] = []
    held = (
        f"ConfigMap/{app.namespace}/{settings} is being deleted, waiting for finalizers {CLEANUP}"
    )
    try:
        first = _sync_until_named(world, runtime, held)

        assert "the removal finishes once they are gone" in first
        module = world.status(runtime)[app.name]
        assert (module["state"], module["reason"]) == ("Deleting", "WaitingForResources")
        assert kube.deployment(app.namespace, app.operator) is None
        assert kube.config_map(fleet.system_namespace, f"inventory-{app.name}") is not None

        kube.core.patch_namespaced_config_map(
            settings, app.namespace, {"metadata": {"finalizers": None}}
        )
        world.sync_until_removed(runtime)

        assert kube.config_map(app.namespace, settings) is None
        assert kube.config_map(fleet.system_namespace, f"inventory-{app.name}") is None
    finally:
        if kube.config_map(app.namespace, settings) is not None:
            kube.core.patch_namespaced_config_map(
                settings, app.namespace, {"metadata": {"finalizers": None}}
            )
