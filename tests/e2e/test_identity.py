"""L12 on a real API server through ``reconciler sync``: an object is known by group, kind,
namespace and name, never by apiVersion.

- A version that ships its custom resource at the CRD's new storage version (``v1`` ->
  ``v2``), and a HorizontalPodAutoscaler at ``autoscaling/v2`` instead of ``autoscaling/v1``,
  updates both in place (same uid), ``diff`` showing an update, never a create and a delete.
- A default configuration created at ``v1alpha1`` whose CRD serves only ``v1beta1`` since is
  ours at removal, even with an inventory that still names ``v1alpha1`` (as an older reconciler
  left it): the removal finishes instead of waiting for it for ever.
- An object moved from one module to another in one commit is handed over (same uid, the
  receiver's labels and inventory), in either module order, present after the one sync.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

import pytest

from tests.support.e2e_harness import (
    CRD,
    DEFAULT_CONFIGURATION,
    MODULE_LABEL,
    Fleet,
    Kube,
    TestModule,
    reconciler,
    until,
)
from tests.support.e2e_world import World
from tests.support.identity_modules import autoscaler

#: (name, served, storage) of each version of a CRD.
CrdVersions = tuple[tuple[str, bool, bool], ...]


@dataclass(frozen=True, slots=True)
class ShippingModule(TestModule):
    """A test module whose versions ship more: its CRD at other versions (``crd_versions``),
    more objects (``extra``), its default configuration at another version (``default_at``)."""

    __test__ = False

    crd_versions: tuple[tuple[str, CrdVersions], ...] = ()
    extra: tuple[tuple[str, tuple[dict[str, Any], ...]], ...] = ()
    default_at: tuple[tuple[str, str], ...] = ()

    def objects(self, version: str) -> list[dict[str, Any]]:
        objects = TestModule.objects(self, version)
        versions = dict(self.crd_versions).get(version)
        if versions is not None:
            crd = next(o for o in objects if o["kind"] == "CustomResourceDefinition")
            schema = crd["spec"]["versions"][0]["schema"]
            crd["spec"]["versions"] = [
                {"name": n, "served": served, "storage": storage, "schema": schema}
                for n, served, storage in versions
            ]
        return objects + [copy.deepcopy(o) for o in dict(self.extra).get(version, ())]

    def files(self) -> dict[str, str]:
        files = TestModule.files(self)
        for version, at in self.default_at:
            files[f"modules/{self.name}/{version}/default.yaml"] = DEFAULT_CONFIGURATION.format(
                api_version=f"{self.crd.group}/{at}", kind=self.crd.kind
            )
        return files


def _shipping(fleet: Fleet, base: str, **options: Any) -> ShippingModule:
    """A :class:`ShippingModule` of the fleet, named as :meth:`Fleet.module` names them."""
    name = f"{base}-{fleet.suffix}"
    crd = CRD(f"e2e{fleet.suffix}.example.io", base.capitalize() + "Config")
    module = ShippingModule(name, crd, **options)
    fleet.modules[name] = module
    return module


def _custom(kube: Kube, crd: CRD, version: str, namespace: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = kube.custom.get_namespaced_custom_object(
        crd.group, version, namespace, crd.plural, name
    )
    return found


def _hpa(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    from reconciler.cluster.kube import k8s_client

    found = k8s_client.AutoscalingV2Api(kube.api).read_namespaced_horizontal_pod_autoscaler(
        name, namespace
    )
    body: dict[str, Any] = kube.api.sanitize_for_serialization(found)
    return body


def test_objects_shipped_at_a_new_api_version_are_updated_in_place(world: World) -> None:
    fleet, kube = world.fleet, world.kube
    crd = CRD(f"e2e{fleet.suffix}.example.io", "AppConfig")

    def main(version: str, size: int) -> dict[str, Any]:
        body = crd.instance("main", size=size)
        body["apiVersion"] = f"{crd.group}/{version}"
        return body

    probe = TestModule(f"app-{fleet.suffix}", crd)
    app = _shipping(
        fleet,
        "app",
        versions=("1.0.0", "2.0.0"),
        crd_versions=(("2.0.0", (("v1", True, False), ("v2", True, True))),),
        extra=(
            ("1.0.0", (main("v1", 1), autoscaler("autoscaling/v1", probe.operator, 70))),
            ("2.0.0", (main("v2", 2), autoscaler("autoscaling/v2", probe.operator, 70))),
        ),
    )
    fleet.channel[app.name] = "1.0.0"
    runtime = fleet.runtime("rt", [{"name": app.name}])
    world.install(app, runtime)
    resource_uid = _custom(kube, crd, "v1", app.namespace, "main")["metadata"]["uid"]
    hpa_uid = _hpa(kube, app.namespace, app.operator)["metadata"]["uid"]

    fleet.channel[app.name] = "2.0.0"
    repo = fleet.write()
    diff = reconciler("diff", repo, "--runtime", runtime, *world.cluster_flags(), env=world.env)
    assert diff.exit_code == 1, diff.output  # changes to make
    assert f"~ AppConfig/{app.namespace}/main" in diff.output, diff.output
    for subject in (f"AppConfig/{app.namespace}/main", f"HorizontalPodAutoscaler/{app.namespace}"):
        assert f"- {subject}" not in diff.output, diff.output
        assert f"+ {subject}" not in diff.output, diff.output
    upgraded = world.sync()
    assert upgraded.exit_code == 0, upgraded.output

    resource = _custom(kube, crd, "v2", app.namespace, "main")
    assert (resource["apiVersion"], resource["metadata"]["uid"], resource["spec"]) == (
        f"{crd.group}/v2",
        resource_uid,
        {"size": 2},
    )
    hpa = _hpa(kube, app.namespace, app.operator)
    assert hpa["metadata"]["uid"] == hpa_uid, "updated in place, not deleted and re-created"
    assert hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 70
    kube.make_available(app.namespace, app.operator)
    ready = world.sync()
    assert ready.exit_code == 0, ready.output
    assert world.status(runtime)[app.name]["state"] == "Ready"
    inventory = _inventory(kube, fleet, app.name)
    recorded = {(o["kind"], o["name"]): o["apiVersion"] for o in inventory["objects"]}
    assert recorded[("AppConfig", "main")] == f"{crd.group}/v2"
    assert recorded[("HorizontalPodAutoscaler", app.operator)] == "autoscaling/v2"


def _inventory(kube: Kube, fleet: Fleet, module: str) -> dict[str, Any]:
    found = kube.config_map(fleet.system_namespace, f"inventory-{module}")
    assert found is not None
    data: dict[str, Any] = json.loads(found["data"]["inventory.json"])
    return data


def test_a_default_configuration_at_a_version_no_longer_served_is_removed_with_its_module(
    world: World,
) -> None:
    fleet, kube = world.fleet, world.kube
    moved = (("v1alpha1", False, False), ("v1beta1", True, True))
    app = _shipping(
        fleet,
        "app",
        versions=("1.0.0", "2.0.0"),
        default=True,
        crd_versions=(("1.0.0", (("v1alpha1", True, True),)), ("2.0.0", moved)),
        default_at=(("1.0.0", "v1alpha1"), ("2.0.0", "v1beta1")),
    )
    fleet.channel[app.name] = "1.0.0"
    runtime = fleet.runtime("rt", [{"name": app.name}])
    world.install(app, runtime)
    uid = _custom(kube, app.crd, "v1alpha1", app.namespace, "default")["metadata"]["uid"]
    fleet.channel[app.name] = "2.0.0"
    world.install(app, runtime)
    default = _custom(kube, app.crd, "v1beta1", app.namespace, "default")
    assert default["metadata"]["uid"] == uid
    # What an older reconciler left (this one records v1beta1 now, tests/lifecycle): the
    # inventory names it at the version no longer served.
    inventory = _inventory(kube, fleet, app.name)
    inventory["defaultConfiguration"]["apiVersion"] = f"{app.crd.group}/v1alpha1"
    kube.core.patch_namespaced_config_map(
        f"inventory-{app.name}",
        fleet.system_namespace,
        {"data": {"inventory.json": json.dumps(inventory)}},
    )

    fleet.runtimes[runtime]["modules"] = []
    removed = world.sync()

    assert removed.exit_code == 0, removed.output
    assert app.name not in world.status(runtime), world.status(runtime)
    until(lambda: kube.crd(app.crd.name) is None, "the CRD deleted (its instances first)")
    assert kube.deployment(app.namespace, app.operator) is None


def _mover(fleet: Fleet, base: str, versions: tuple[str, ...], ships: str, home: str) -> Any:
    """A module whose version ``ships`` has the ConfigMap ``shared`` in namespace ``home``."""
    shared = {"apiVersion": "v1", "kind": "ConfigMap", "data": {"owner": base},
              "metadata": {"name": "shared", "namespace": home}}  # fmt: skip
    extra = tuple((v, (shared,)) for v in versions if v == ships)
    return _shipping(fleet, base, versions=versions, extra=extra)


@pytest.mark.parametrize("first", ["giver", "taker"])
def test_an_object_moved_to_another_module_in_one_commit_is_handed_over(
    world: World, first: str
) -> None:
    """Modules that depend on none are processed by name: the one named first goes first."""
    fleet, kube = world.fleet, world.kube
    giver_base, taker_base = ("agiver", "btaker") if first == "giver" else ("bgiver", "ataker")
    home = f"{giver_base}-{fleet.suffix}"
    giver = _mover(fleet, giver_base, ("1.0.0",), ships="1.0.0", home=home)
    taker = _mover(fleet, taker_base, ("1.0.0",), ships="", home=home)
    fleet.channel.update({giver.name: "1.0.0", taker.name: "1.0.0"})
    runtime = fleet.runtime("rt", [{"name": giver.name}, {"name": taker.name}])
    world.install(giver, runtime)
    world.install(taker, runtime)
    uid = kube.config_map(home, "shared")["metadata"]["uid"]  # type: ignore[index]

    # One commit: the giver's 2.0.0 drops it (its 1.0.0 folder goes, C4), the taker's ships it.
    _mover(fleet, giver_base, ("2.0.0",), ships="", home=home)
    _mover(fleet, taker_base, ("1.0.0", "2.0.0"), ships="2.0.0", home=home)
    fleet.channel.update({giver.name: "2.0.0", taker.name: "2.0.0"})
    moved = world.sync()

    assert moved.exit_code == 0, moved.output
    shared = kube.config_map(home, "shared")
    assert shared is not None, "present after the sync that moved it"
    assert shared["metadata"]["uid"] == uid, "handed over, not deleted and re-created"
    assert shared["metadata"]["labels"][MODULE_LABEL] == taker.name
    assert shared["data"] == {"owner": taker_base}
    listed = {o["name"] for o in _inventory(kube, fleet, taker.name)["objects"]}
    assert "shared" in listed
    assert "shared" not in {o["name"] for o in _inventory(kube, fleet, giver.name)["objects"]}
