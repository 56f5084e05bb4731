"""The sample fleet on the real API server of ``kube_control_plane``, for end-to-end tests of
``reconciler sync`` and ``reconciler status``.

:class:`KubeFleet` is a copy of ``sample-repo/`` and ``channels/`` made private to one test, so
that tests can share one API server: its modules' namespace (``kyma-system``), API groups and
cluster-wide names carry the test's suffix, the system namespace too, and the one runtime
reaches the server through ``kubeconfigFile`` (``--kubeconfig-dir`` is the fixture's folder).
No module is mandatory there, so a runtime runs the modules it lists and no other. The fleet
acts as a user too (creates and deletes objects with the admin kubeconfig), marks an operator
Deployment available (no kubelet runs Pods: its status is patched, as envtest users do) and
deletes everything it made at the end.
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner, Result

from reconciler.cli import cli
from reconciler.cluster.kube import KubeCluster, k8s_client, k8s_config
from reconciler.core.objects import ObjectRef
from tests.support.kube_control_plane import ControlPlane

ROOT = Path(__file__).parents[2]
API = "reconciler.dev/v1alpha1"
#: Cluster-wide names of the sample modules' objects that get the test's suffix.
CLUSTER_NAMES = ("keda-manager", "istio-controller-manager")
CLUSTER_SCOPED = (
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
    "Namespace",
    "PriorityClass",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
)


def until(condition: Callable[[], bool], seconds: float = 60.0) -> None:
    """Poll ``condition`` until it holds; fail after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.2)


