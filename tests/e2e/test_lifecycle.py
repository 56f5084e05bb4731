"""A module's life on a real API server, through ``reconciler sync`` as a user runs it: install
with a dependency and CRDs first (L1), Ready only once the operator Deployment is Available
(L2), the default configuration created once and never reverted (L3), read as kubectl reads
YAML, an upgrade that prunes from the inventory only (L4) and leaves a copied label alone (S1),
a downgrade refused (L5), the deletion brake (S5), a removal blocked by a user's resource that
reports Deleting and names it (L8, L11), then deletes the manifest with its CRD last."""

from __future__ import annotations

from typing import Any

from tests.support.e2e_harness import (
    DEFAULT_SPEC_AS_KUBECTL_READS_IT,
    MANAGED_BY,
    RUNTIME_LABEL,
    until,
)
from tests.support.e2e_world import World


def _calls(world: World, since: int) -> list[tuple[str, str, str]]:
    """(verb, resource, name) of every request since the audit mark ``since``, in order."""
    return [
        (e["verb"], e["objectRef"]["resource"], e["objectRef"].get("name", ""))
        for e in world.control_plane.audit_events(since)
        if "objectRef" in e and e["objectRef"].get("resource") != "events"
    ]


def _states(world: World, runtime: str) -> dict[str, tuple[str, str]]:
    return {name: (m["state"], m["reason"]) for name, m in world.status(runtime).items()}


def test_install_upgrade_downgrade_and_blocked_removal_of_a_module_with_a_dependency(
    world: World,
) -> None:
    fleet, kube = world.fleet, world.kube
    base = fleet.module("base")
    app = fleet.module("app", versions=("1.0.0", "2.0.0"), depends_on=(base.name,), default=True)
    fleet.channel.update({base.name: "1.0.0", app.name: "1.0.0"})
    runtime = fleet.runtime("rt", [{"name": app.name}])
    audits = world.control_plane.audit_log is not None

    # L1: the dependency first, its CRD applied and Established before the rest; L2: its operator
    # is not Available (no kubelet runs), so it is Processing and the dependent module waits.
    mark = world.control_plane.audit_mark() if audits else 0
    first = world.sync()
    assert first.exit_code == 0, first.output
    assert "in progress: waiting" in first.output
    assert _states(world, runtime) == {
        base.name: ("Processing", "WaitingForOperator"),
        app.name: ("Processing", "WaitingForDependency"),
    }
    crd = kube.crd(base.crd.name)
    assert crd is not None
    assert _condition(crd, "Established").get("status") == "True"
    assert kube.deployment(base.namespace, base.operator) is not None
    assert kube.crd(app.crd.name) is None, "a module waits for its dependency to be Ready"
    if audits:
        calls = _calls(world, mark)
        crd_applied = calls.index(("patch", "customresourcedefinitions", base.crd.name))
        rest = calls.index(("patch", "configmaps", base.config_map("1.0.0")))
        assert crd_applied < rest < calls.index(("patch", "deployments", base.operator))
        waited = [c[:2] for c in calls[crd_applied:rest]]
        assert ("get", "customresourcedefinitions") in waited, "read back until Established"

    # The dependency's operator becomes Available: the dependent module is installed; then its own.
    kube.make_available(base.namespace, base.operator)
    assert world.sync().exit_code == 0
    assert _states(world, runtime) == {
        base.name: ("Ready", "Ready"),
        app.name: ("Processing", "WaitingForOperator"),
    }
    kube.make_available(app.namespace, app.operator)
    done = world.sync()
    assert done.exit_code == 0, done.output
    assert "provision" in done.output
    assert "succeeded" in done.output
    assert _states(world, runtime) == {base.name: ("Ready", "Ready"), app.name: ("Ready", "Ready")}
    assert world.runtime_status(runtime)["state"] == "Ready"

    # L3 and YAML: the default configuration as kubectl would have sent it; a user's edit stays.
    default = kube.resource(app.crd, app.namespace, "default")
    assert default is not None
    assert default["spec"] == DEFAULT_SPEC_AS_KUBECTL_READS_IT
    kube.patch_resource(app.crd, app.namespace, "default", {"spec": {"size": 5, "debug": False}})
    assert world.sync().exit_code == 0
    edited = kube.resource(app.crd, app.namespace, "default")
    assert edited is not None
    assert (edited["spec"]["size"], edited["spec"]["debug"]) == (5, False)

    # S1: a user copies our ConfigMap, labels and all; it is in no inventory.
    settings = kube.config_map(app.namespace, app.config_map("1.0.0"))
    assert settings is not None
    copied_labels = dict(settings["metadata"]["labels"])
    assert copied_labels[RUNTIME_LABEL] == runtime
    assert copied_labels[MANAGED_BY] == "reconciler"
    copy = {"metadata": {"name": "copy-of-settings", "labels": copied_labels}, "data": {"a": "b"}}
    kube.create_config_map(app.namespace, copy)

    # L4: the upgrade applies 2.0.0 and prunes the ConfigMap 2.0.0 no longer ships, nothing else.
    fleet.channel[app.name] = "2.0.0"
    upgrade = world.sync()
    assert upgrade.exit_code == 0, upgrade.output
    assert kube.config_map(app.namespace, app.config_map("1.0.0")) is None
    assert kube.config_map(app.namespace, app.config_map("2.0.0")) is not None
    assert kube.config_map(app.namespace, "copy-of-settings") is not None
    operator = kube.deployment(app.namespace, app.operator)
    assert operator is not None
    assert operator["metadata"]["labels"]["app.kubernetes.io/version"] == "2.0.0"
    assert _states(world, runtime)[app.name] == ("Processing", "WaitingForOperator")
    kube.make_available(app.namespace, app.operator)
    assert world.sync().exit_code == 0
    assert world.status(runtime)[app.name]["version"] == "2.0.0"
    upgraded = kube.resource(app.crd, app.namespace, "default")
    assert upgraded is not None
    assert upgraded["spec"]["size"] == 5, "never reverted (L3)"

    # L5: back to 1.0.0 in git is a downgrade of what runs: refused, nothing changes.
    fleet.channel[app.name] = "1.0.0"
    refused = world.sync()
    assert refused.exit_code == 0, refused.output
    assert _states(world, runtime)[app.name] == ("Warning", "DowngradeNotSupported")
    assert kube.config_map(app.namespace, app.config_map("1.0.0")) is None
    running = kube.deployment(app.namespace, app.operator)
    assert running is not None
    assert running["metadata"]["labels"]["app.kubernetes.io/version"] == "2.0.0"
    fleet.channel[app.name] = "2.0.0"
    assert world.sync().exit_code == 0

    # A user's resource of the module's kind, in a namespace of the user's.
    users = f"e2e-{fleet.suffix}-apps"
    kube.create_namespace(users)
    try:
        kube.create_resource(app.crd, users, app.crd.instance("mine", size=1))
        _remove(world, runtime, base.name, app.name, users)
    finally:
        kube.delete_namespace(users)


