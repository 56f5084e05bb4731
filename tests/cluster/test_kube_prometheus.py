"""The real prometheus-operator manifests: its 10 CRDs (4.5 MB of schemas) and the operator's
ServiceAccount, RBAC, Deployment, Service and ServiceMonitor, as one module of version 0.93.0. On
the real API server they install, become Ready and are removed cleanly; the in-memory cluster plans
them as the real server does, before the install and after it.

The corpus is ``../shared/corpus/prometheus-operator`` beside the repository: without it the
tests skip (one line), or fail when ``CI`` is set. The module's names are the upstream ones
(cluster-wide: ``monitoring.coreos.com`` CRDs, ClusterRole ``prometheus-operator``), so the test
deletes what is left of them at the end.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.cluster.api import Cluster
from reconciler.cluster.kube import KubeCluster, k8s_config
from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.objects import ObjectRef
from reconciler.errors import UnknownKindError
from reconciler.lifecycle.executor import sync_runtime
from reconciler.source.loader import load_repo
from tests.support.economy_fleet import rendered_objects
from tests.support.kube_control_plane import ControlPlane
from tests.support.kube_workloads import deployments_made_available
from tests.support.repos import write_files

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "prometheus-operator"
API = "reconciler.dev/v1alpha1"
MODULE, VERSION, RUNTIME, SYSTEM = "prometheus", "0.93.0", "prom", "prom-rs"


def _corpus() -> Path:
    if not CORPUS.is_dir():
        message = f"no prometheus-operator corpus at {CORPUS}"
        if os.environ.get("CI"):
            pytest.fail(f"{message} (CI is set: it must be there)", pytrace=False)
        pytest.skip(message)
    return CORPUS


def _manifest(corpus: Path) -> str:
    files = sorted((corpus / "crds").glob("*.yaml")) + sorted((corpus / "operator").glob("*.yaml"))
    return "\n---\n".join(f.read_text(encoding="utf-8") for f in files)


def _dump(kind: str, name: str, spec: dict[str, Any]) -> str:
    document = {"apiVersion": API, "kind": kind, "metadata": {"name": name}, "spec": spec}
    return yaml.safe_dump(document, sort_keys=False)


def _repo_files(corpus: Path, plane: ControlPlane, modules: list[str]) -> dict[str, str]:
    module: dict[str, Any] = {"namespace": "default"}
    module["operator"] = {"kind": "Deployment", "name": "prometheus-operator"}
    runtime: dict[str, Any] = {"channel": "regular"}
    runtime["cluster"] = {"kubeconfigFile": plane.kubeconfig_name}
    runtime["modules"] = [{"name": m} for m in modules]
    return {
        "reconciler.yaml": _dump("Settings", "settings", {"systemNamespace": SYSTEM}),
        f"modules/{MODULE}/module.yaml": _dump("Module", MODULE, module),
        f"modules/{MODULE}/{VERSION}/manifest.yaml": _manifest(corpus),
        "channels/regular.yaml": _dump("Channel", "regular", {"modules": {MODULE: VERSION}}),
        f"runtimes/{RUNTIME}.yaml": _dump("Runtime", RUNTIME, runtime),
    }


class _Prometheus:
    def __init__(self, plane: ControlPlane, root: Path, corpus: Path) -> None:
        self.plane, self.root, self.corpus = plane, root, corpus
        self.cluster = KubeCluster(self.cluster_client(), name="user")
        self.list_modules([MODULE])

    def cluster_client(self) -> Any:
        return k8s_config.new_client_from_config(config_file=str(self.plane.kubeconfig))

    def list_modules(self, modules: list[str]) -> None:
        write_files(self.root / "repo", _repo_files(self.corpus, self.plane, modules))

    def sync(self) -> str:
        args = ["sync", str(self.root / "repo"), "--runtime", RUNTIME, "--wait", "60"]
        args += ["--kubeconfig-dir", str(self.plane.kubeconfig_dir)]
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
        return result.output

    def plan(self, cluster: Cluster) -> list[tuple[str, str, list[tuple[str, str]]]]:
        """Each module's action and reason, and each object change (action, subject)."""
        validation = load_repo(self.root / "repo")
        assert validation.repo is not None, [d.format() for d in validation.diagnostics]
        result = sync_runtime(
            cluster, validation.repo, RUNTIME, now=datetime.now(UTC), dry_run=True
        )
        return [
            (str(m.action), m.reason, sorted((str(c.action), c.ref.subject) for c in m.changes))
            for m in result.plan.modules
        ]

    def ours(self) -> list[ObjectRef]:
        """The manifest's objects, in order, as rendered (read as Kubernetes reads YAML)."""
        self.list_modules([MODULE])
        objects = [ObjectRef.of(b) for b in rendered_objects(self.root / "repo", RUNTIME)]
        self.list_modules([])
        return objects

    def cleanup(self) -> None:
        for ref in [*reversed(self.ours()), ObjectRef("v1", "Namespace", "", SYSTEM)]:
            try:
                self.cluster.delete(ref)
            except Exception:
                continue


@pytest.fixture
def prometheus(
    kube_control_plane: ControlPlane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[_Prometheus]:
    corpus = _corpus()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    made = _Prometheus(kube_control_plane, tmp_path, corpus)
    try:
        with deployments_made_available(kube_control_plane.kubeconfig):
            yield made
    finally:
        made.cleanup()


def test_the_prometheus_operator_installs_becomes_ready_and_is_removed_cleanly(
    prometheus: _Prometheus,
) -> None:
    planned_in_memory = prometheus.plan(InMemoryCluster())
    planned_for_real = prometheus.plan(prometheus.cluster)

    installed = prometheus.sync()
    memory = InMemoryCluster()
    validation = load_repo(prometheus.root / "repo")
    assert validation.repo is not None
    sync_runtime(memory, validation.repo, RUNTIME, now=datetime.now(UTC))
    # a new client, as the next command would be: the first one found no ServiceMonitor kind
    # before the install and takes it as missing for MISS_SECONDS (a CRD another client adds is
    # seen after that, kube.py), which a quick install on an idle machine does not outlast
    after = KubeCluster(prometheus.cluster_client(), name="after-install")
    after_in_memory, after_for_real = prometheus.plan(memory), prometheus.plan(after)
    prometheus.list_modules([])
    removed = prometheus.sync()

    assert planned_for_real == planned_in_memory
    assert len(planned_for_real[0][2]) == 16  # 10 CRDs, 6 objects of the operator
    assert "succeeded" in installed, installed
    assert f"{MODULE:<16} Ready" in installed, installed
    assert after_for_real == after_in_memory == [("unchanged", "UpToDate", [])]
    assert "succeeded" in removed, removed
    fresh = KubeCluster(prometheus.cluster_client(), name="after")
    left = [ref for ref in prometheus.ours() if _present(fresh, ref)]
    assert left == [r for r in left if r.kind == "CustomResourceDefinition"], left
    # (a CRD may still be finishing its deletion: its instances go first)


def _present(cluster: Cluster, ref: ObjectRef) -> bool:
    try:
        return cluster.get(ref) is not None
    except UnknownKindError:
        return False
