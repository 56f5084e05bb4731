"""Drift on a real API server: none after an install; the daemon's watches report exactly what
someone else changed or deleted, and never what the daemon did itself.

The server rewrites what we apply: it canonicalises resource quantities (``cpu: 1000m`` comes
back as ``1``, ``memory: 1024Mi`` as ``1Gi``), defaults ``protocol: TCP`` on container and
Service ports (and keys its ``managedFields`` by port and protocol), drops empty lists, and
defaults many fields (``imagePullPolicy``, ``strategy``, ``sessionAffinity`` ...). None of it is
drift: once a module is installed, ``diff`` shows it unchanged and a second ``sync`` writes
nothing (counted from the API server's audit log). Also with the real prometheus-operator
manifests of ``../shared/corpus`` (their very large CRDs, a Service, a ServiceMonitor).

The daemon (in this process, its watches on threads, no scheduler: whatever is put back was put
back because a watch woke the runtime, within seconds) reports a change of a field it manages by
another field manager (``kubectl scale`` through the scale subresource, ``kubectl set image``, a
patched ClusterRole's rules) and the deletion of its object by someone else, once each, naming
object, field and manager: log line, ``reconciler_drift_total`` by kind, a Warning ``Drift``
Event, ``/status``; and puts it back. Its own prunes (an upgrade dropping an object) and a module
removal are no drift: no report, no Event, the metric unchanged.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from reconciler.cluster.kube import k8s_client
from tests.support.e2e_harness import CRD, TestModule, reconciler, until
from tests.support.e2e_world import World
from tests.support.tools import require_shared
from tests.support.watched_daemon import BOUNDED, Watched, watched_daemon

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


# -- drift seen by the daemon's watches ------------------------------------------------------------


@pytest.fixture
def watching(world: World, tmp_path: Path) -> Iterator[Watched]:
    yield from watched_daemon(world, tmp_path, watch=True)


def _reader(name: str, *verbs: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": list(verbs)}],
    }


@pytest.fixture
def installed(
    watching: Watched, caplog: pytest.LogCaptureFixture
) -> Iterator[tuple[Watched, str, TestModule]]:
    """One module (a ClusterRole among its objects) installed and Ready by the daemon; the
    daemon's warnings captured."""
    caplog.set_level(logging.WARNING, logger="reconciler.daemon")
    fleet, kube = watching.world.fleet, watching.world.kube
    role = f"drift-{fleet.suffix}-reader"
    module = fleet.module("op", shipped=(_reader(role, "get", "list"),))
    fleet.channel[module.name] = "1.0.0"
    runtime = fleet.runtime("rt", [{"name": module.name}])
    watching.commit("one module")
    watching.first_run()
    applied = partial(kube.deployment, module.namespace, module.operator)
    until(lambda: applied() is not None, "the operator applied (a CRD may be waited for)", BOUNDED)
    kube.make_available(module.namespace, module.operator)
    until(lambda: watching.state(runtime, module.name) == "Ready", "Ready", BOUNDED)
    try:
        yield watching, runtime, module
    finally:
        watching.daemon.watches.close()  # the cleanup's deletion is no news
        kube.delete_cluster_rbac("clusterroles", role)


def _drifts(watched: Watched, runtime: str) -> list[str]:
    found = next(r for r in watched.daemon.status()["runtimes"] if r["runtime"] == runtime)
    drifts: list[str] = found["drift"]
    return drifts


def _counted(watched: Watched, kind: str) -> float:
    sample = watched.daemon.metrics.registry.get_sample_value(
        "reconciler_drift_total", {"kind": kind}
    )
    return sample or 0.0


def _drift_events(watched: Watched, module: TestModule) -> list[str]:
    """The Warning Drift Events about the objects of ``module`` (its cluster-scoped ones'
    are in ``default``, as kubectl looks for them)."""
    kube, role = watched.world.kube, _role(watched)
    return [
        e["message"]
        for namespace in (module.namespace, "default")
        for e in kube.events(namespace)
        if e["reason"] == "Drift"
        and e["type"] == "Warning"
        and (namespace == module.namespace or e["involvedObject"]["name"] == role)
    ]


def _role(watched: Watched) -> str:
    """The name of the ClusterRole the module of :func:`installed` ships."""
    return f"drift-{watched.world.fleet.suffix}-reader"


def _drift_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if ": drift: " in r.getMessage()]


def _reported_once(
    installed: tuple[Watched, str, TestModule], kind: str, said: str, caplog: Any
) -> None:
    """``said`` reported once: in /status, one log line, the metric of ``kind``, one Event."""
    watched, runtime, module = installed
    until(lambda: _drifts(watched, runtime) == [said], "the drift in /status", BOUNDED)
    assert _drift_lines(caplog) == [f"runtime {runtime}: drift: {said}"]
    assert _counted(watched, kind) == 1.0
    assert _drift_events(watched, module) == [f"{said}; reconciling"]


def _replicas(watched: Watched, module: TestModule) -> int:
    found = watched.world.kube.deployment(module.namespace, module.operator)
    return int(found["spec"]["replicas"]) if found is not None else -1


def _rbac(watched: Watched) -> Any:
    return k8s_client.RbacAuthorizationV1Api(watched.world.kube.api)


