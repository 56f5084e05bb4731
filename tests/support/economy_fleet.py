"""The runtime of the API-economy measurements: N modules, each a Namespace, a CRD, a
ServiceAccount, a ConfigMap, a Service, the operator Deployment and a default configuration (a
custom resource of its CRD), 7 objects of 5 + 1 + N kinds.

:func:`economy_files` writes it as a config repo (relative path -> text) with one runtime
reaching its cluster through ``kubeconfigFile``; :func:`rendered_objects` is what ``reconciler``
applies for it (our labels included), for ``kubectl apply --server-side`` of the same objects.
Names carry a prefix so that several fleets share one API server. Callers:
tests/cluster/test_kube_economy.py, tests/cluster/test_kube_prometheus.py, bench/kube_bench.py,
bench/api_economy_bench.py, bench/kubectl_compare_bench.py (the in-memory counts of
tests/lifecycle/test_api_calls.py use tests/support/big_runtime.py).
"""

from __future__ import annotations

from typing import Any

import yaml

from reconciler.core.render import Renderer
from reconciler.core.resolve import resolve_runtime
from reconciler.source.loader import load_repo
from tests.support.crds import ANY_FIELDS, namespaced_crd

API = "reconciler.dev/v1alpha1"
#: Objects per module, the default configuration included.
OBJECTS_PER_MODULE = 7
#: Kinds every module has (Namespace, CRD, ServiceAccount, ConfigMap, Service, Deployment).
SHARED_KINDS = 6


def _dump(document: dict[str, Any]) -> str:
    return yaml.safe_dump(document, sort_keys=False)


def _deployment(name: str) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": f"{name}-operator", "labels": {"app.kubernetes.io/version": "1.0.0"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "operator", "image": "example/operator:1.0.0"}]},
            },
        },
    }


def module_files(name: str, index: int) -> dict[str, str]:
    """``modules/<name>/``: module.yaml, its manifest and default configuration at 1.0.0."""
    namespace = f"{name}-system"
    group = f"{name}.example.com"
    kind = f"Thing{index:03d}"
    objects = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        namespaced_crd(group, kind, ANY_FIELDS),
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "b"}},
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name},
            "spec": {"ports": [{"port": 80, "protocol": "TCP"}], "selector": {"app": name}},
        },
        _deployment(name),
    ]
    default = {"apiVersion": f"{group}/v1", "kind": kind, "metadata": {"name": "default"}}
    default["spec"] = {"size": 1}
    spec = {"namespace": namespace, "operator": {"kind": "Deployment", "name": f"{name}-operator"}}
    module = {"apiVersion": API, "kind": "Module", "metadata": {"name": name}, "spec": spec}
    return {
        f"modules/{name}/module.yaml": _dump(module),
        f"modules/{name}/1.0.0/manifest.yaml": yaml.safe_dump_all(objects, sort_keys=False),
        f"modules/{name}/1.0.0/default.yaml": _dump(default),
    }


def module_names(modules: int, prefix: str = "mod") -> list[str]:
    """The fleet's module names."""
    return [f"{prefix}{i:03d}" for i in range(modules)]


def economy_files(
    modules: int,
    *,
    runtime: str = "big",
    prefix: str = "mod",
    cluster: dict[str, Any] | None = None,
    system_namespace: str = "reconciler-system",
) -> dict[str, str]:
    """A config repo of one runtime listing ``modules`` modules (see the module docstring);
    the runtime reaches ``cluster`` (a ``spec.cluster``; a kubeconfig context by default)."""
    files: dict[str, str] = {}
    names = module_names(modules, prefix)
    for index, name in enumerate(names):
        files.update(module_files(name, index))
    channel = {"apiVersion": API, "kind": "Channel", "metadata": {"name": "regular"}}
    channel["spec"] = {"modules": dict.fromkeys(names, "1.0.0")}
    spec = {
        "channel": "regular",
        "cluster": cluster or {"context": f"ctx-{runtime}"},
        "modules": [{"name": n} for n in names],
    }
    document = {"apiVersion": API, "kind": "Runtime", "metadata": {"name": runtime}, "spec": spec}
    settings = {"apiVersion": API, "kind": "Settings", "metadata": {"name": "settings"}}
    settings["spec"] = {"systemNamespace": system_namespace}
    files["channels/regular.yaml"] = _dump(channel)
    files[f"runtimes/{runtime}.yaml"] = _dump(document)
    files["reconciler.yaml"] = _dump(settings)
    return files


def rendered_objects(repo_dir: Any, runtime: str) -> list[dict[str, Any]]:
    """What a sync applies for ``runtime`` of the repo in ``repo_dir`` (default configurations
    included), in apply order."""
    validation = load_repo(repo_dir)
    if validation.repo is None:
        raise ValueError([d.format() for d in validation.diagnostics])
    repo = validation.repo
    resolution = resolve_runtime(repo, repo.runtimes[runtime])
    return [dict(o.body) for o in Renderer(repo).render(resolution)]