def _remove(world: World, runtime: str, base: str, app: str, users: str) -> None:
    fleet, kube = world.fleet, world.kube
    base_module, app_module = fleet.modules[base], fleet.modules[app]
    fleet.runtimes[runtime]["modules"] = []

    # S5: two modules leave the runtime, one deletion is allowed: nothing is done.
    fleet.max_deletions = 1
    held = world.sync()
    assert held.exit_code == 3, held.output
    assert base in held.output
    assert app in held.output
    assert kube.resource(app_module.crd, app_module.namespace, "default") is not None

    # L8: the default configuration we created goes; the user's resource blocks the rest, the
    # module is Deleting and names it, the operator keeps running.
    blocked = world.sync("--allow-deletions", runtime)
    assert blocked.exit_code in (0, 1), blocked.output
    blocker = f"{app_module.crd.kind}/{users}/mine"
    assert blocker in blocked.output
    assert kube.resource(app_module.crd, app_module.namespace, "default") is None
    assert kube.deployment(app_module.namespace, app_module.operator) is not None
    assert kube.crd(app_module.crd.name) is not None
    states = world.status(runtime)
    assert (states[app]["state"], states[app]["reason"]) == ("Deleting", "WaitingForResources")
    assert blocker in states[app]["message"]
    assert world.runtime_status(runtime)["state"] == "Deleting"
    warnings = [e for e in kube.events(users) if e["reason"] == "DeletionBlocked"]
    assert warnings
    assert warnings[0]["type"] == "Warning"

    # The user deletes their resource: the manifest goes, in reverse order, the CRD last, then
    # the dependency; the copied ConfigMap stays (S1).
    kube.delete_resource(app_module.crd, users, "mine")
    audits = world.control_plane.audit_log is not None
    mark = world.control_plane.audit_mark() if audits else 0
    world.sync_until_removed(runtime)
    for module in (app_module, base_module):
        assert kube.deployment(module.namespace, module.operator) is None

        # a deleted CRD is gone once the server has dropped its instances (asynchronously)
        def crd_gone(name: str = module.crd.name) -> bool:
            return kube.crd(name) is None

        until(crd_gone, f"CRD {module.crd.name} gone")
        assert kube.config_map(fleet.system_namespace, f"inventory-{module.name}") is None
    assert kube.config_map(app_module.namespace, "copy-of-settings") is not None
    if audits:
        deleted = [(r, n) for verb, r, n in _calls(world, mark) if verb == "delete"]
        app_crd = deleted.index(("customresourcedefinitions", app_module.crd.name))
        assert deleted.index(("deployments", app_module.operator)) < app_crd
        base_crd = deleted.index(("customresourcedefinitions", base_module.crd.name))
        assert deleted.index(("deployments", base_module.operator)) > app_crd, deleted
        assert deleted.index(("deployments", base_module.operator)) < base_crd


def _condition(body: dict[str, Any], kind: str) -> dict[str, Any]:
    for condition in (body.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            found: dict[str, Any] = condition
            return found
    return {}


def test_a_module_is_applied_whole_in_one_sync_once_its_crd_is_established(world: World) -> None:
    """A real API server establishes a new CRD a little after it answers the apply (about 0.1 s
    here): the rest of the module waits for that, in the same sync, not for the next retry."""
    fleet, kube = world.fleet, world.kube
    modules = [fleet.module(base) for base in ("one", "two", "three")]
    fleet.channel.update({m.name: "1.0.0" for m in modules})
    runtime = fleet.runtime("rt", [{"name": m.name} for m in modules])

    result = world.sync()

    assert result.exit_code == 0, result.output
    assert _states(world, runtime) == {
        m.name: ("Processing", "WaitingForOperator") for m in modules
    }, result.output
    for module in modules:
        assert kube.deployment(module.namespace, module.operator) is not None