@dataclass
class KubeFleet:
    """A private copy of the sample fleet, one runtime, on the real server."""

    control_plane: ControlPlane
    root: Path
    suffix: str = field(default_factory=lambda: uuid.uuid4().hex[:6])
    cluster: KubeCluster = field(init=False)

    def __post_init__(self) -> None:
        api_client = k8s_config.new_client_from_config(
            config_file=str(self.control_plane.kubeconfig)
        )
        self.cluster = KubeCluster(api_client, name="user")
        self._api_client = api_client
        shutil.copytree(ROOT / "sample-repo", self.repo)
        shutil.copytree(ROOT / "channels", self.root / "channels")
        for path in self.repo.rglob("*.yaml"):
            path.write_text(self._private(path.read_text(encoding="utf-8")), encoding="utf-8")
        for path in (self.repo / "runtimes").glob("*.yaml"):
            path.unlink()

    # -- names -----------------------------------------------------------------------------------

    @property
    def repo(self) -> Path:
        return self.root / "sample-repo"

    @property
    def runtime(self) -> str:
        return f"kube-{self.suffix}"

    @property
    def namespace(self) -> str:
        """The modules' namespace (``kyma-system`` in the sample repo)."""
        return f"kyma-{self.suffix}"

    @property
    def system_namespace(self) -> str:
        return f"rs-{self.suffix}"

    @property
    def group(self) -> str:
        """The sample modules' API group ``operator.kyma-project.io``, made private."""
        return f"operator.k{self.suffix}.kyma-project.io"

    def _private(self, text: str) -> str:
        text = text.replace("kyma-system", self.namespace)
        text = text.replace("reconciler-system", self.system_namespace)
        text = text.replace("kyma-project.io", f"k{self.suffix}.kyma-project.io")
        text = text.replace("keda.sh", f"k{self.suffix}.keda.sh")
        text = text.replace("mandatory: true", "mandatory: false")
        for name in CLUSTER_NAMES:
            text = text.replace(name, f"{name}-{self.suffix}")
        return text

    # -- the config repo -------------------------------------------------------------------------

    def set_modules(self, modules: Sequence[Mapping[str, Any]], channel: str = "fast") -> None:
        """``runtimes/<runtime>.yaml``: the runtime, listing ``modules``."""
        spec = {
            "channel": channel,
            "cluster": {"kubeconfigFile": self.control_plane.kubeconfig_name},
            "modules": [dict(m) for m in modules],
        }
        document = {"apiVersion": API, "kind": "Runtime", "metadata": {"name": self.runtime}}
        document["spec"] = spec
        path = self.repo / "runtimes" / f"{self.runtime}.yaml"
        path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")

    def ship_namespace(self, module: str) -> None:
        """Add the module's Namespace to each of its manifests (as many operators ship it)."""
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}}
        for manifest in (self.repo / "modules" / module).glob("*/manifest.yaml"):
            text = manifest.read_text(encoding="utf-8")
            manifest.write_text(yaml.safe_dump(namespace) + "---\n" + text, encoding="utf-8")

    # -- the command line ------------------------------------------------------------------------

    def reconciler(self, *args: str) -> Result:
        """``reconciler ARGS`` in this process."""
        return CliRunner().invoke(cli, list(args))

    def sync(self) -> Result:
        """``reconciler sync`` of the runtime on the real server."""
        kubeconfig_dir = str(self.control_plane.kubeconfig_dir)
        args = ("--runtime", self.runtime, "--kubeconfig-dir", kubeconfig_dir)
        return self.reconciler("sync", str(self.repo), *args)

    def sync_until(
        self,
        text: str,
        operator: str | None = None,
        rounds: int = 30,
        operators: Sequence[tuple[str, str]] = (),
    ) -> Result:
        """``sync`` until its output holds ``text``, marking the Deployment ``operator`` of the
        modules' namespace (and each ``(namespace, name)`` of ``operators``) available
        whenever it exists."""
        for _ in range(rounds):
            if operator is not None:
                self.make_available(operator)
            for namespace, name in operators:
                self.make_available(name, namespace)
            result = self.sync()
            assert result.exit_code == 0, result.output
            if text in result.output:
                return result
        raise AssertionError(f"no {text!r} after {rounds} syncs; the last said:\n{result.output}")

    # -- the cluster, as a user --------------------------------------------------------------------

    def make_available(self, name: str, namespace: str | None = None) -> None:
        """Mark Deployment ``name`` of the modules' namespace (or ``namespace``) available."""
        namespace = namespace or self.namespace
        apps = k8s_client.AppsV1Api(self._api_client)
        body = self.cluster.get(ObjectRef("apps/v1", "Deployment", namespace, name))
        if body is None:
            return
        replicas = (body.get("spec") or {}).get("replicas") or 1
        status = {
            "observedGeneration": body["metadata"]["generation"],
            "replicas": replicas,
            "readyReplicas": replicas,
            "availableReplicas": replicas,
            "updatedReplicas": replicas,
        }
        apps.patch_namespaced_deployment_status(name, namespace, {"status": status})

    def create_namespace(self, name: str) -> None:
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        self.cluster.apply(body, field_manager="kubectl")

    def cleanup(self) -> None:
        """Delete what the modules' manifests hold, cluster-wide, and the namespaces."""
        for manifest in (self.repo / "modules").glob("*/*/manifest.yaml"):
            for body in yaml.safe_load_all(manifest.read_text(encoding="utf-8")):
                if body and body.get("kind") in CLUSTER_SCOPED:
                    self._delete(ObjectRef.of(body))
        for name in (self.namespace, self.system_namespace, *self.user_namespaces()):
            self._delete(ObjectRef("v1", "Namespace", "", name))

    def user_namespaces(self) -> list[str]:
        return [f"user-{self.suffix}"]

    def _delete(self, ref: ObjectRef) -> None:
        try:
            self.cluster.delete(ref)
        except Exception:
            return


def kube_fleet(control_plane: ControlPlane, root: Path) -> Iterator[KubeFleet]:
    """A :class:`KubeFleet` in ``root``, cleaned up after."""
    fleet = KubeFleet(control_plane, root)
    try:
        yield fleet
    finally:
        fleet.cleanup()