def test_kubectl_scale_is_one_drift_report_naming_field_and_manager_and_is_reverted(
    installed: tuple[Watched, str, TestModule], caplog: pytest.LogCaptureFixture
) -> None:
    watched, _, module = installed
    watched.world.kube.apps.patch_namespaced_deployment_scale(
        module.operator, module.namespace, {"spec": {"replicas": 3}}, field_manager="kubectl"
    )

    until(lambda: _replicas(watched, module) == 1, "replicas put back after a wake", BOUNDED)
    said = f"Deployment/{module.namespace}/{module.operator}: spec.replicas changed by kubectl"
    _reported_once(installed, "Deployment", said, caplog)


def test_kubectl_set_image_is_drift_of_that_containers_image(
    installed: tuple[Watched, str, TestModule], caplog: pytest.LogCaptureFixture
) -> None:
    watched, _, module = installed
    kube = watched.world.kube
    image = {"spec": {"template": {"spec": {"containers": [
        {"name": "manager", "image": "example.invalid/someone-else:9"}]}}}}  # fmt: skip
    kube.apps.patch_namespaced_deployment(
        module.operator, module.namespace, image, field_manager="kubectl-set"
    )

    def image_now() -> str:
        found = kube.deployment(module.namespace, module.operator) or {}
        return str(found["spec"]["template"]["spec"]["containers"][0]["image"])

    until(lambda: image_now().endswith(":1.0.0"), "the image put back after a wake", BOUNDED)
    field = "spec.template.spec.containers[name=manager].image"
    said = f"Deployment/{module.namespace}/{module.operator}: {field} changed by kubectl-set"
    _reported_once(installed, "Deployment", said, caplog)


def test_a_cluster_role_patched_by_someone_else_is_reported_and_restored_by_a_wake(
    installed: tuple[Watched, str, TestModule], caplog: pytest.LogCaptureFixture
) -> None:
    rbac, role = _rbac(installed[0]), _role(installed[0])
    wider = _reader(role, "get", "list", "delete")

    rbac.patch_cluster_role(role, {"rules": wider["rules"]}, field_manager="kubectl-patch")

    def verbs() -> list[str]:
        return list(rbac.read_cluster_role(role).rules[0].verbs)

    until(lambda: verbs() == ["get", "list"], "the rules put back after a wake", BOUNDED)
    _reported_once(
        installed, "ClusterRole", f"ClusterRole/{role}: rules changed by kubectl-patch", caplog
    )


def test_a_cluster_role_deleted_by_someone_else_is_reported_and_recreated(
    installed: tuple[Watched, str, TestModule], caplog: pytest.LogCaptureFixture
) -> None:
    rbac, role = _rbac(installed[0]), _role(installed[0])

    rbac.delete_cluster_role(role)

    def there() -> bool:
        return any(r.metadata.name == role for r in rbac.list_cluster_role().items)

    until(there, "the ClusterRole re-created after a wake", BOUNDED)
    _reported_once(installed, "ClusterRole", f"ClusterRole/{role} deleted", caplog)


def _seen_gone(watched: Watched, kind: str, namespace: str, name: str) -> bool:
    """Whether the watch of our objects of ``kind`` has taken the deletion of ``name`` (or
    was closed: no longer needed)."""
    for key, opened in list(watched.daemon.watches.open.items()):
        if key[2] == kind and key[3] == "ours" and (namespace, name) in opened.watch.cache:
            return False
    return True


def test_an_upgrade_that_drops_an_object_and_a_removal_are_no_drift(
    installed: tuple[Watched, str, TestModule], caplog: pytest.LogCaptureFixture
) -> None:
    watched, runtime, module = installed
    fleet, kube = watched.world.fleet, watched.world.kube
    role = _role(watched)
    fleet.modules[module.name] = module = TestModule(
        module.name, module.crd, versions=("1.0.0", "2.0.0"), shipped=module.shipped
    )
    fleet.channel[module.name] = "2.0.0"  # drops <name>-settings
    watched.commit("upgrade")
    assert watched.daemon.poll()

    def upgraded() -> bool:
        found = kube.deployment(module.namespace, module.operator) or {"metadata": {}}
        labels = found["metadata"].get("labels") or {}
        return bool(labels.get("app.kubernetes.io/version") == "2.0.0")

    watched.until_retried(upgraded, "the upgrade applied")
    kube.make_available(module.namespace, module.operator)
    until(lambda: watched.state(runtime, module.name) == "Ready", "upgraded", BOUNDED)
    settings = f"{module.name}-settings"
    assert kube.config_map(module.namespace, settings) is None  # pruned
    until(lambda: _seen_gone(watched, "ConfigMap", module.namespace, settings), "seen", BOUNDED)

    fleet.runtimes[runtime]["modules"] = []
    watched.commit("remove the module")
    assert watched.daemon.poll()
    watched.until_retried(
        lambda: kube.deployment(module.namespace, module.operator) is None, "removed"
    )
    watched.daemon.wait_idle()
    for kind, namespace, name in (
        ("Deployment", module.namespace, module.operator),
        ("ConfigMap", module.namespace, module.config_map("2.0.0")),
        ("ClusterRole", "", role),
    ):
        until(partial(_seen_gone, watched, kind, namespace, name), f"{kind} seen gone", BOUNDED)
    watched.daemon.watches.close()  # every event taken is handled (its thread joined)

    assert _drifts(watched, runtime) == []
    assert _drift_lines(caplog) == []
    assert _drift_events(watched, module) == []
    for kind in ("ConfigMap", "Deployment", "ClusterRole", "CustomResourceDefinition"):
        assert _counted(watched, kind) == 0.0
