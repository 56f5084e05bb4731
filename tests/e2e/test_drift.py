"""No drift after an install on a real API server.

The server rewrites what we apply: it canonicalises resource quantities (``cpu: 1000m`` comes
back as ``1``, ``memory: 1024Mi`` as ``1Gi``), defaults ``protocol: TCP`` on container and
Service ports (and keys its ``managedFields`` by port and protocol), drops empty lists, and
defaults many fields (``imagePullPolicy``, ``strategy``, ``sessionAffinity`` ...). None of it is
drift: once a module is installed, ``diff`` shows it unchanged and a second ``sync`` writes
nothing (counted from the API server's audit log). Also with the real prometheus-operator
manifests of ``../shared/corpus`` (their very large CRDs, a Service, a ServiceMonitor).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.e2e_harness import CRD, TestModule, reconciler
from tests.support.e2e_world import World
from tests.support.tools import require_shared

#: Requests that change something (the audit log's verbs).
WRITES = ("create", "update", "patch", "delete", "deletecollection")


@dataclass(frozen=True, slots=True)
class ManifestModule(TestModule):
    """A module whose manifest is given whole (every version the same), its operator named."""

    __test__ = False

    manifest: tuple[dict[str, Any], ...] = ()
    operator_name: str = ""

    @property
    def operator(self) -> str:
        return self.operator_name or f"{self.name}-operator"

    def objects(self, version: str) -> list[dict[str, Any]]:
        return [copy.deepcopy(body) for body in self.manifest]


def _rewritten_by_the_server(module: str, crd: CRD) -> list[dict[str, Any]]:
    """Objects written as people write them, which the server answers in other words."""
    labels = {"app": f"{module}-operator"}
    container = {
        "name": "manager",
        "image": "example.invalid/operator:1.0.0",
        "args": [],
        "ports": [{"containerPort": 8080, "name": "http"}, {"containerPort": 9443}],
        "resources": {
            "limits": {"cpu": "1000m", "memory": "1024Mi"},
            "requests": {"cpu": 0.5, "memory": "0.5Gi", "ephemeral-storage": "1000M"},
        },
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": f"{module}-operator",
            "labels": {"app.kubernetes.io/version": "1.0.0"},
        },
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [container],
                    "volumes": [{"name": "scratch", "emptyDir": {"sizeLimit": "2048Mi"}}],
                },
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"{module}-metrics"},
        "spec": {"selector": labels, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]},
    }
    return [crd.body(), deployment, service]


def _writes(world: World, since: int) -> list[tuple[str, str, str]]:
    """(verb, resource, name) of every write since the audit mark ``since`` (Events aside)."""
    return [
        (e["verb"], e["objectRef"]["resource"], e["objectRef"].get("name", ""))
        for e in world.control_plane.audit_events(since)
        if e.get("verb") in WRITES
        and "objectRef" in e
        and e["objectRef"].get("resource") != "events"
    ]


def _assert_no_drift(world: World, module: TestModule, runtime: str) -> None:
    """``diff`` shows the module unchanged; a second ``sync`` writes nothing."""
    repo = world.fleet.write()
    diff = reconciler("diff", repo, "--runtime", runtime, *world.cluster_flags(), env=world.env)
    assert diff.exit_code == 0, diff.output
    assert "Drift" not in diff.output, diff.output
    assert "up to date" in diff.output, diff.output
    mark = world.control_plane.audit_mark()
    again = world.sync()
    assert again.exit_code == 0, again.output
    assert _writes(world, mark) == []
    state = world.status(runtime)[module.name]
    assert (state["state"], state["reason"]) == ("Ready", "Ready"), state


def test_what_the_server_rewrites_is_no_drift_and_a_second_sync_writes_nothing(
    world: World,
) -> None:
    fleet = world.fleet
    name = f"rewrite-{fleet.suffix}"
    crd = CRD(f"e2e{fleet.suffix}.example.io", "RewriteConfig")
    module = ManifestModule(name, crd, manifest=tuple(_rewritten_by_the_server(name, crd)))
    fleet.modules[name] = module
    fleet.channel[name] = "1.0.0"
    runtime = fleet.runtime("rt", [{"name": name}])

    world.install(module, runtime)

    _assert_no_drift(world, module, runtime)


@dataclass(frozen=True, slots=True)
class CorpusModule(TestModule):
    """The prometheus-operator manifests of the corpus as one module (version 0.93.0), read by
    the product's own YAML reader as written (their YAML is not all PyYAML's): its objects in
    the module's namespace (they name ``default``), its cluster-wide RBAC names made private."""

    __test__ = False

    folder: Path = Path()

    @property
    def operator(self) -> str:
        return "prometheus-operator"

    def files(self) -> dict[str, str]:
        files = TestModule.files(self)  # (slots: no zero-argument super)
        files[f"modules/{self.name}/0.93.0/manifest.yaml"] = "\n---\n".join(self._texts())
        return files

    def _texts(self) -> list[str]:
        rbac = {
            "cluster-role.yaml": ("  name: prometheus-operator\nrules:",),
            "cluster-role-binding.yaml": (
                "  name: prometheus-operator\nroleRef:",
                "  kind: ClusterRole\n  name: prometheus-operator\n",
            ),
        }
        texts = [p.read_text(encoding="utf-8") for p in sorted(self.folder.glob("crds/*.yaml"))]
        for path in sorted(self.folder.glob("operator/*.yaml")):
            text = path.read_text(encoding="utf-8")
            text = text.replace("namespace: default", f"namespace: {self.namespace}")
            for old in rbac.get(path.name.removeprefix("prometheus-operator-"), ()):
                text = text.replace(old, old.replace("prometheus-operator", self.rbac_name))
            texts.append(text)
        return texts

    @property
    def rbac_name(self) -> str:
        return f"{self.name}-operator"

    def crd_names(self) -> list[str]:
        return [
            f"{p.name.partition('_')[2].removesuffix('.yaml')}.monitoring.coreos.com"
            for p in sorted(self.folder.glob("crds/*.yaml"))
        ]


def test_the_prometheus_operator_manifests_show_no_drift_once_installed(world: World) -> None:
    folder = require_shared("corpus", "prometheus-operator")
    fleet = world.fleet
    name = f"prom-{fleet.suffix}"
    unused = CRD(f"e2e{fleet.suffix}.example.io", "Unused")
    module = CorpusModule(name, unused, versions=("0.93.0",), folder=folder)
    fleet.modules[name] = module
    fleet.channel[name] = "0.93.0"
    runtime = fleet.runtime("rt", [{"name": name}])
    try:
        world.install(module, runtime)
        _assert_no_drift(world, module, runtime)
    finally:
        for crd in module.crd_names():
            world.kube.delete_crd(crd)
        for kind in ("clusterrolebindings", "clusterroles"):
            world.kube.delete_cluster_rbac(kind, module.rbac_name)
