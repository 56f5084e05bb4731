"""What the end-to-end tests are made of: the test's own ``kubectl`` on the real API server
(:class:`Kube`, the Kubernetes client's typed APIs, independent of the product's adapter), small
purpose-built modules (:class:`TestModule`: a CRD, a ConfigMap and an operator Deployment, named
after the test), a config repo on disk that a test edits between syncs (:class:`Fleet`), the
command line run as a user runs it (:func:`reconciler`), and waiting on a condition with a
deadline (:func:`until`). Used by the tests of ``tests/e2e``, their world
(:mod:`tests.support.e2e_world`) and ``bench/watch_bench.py``.
"""

from __future__ import annotations

import copy
import json
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner, Result

from reconciler.cli import cli
from reconciler.cluster.kube import k8s_client, k8s_config

API = "reconciler.dev/v1alpha1"
MANAGED_BY = "app.kubernetes.io/managed-by"
RUNTIME_LABEL = "reconciler.dev/runtime"
MODULE_LABEL = "reconciler.dev/module"
KUBECONFIG = "admin.yaml"


# -- waiting --------------------------------------------------------------------------------------


def until(condition: Callable[[], bool], what: str, seconds: float = 90.0) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after ``seconds`` (a hang)."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"not within {seconds:.0f} s: {what}"
        time.sleep(0.1)  # between two polls of a condition


# -- the test's own kubectl ------------------------------------------------------------------------


def _gone(error: Exception) -> bool:
    return getattr(error, "status", None) == 404


