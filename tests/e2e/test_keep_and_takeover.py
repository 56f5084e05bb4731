"""Upgrades as operators ship them, on a real API server through ``reconciler diff`` and
``reconciler sync``: a module installed with ``kubectl apply`` (client-side) is adopted and taken
over from kubectl (a key its manifest lacks is removed, kubectl's manager and last-applied
annotation go, and ``diff`` is then up to date); an object marked ``reconciler.dev/prune:
disabled`` that the next version drops is kept: released, not deleted. (A chart's Secret written
with ``stringData``: tests/cluster/test_kube_charts.py.)"""

from __future__ import annotations

import json
from typing import Any

from tests.support.e2e_harness import MANAGED_BY, MODULE_LABEL, TestModule, reconciler
from tests.support.e2e_world import World

CLIENT_SIDE = "kubectl-client-side-apply"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def _kubectl_apply(world: World, module: TestModule, version: str) -> None:
    """What ``kubectl apply -f`` (client-side) of an older manifest did: every object created by
    ``kubectl-client-side-apply`` with its last-applied annotation, the ConfigMap with a key
    ``legacy`` that the module's manifest no longer has."""
    kube = world.kube
    kube.create_namespace(module.namespace)
    for body in module.objects(version):
        if body["kind"] == "ConfigMap" and body["metadata"]["name"] == module.config_map(version):
            body["data"]["legacy"] = "from an older manifest"
        elif body["kind"] != "Deployment":
            continue  # the CRD and the rest: left to the sync
        body["metadata"]["namespace"] = module.namespace
        body["metadata"]["annotations"] = {LAST_APPLIED: json.dumps(body, sort_keys=True)}
        create = kube.create_config_map if body["kind"] == "ConfigMap" else kube.create_deployment
        create(module.namespace, body, field_manager=CLIENT_SIDE)


def _managers(body: dict[str, Any] | None) -> set[str]:
    assert body is not None
    return {e["manager"] for e in body["metadata"].get("managedFields") or []}


def test_a_kubectl_installed_module_is_taken_over_and_its_marked_object_kept(
    world: World,
) -> None:
    fleet, kube = world.fleet, world.kube
    kept = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "kept", "annotations": {"reconciler.dev/prune": "disabled"}},
        "data": {"a": "1"},
    }
    app = fleet.module("app", versions=("1.0.0", "2.0.0"), dropped=(kept,))
    fleet.channel[app.name] = "1.0.0"
    runtime = fleet.runtime("rt", [{"name": app.name}])
    _kubectl_apply(world, app, "1.0.0")
    settings = app.config_map("1.0.0")
    flags = ("--runtime", runtime, *world.cluster_flags())

    planned = reconciler("diff", fleet.write(), *flags, env=world.env)
    assert planned.exit_code == 1, planned.output
    assert f"metadata.managedFields: '{CLIENT_SIDE}' -> 'reconciler'" in planned.stdout
    adopted = world.sync()
    assert adopted.exit_code == 0, adopted.output
    taken = kube.config_map(app.namespace, settings)
    assert taken is not None
    assert taken["data"] == {"version": "1.0.0"}  # kubectl's `legacy` went with the takeover
    assert CLIENT_SIDE not in _managers(taken)
    assert LAST_APPLIED not in (taken["metadata"].get("annotations") or {})
    assert CLIENT_SIDE not in _managers(kube.deployment(app.namespace, app.operator))
    kube.make_available(app.namespace, app.operator)
    assert world.sync().exit_code == 0

    steady = reconciler("diff", fleet.write(), *flags, env=world.env)
    assert steady.exit_code == 0, steady.output

    fleet.channel[app.name] = "2.0.0"
    upgrade_plan = reconciler("diff", fleet.write(), *flags, env=world.env)
    assert f"= ConfigMap/{app.namespace}/kept (kept: released, not deleted)" in upgrade_plan.stdout
    assert f"- ConfigMap/{app.namespace}/{settings}" in upgrade_plan.stdout
    upgraded = world.sync()
    assert upgraded.exit_code == 0, upgraded.output
    kept_note = f"ConfigMap/{app.namespace}/kept is kept (reconciler.dev/prune: disabled)"
    assert kept_note in upgraded.output
    assert (
        "is kept (reconciler.dev/prune: disabled): released, not deleted" in (upgraded.output)
        or "Processing" in upgraded.output
    )
    released = kube.config_map(app.namespace, "kept")
    assert released is not None
    labels = released["metadata"].get("labels") or {}
    assert MANAGED_BY not in labels
    assert MODULE_LABEL not in labels
    assert kube.config_map(app.namespace, settings) is None
