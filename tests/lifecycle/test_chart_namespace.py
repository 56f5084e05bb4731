"""A chart module's release namespace (the module's ``spec.namespace``) is created by the sync
when missing, as ``helm install --create-namespace`` and Flux's ``install.createNamespace`` do,
never labelled ours: the module's removal deletes the chart's objects and leaves the namespace
(docs/charts.md)."""

from __future__ import annotations

from datetime import UTC, datetime

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.model import LABEL_MANAGED_BY, LABEL_MODULE
from reconciler.core.objects import ObjectRef
from reconciler.lifecycle.executor import sync_runtime
from reconciler.render import default_renderer
from reconciler.source.loader import load_repo
from tests.support.charts import chart_module_files
from tests.support.repos import RepoFactory, channel_file, runtime_file

NOW = datetime(2026, 11, 18, 12, 0, tzinfo=UTC)
RELEASE_NAMESPACE = ObjectRef("v1", "Namespace", "", "web-system")
OPERATOR = ObjectRef("apps/v1", "Deployment", "web-system", "web-operator")


def test_a_charts_release_namespace_is_created_and_left_by_its_removal(
    make_repo: RepoFactory,
) -> None:
    files = {**chart_module_files("web"), **channel_file("regular", {"web": "1.0.0"})}
    listed = make_repo({**files, **runtime_file("a", "regular", [{"name": "web"}])})
    config = load_repo(listed, renderer=default_renderer()).repo
    assert config is not None
    cluster = InMemoryCluster()
    assert cluster.get(RELEASE_NAMESPACE) is None

    installed = sync_runtime(cluster, config, "a", now=NOW)

    assert installed.state == "Ready", installed.modules
    namespace = cluster.get(RELEASE_NAMESPACE)
    assert namespace is not None
    labels = namespace["metadata"].get("labels") or {}
    assert LABEL_MANAGED_BY not in labels
    assert LABEL_MODULE not in labels
    assert cluster.get(OPERATOR) is not None

    removed = load_repo(
        make_repo({**files, **runtime_file("a", "regular", [])}), renderer=default_renderer()
    ).repo
    assert removed is not None
    sync_runtime(cluster, removed, "a", now=NOW)

    assert cluster.get(OPERATOR) is None
    assert cluster.get(RELEASE_NAMESPACE) is not None