class Kube:
    """The test's view of the API server, through the client's typed APIs (not the product's
    adapter): what a user would see with kubectl, and the patches a kubelet would make."""

    def __init__(self, kubeconfig: Path) -> None:
        self.api = k8s_config.new_client_from_config(config_file=str(kubeconfig))
        self.core = k8s_client.CoreV1Api(self.api)
        self.apps = k8s_client.AppsV1Api(self.api)
        self.batch = k8s_client.BatchV1Api(self.api)
        self.crds = k8s_client.ApiextensionsV1Api(self.api)
        self.custom = k8s_client.CustomObjectsApi(self.api)

    def close(self) -> None:
        self.api.close()

    def _read(self, call: Callable[[], Any]) -> dict[str, Any] | None:
        try:
            found = call()
        except k8s_client.ApiException as error:
            if _gone(error):
                return None
            raise
        body: dict[str, Any] = self.api.sanitize_for_serialization(found)
        return body

    # reads
    def deployment(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._read(lambda: self.apps.read_namespaced_deployment(name, namespace))

    def config_map(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._read(lambda: self.core.read_namespaced_config_map(name, namespace))

    def job(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._read(lambda: self.batch.read_namespaced_job(name, namespace))

    def crd(self, name: str) -> dict[str, Any] | None:
        return self._read(lambda: self.crds.read_custom_resource_definition(name))

    def namespace(self, name: str) -> dict[str, Any] | None:
        return self._read(lambda: self.core.read_namespace(name))

    def resource(self, crd: CRD, namespace: str, name: str) -> dict[str, Any] | None:
        return self._read(
            lambda: self.custom.get_namespaced_custom_object(
                crd.group, "v1", namespace, crd.plural, name
            )
        )

    def events(self, namespace: str) -> list[dict[str, Any]]:
        found = self.core.list_namespaced_event(namespace)
        items: list[dict[str, Any]] = self.api.sanitize_for_serialization(found)["items"]
        return items

    # writes
    def create_namespace(self, name: str) -> None:
        self.core.create_namespace(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )

    def create_config_map(
        self, namespace: str, body: Mapping[str, Any], *, field_manager: str | None = None
    ) -> None:
        self.core.create_namespaced_config_map(namespace, dict(body), field_manager=field_manager)

    def create_deployment(
        self, namespace: str, body: Mapping[str, Any], *, field_manager: str | None = None
    ) -> None:
        self.apps.create_namespaced_deployment(namespace, dict(body), field_manager=field_manager)

    def create_crd(self, body: Mapping[str, Any]) -> None:
        self.crds.create_custom_resource_definition(dict(body))

    def create_resource(self, crd: CRD, namespace: str, body: Mapping[str, Any]) -> None:
        self.custom.create_namespaced_custom_object(
            crd.group, "v1", namespace, crd.plural, dict(body)
        )

    def patch_resource(self, crd: CRD, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object(
            crd.group, "v1", namespace, crd.plural, name, dict(patch)
        )

    def delete_resource(self, crd: CRD, namespace: str, name: str) -> None:
        self.custom.delete_namespaced_custom_object(crd.group, "v1", namespace, crd.plural, name)

    def make_available(self, namespace: str, name: str) -> None:
        """What a kubelet and the deployment controller would do (neither runs here): the
        Deployment's status says its replicas are all up at its current generation."""
        found = self.deployment(namespace, name)
        assert found is not None, f"no Deployment {namespace}/{name}"
        replicas = int(found["spec"].get("replicas", 1))
        status = {
            "observedGeneration": found["metadata"]["generation"],
            "replicas": replicas,
            "updatedReplicas": replicas,
            "readyReplicas": replicas,
            "availableReplicas": replicas,
            "conditions": [
                {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}
            ],
        }
        self.apps.patch_namespaced_deployment_status(name, namespace, {"status": status})

    def available(self, namespace: str, name: str) -> bool:
        found = self.deployment(namespace, name)
        if found is None:
            return False
        status = found.get("status") or {}
        return bool(
            status.get("observedGeneration") == found["metadata"]["generation"]
            and status.get("availableReplicas") == found["spec"].get("replicas", 1)
        )

    def delete_namespace(self, name: str) -> None:
        try:
            self.core.delete_namespace(name)
        except k8s_client.ApiException as error:
            if not _gone(error):
                raise

    def delete_cluster_rbac(self, resource: str, name: str) -> None:
        """Delete a ClusterRole or ClusterRoleBinding (``resource``: their plural)."""
        rbac = k8s_client.RbacAuthorizationV1Api(self.api)
        delete = {
            "clusterroles": rbac.delete_cluster_role,
            "clusterrolebindings": rbac.delete_cluster_role_binding,
        }[resource]
        try:
            delete(name)
        except k8s_client.ApiException as error:
            if not _gone(error):
                raise

    def delete_crd(self, name: str) -> None:
        try:
            self.crds.delete_custom_resource_definition(name)
        except k8s_client.ApiException as error:
            if not _gone(error):
                raise


# -- purpose-built modules -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CRD:
    """A namespaced custom resource kind of one test (group unique to the test)."""

    group: str
    kind: str

    @property
    def plural(self) -> str:
        return self.kind.lower() + "s"

    @property
    def name(self) -> str:
        return f"{self.plural}.{self.group}"

    def body(self) -> dict[str, Any]:
        schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        return {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": self.name},
            "spec": {
                "group": self.group,
                "scope": "Namespaced",
                "names": {"kind": self.kind, "plural": self.plural, "singular": self.kind.lower()},
                "versions": [
                    {
                        "name": "v1",
                        "served": True,
                        "storage": True,
                        "schema": {"openAPIV3Schema": schema},
                    }
                ],
            },
        }

    def instance(self, name: str, namespace: str | None = None, **spec: Any) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": name}
        if namespace is not None:
            metadata["namespace"] = namespace
        return {
            "apiVersion": f"{self.group}/v1",
            "kind": self.kind,
            "metadata": metadata,
            "spec": spec,
        }


#: The default configuration of a module, as its author writes it: plain scalars that YAML
#: readers disagree on, so the test can see what reached the server (kubectl's reading).
DEFAULT_CONFIGURATION = """\
apiVersion: {api_version}
kind: {kind}
metadata:
  name: default
spec:
  size: 3
  debug: y
  mode: 0777
  mask: 0o17
  limit: 1e3
  ratio: 1:20
  flags: on
  release: 1.2.0
"""
#: What the API server holds for :data:`DEFAULT_CONFIGURATION`'s spec (kubectl's reading).
DEFAULT_SPEC_AS_KUBECTL_READS_IT = {
    "size": 3,
    "debug": True,
    "mode": 511,
    "mask": 15,
    "limit": 1000,
    "ratio": "1:20",
    "flags": True,
    "release": "1.2.0",
}


@dataclass(frozen=True, slots=True)
class TestModule:
    """A module made for one test: a CRD of its own kind, a ConfigMap and the operator
    Deployment, in a namespace named after the module. Versions below 2.0.0 ship the ConfigMap
    ``<name>-settings``; 2.0.0 and later ship ``<name>-routes`` instead (an upgrade prunes one
    and adds the other)."""

    __test__ = False  # not a test class, whatever its name

    name: str
    crd: CRD
    versions: tuple[str, ...] = ("1.0.0",)
    depends_on: tuple[str, ...] = ()
    requires_downtime: tuple[str, ...] = ()
    default: bool = False
    #: Objects some versions ship besides the others (version -> objects), in their namespace.
    more_at: Mapping[str, Sequence[Mapping[str, Any]]] = field(default_factory=dict)
    #: More objects every version ships (after the others).
    shipped: tuple[dict[str, Any], ...] = ()
    #: More objects versions below 2.0.0 ship and 2.0.0 drops (as the settings ConfigMap).
    dropped: tuple[dict[str, Any], ...] = ()
    #: ``healthChecks`` by version (``spec.versions.<version>.healthChecks``).
    health_checks: Mapping[str, Sequence[Mapping[str, Any]]] = field(default_factory=dict)

    @property
    def namespace(self) -> str:
        return self.name

    @property
    def operator(self) -> str:
        return f"{self.name}-operator"

    def config_map(self, version: str) -> str:
        return f"{self.name}-settings" if version < "2" else f"{self.name}-routes"

    def objects(self, version: str) -> list[dict[str, Any]]:
        """The manifest of ``version``, in the order its author wrote it (CRD not first)."""
        labels = {"app": self.operator}
        deployment = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": self.operator, "labels": {"app.kubernetes.io/version": version}},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "containers": [
                            {"name": "manager", "image": f"example.invalid/{self.name}:{version}"}
                        ]
                    },
                },
            },
        }
        config_map = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": self.config_map(version)},
            "data": {"version": version},
        }
        more = self.shipped + (self.dropped if version < "2" else ())
        at = copy.deepcopy([dict(o) for o in self.more_at.get(version, ())])
        return [config_map, deployment, *at, self.crd.body(), *copy.deepcopy(more)]

    def files(self) -> dict[str, str]:
        spec: dict[str, Any] = {
            "namespace": self.namespace,
            "operator": {"kind": "Deployment", "name": self.operator},
        }
        if self.depends_on:
            spec["dependsOn"] = list(self.depends_on)
        versions: dict[str, dict[str, Any]] = {
            v: {"requiresDowntime": True} for v in self.requires_downtime
        }
        for version, checks in self.health_checks.items():
            versions.setdefault(version, {})["healthChecks"] = [dict(c) for c in checks]
        if versions:
            spec["versions"] = versions
        module = {
            "apiVersion": API,
            "kind": "Module",
            "metadata": {"name": self.name},
            "spec": spec,
        }
        files = {f"modules/{self.name}/module.yaml": yaml.safe_dump(module, sort_keys=False)}
        for version in self.versions:
            folder = f"modules/{self.name}/{version}"
            files[f"{folder}/manifest.yaml"] = yaml.safe_dump_all(
                self.objects(version), sort_keys=False
            )
            if self.default:
                files[f"{folder}/default.yaml"] = DEFAULT_CONFIGURATION.format(
                    api_version=f"{self.crd.group}/v1", kind=self.crd.kind
                )
        return files


