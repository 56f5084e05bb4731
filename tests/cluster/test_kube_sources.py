"""A ``source`` module end to end: a chart pushed to a real OCI registry (docker-registry on
127.0.0.1), pinned by digest in ``source.yaml``, installed by ``reconciler sync`` on a real API
server (the ``kube_control_plane`` fixture); a source whose digest is not the registry's is
refused naming both digests, and nothing in the cluster changes. And the sample's Kustomize
overlay (status-board) installed by the same path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from reconciler.core.objects import ObjectRef
from tests.support.charts import CHART_TEMPLATES
from tests.support.kube_control_plane import ControlPlane
from tests.support.kube_fleet import KubeFleet, kube_fleet
from tests.support.registries import OciRegistry, package_chart, registry
from tests.support.repos import API

__all__ = ["registry"]  # the fixture

WRONG = "sha256:" + "e" * 64
NAMESPACE_TEMPLATE = (
    "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {{ .Release.Namespace }}\n"
)


@pytest.fixture
def fleet(
    kube_control_plane: ControlPlane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[KubeFleet]:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # discovery and sources
    yield from kube_fleet(kube_control_plane, tmp_path)


def _write_source(fleet: KubeFleet, registry: OciRegistry, version: str, digest: str) -> None:
    folder = fleet.repo / "modules" / "web"
    (folder / version).mkdir(parents=True, exist_ok=True)
    spec = {
        "namespace": fleet.namespace,
        "operator": {"kind": "Deployment", "name": "web-operator"},
    }
    module = {"apiVersion": API, "kind": "Module", "metadata": {"name": "web"}, "spec": spec}
    (folder / "module.yaml").write_text(yaml.safe_dump(module))
    source_spec = {"url": registry.url("web"), "version": version, "digest": digest}
    source = {"apiVersion": API, "kind": "Source", "spec": {**source_spec, "plainHttp": True}}
    (folder / version / "source.yaml").write_text(yaml.safe_dump(source))


def test_a_chart_from_a_real_registry_is_installed_by_digest_and_a_wrong_digest_refused(
    fleet: KubeFleet, registry: OciRegistry, tmp_path: Path
) -> None:
    templates = {**CHART_TEMPLATES, "templates/namespace.yaml": NAMESPACE_TEMPLATE}
    digest = registry.push(package_chart(tmp_path, "web", "1.0.0", templates))
    registry.push(package_chart(tmp_path, "web", "1.1.0", templates))
    _write_source(fleet, registry, "1.0.0", digest)
    _write_source(fleet, registry, "1.1.0", WRONG)
    operator = ObjectRef("apps/v1", "Deployment", fleet.namespace, "web-operator")
    settings = ObjectRef("v1", "ConfigMap", fleet.namespace, "web-settings")

    fleet.set_modules([{"name": "web", "version": "1.0.0", "values": {"size": "large"}}])
    fleet.sync_until("succeeded", operator="web-operator")

    installed = fleet.cluster.get(operator)
    assert installed is not None
    assert installed["metadata"]["labels"]["app.kubernetes.io/version"] == "1.0.0"
    config = fleet.cluster.get(settings)
    assert config is not None
    assert config["data"]["size"] == "large"

    fleet.set_modules([{"name": "web", "version": "1.1.0"}])
    refused = fleet.sync()

    assert refused.exit_code != 0
    assert f"source.yaml pins {WRONG}; refused" in refused.output
    assert "the registry holds digest sha256:" in refused.output
    after = fleet.cluster.get(operator)
    assert after is not None
    assert after["metadata"]["labels"]["app.kubernetes.io/version"] == "1.0.0"


def test_the_samples_kustomize_overlay_is_installed_on_the_real_server(fleet: KubeFleet) -> None:
    module = fleet.repo / "modules" / "status-board" / "module.yaml"
    text = module.read_text().replace("namespace: status-board", f"namespace: {fleet.namespace}")
    module.write_text(text)
    fleet.create_namespace(fleet.namespace)  # removed by the fleet's cleanup
    board = ObjectRef("apps/v1", "Deployment", fleet.namespace, "status-board")
    settings = ObjectRef("v1", "ConfigMap", fleet.namespace, "status-board-settings")

    fleet.set_modules([{"name": "status-board", "version": "1.0.0"}])
    fleet.sync_until("succeeded", operator="status-board")

    deployment = fleet.cluster.get(board)
    assert deployment is not None
    assert deployment["spec"]["replicas"] == 2  # the overlay's patch over the base
    team = f"platform.k{fleet.suffix}.kyma-project.io/team"  # the fleet's private names
    assert deployment["metadata"]["labels"][team] == "platform"
    config = fleet.cluster.get(settings)
    assert config is not None
    assert config["data"]["TITLE"] == "Platform status"
