"""One runtime of many modules, for counting what a sync costs in API calls on the in-memory
cluster: runtime ``big`` runs 30 modules, each with a Namespace, a CRD, a ServiceAccount, a
ConfigMap, a Service, the operator Deployment and a default configuration (a custom resource of
its CRD). Callers: the API call counts of ``tests/lifecycle`` and of ``reconciler tree``."""

from __future__ import annotations

from datetime import UTC, datetime

from reconciler.core.model import ConfigRepo
from reconciler.source.loader import load_repo
from tests.support.crds import namespaced_crd
from tests.support.repos import RepoFactory, channel_file, module_files, runtime_file

#: The runtime's modules.
MODULES = 30


#: The time of the syncs.
NOW = datetime(2026, 11, 23, 12, tzinfo=UTC)


def _module(index: int) -> dict[str, str]:
    name = f"mod{index:02d}"
    namespace = f"{name}-system"
    group = f"{name}.example.com"
    kind = f"Thing{index:02d}"
    objects = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        namespaced_crd(group, kind),
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "b"}},
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name},
            "spec": {"ports": [{"port": 80, "protocol": "TCP"}]},
        },
    ]
    default = {
        "apiVersion": f"{group}/v1",
        "kind": kind,
        "metadata": {"name": "default"},
        "spec": {"size": 1},
    }
    return module_files(name, namespace=namespace, objects=objects, default=default)


def big_runtime_repo(make_repo: RepoFactory) -> ConfigRepo:
    """The config repo of runtime ``big``: :data:`MODULES` modules on channel ``regular``."""
    files: dict[str, str] = {}
    for index in range(MODULES):
        files.update(_module(index))
    names = [f"mod{i:02d}" for i in range(MODULES)]
    files.update(channel_file("regular", dict.fromkeys(names, "1.0.0")))
    files.update(runtime_file("big", "regular", [{"name": n} for n in names]))
    validation = load_repo(make_repo(files))
    assert validation.repo is not None, [d.format() for d in validation.diagnostics]
    return validation.repo