# -- the config repo -------------------------------------------------------------------------------


@dataclass
class Fleet:
    """A config repo on disk for one test: modules, one channel ``regular``, runtimes reaching
    the real API server through ``spec.cluster.kubeconfigFile``; edited between syncs."""

    root: Path
    suffix: str
    modules: dict[str, TestModule] = field(default_factory=dict)
    channel: dict[str, str] = field(default_factory=dict)
    runtimes: dict[str, dict[str, Any]] = field(default_factory=dict)
    max_deletions: int = 5
    #: ``spec.operations`` of the Settings (e.g. ``{"timeouts": {"update": "2s"}}``).
    operations: dict[str, Any] = field(default_factory=dict)

    @property
    def system_namespace(self) -> str:
        return f"e2e-{self.suffix}-system"

    def module(self, base: str, **options: Any) -> TestModule:
        """A module ``<base>-<suffix>`` with a CRD kind of its own (group of this test)."""
        name = f"{base}-{self.suffix}"
        crd = CRD(f"e2e{self.suffix}.example.io", base.capitalize() + "Config")
        module = TestModule(name, crd, **options)
        self.modules[name] = module
        return module

    def runtime(self, base: str, modules: Sequence[Mapping[str, Any]], **spec: Any) -> str:
        name = f"{base}-{self.suffix}"
        self.runtimes[name] = {
            "channel": "regular",
            "cluster": {"kubeconfigFile": KUBECONFIG},
            "modules": [dict(m) for m in modules],
            **spec,
        }
        return name

    def write(self) -> Path:
        """Write every file (and remove those of modules or runtimes dropped since)."""
        for folder in ("modules", "runtimes", "channels"):
            if (self.root / folder).exists():
                subprocess.run(["rm", "-rf", str(self.root / folder)], check=True)
        settings: dict[str, Any] = {
            "apiVersion": API,
            "kind": "Settings",
            "metadata": {"name": "e2e"},
            "spec": {
                "systemNamespace": self.system_namespace,
                "deletionBrake": {"maxDeletionsPerSync": self.max_deletions},
            },
        }
        if self.operations:
            settings["spec"]["operations"] = self.operations
        files: dict[str, str] = {"reconciler.yaml": yaml.safe_dump(settings, sort_keys=False)}
        for module in self.modules.values():
            files.update(module.files())
        channel = {"apiVersion": API, "kind": "Channel", "metadata": {"name": "regular"},
                   "spec": {"modules": dict(self.channel)}}  # fmt: skip
        files["channels/regular.yaml"] = yaml.safe_dump(channel, sort_keys=False)
        for name, spec in self.runtimes.items():
            document = {"apiVersion": API, "kind": "Runtime", "metadata": {"name": name},
                        "spec": spec}  # fmt: skip
            files[f"runtimes/{name}.yaml"] = yaml.safe_dump(document, sort_keys=False)
        for relative, text in files.items():
            target = self.root / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        (self.root / "runtimes").mkdir(parents=True, exist_ok=True)
        return self.root


# -- the command line ------------------------------------------------------------------------------


def reconciler(*args: str | Path, env: Mapping[str, str] | None = None) -> Result:
    """``reconciler ARGS`` as a user runs it (in this process; exit status in ``exit_code``).
    A Python exception escaping the command (not its exit) fails the test with its traceback."""
    result = CliRunner().invoke(cli, [str(a) for a in args], env=dict(env or {}))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def json_of(result: Result) -> dict[str, Any]:
    """The JSON document a command printed (``-o json``)."""
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def modules_of(status: Mapping[str, Any], runtime: str) -> dict[str, dict[str, Any]]:
    """The modules of ``runtime`` in a ``RuntimeStatusList``, by name."""
    for item in status["items"]:
        if item["runtime"] == runtime:
            return {m["module"]: m for m in item["modules"]}
    raise AssertionError(f"no runtime {runtime} in the status")


def names(objects: Iterable[Mapping[str, Any]]) -> list[str]:
    return [str(o["metadata"]["name"]) for o in objects]
