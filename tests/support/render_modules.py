"""Modules of the kinds that are rendered from elsewhere, as config repo files: a kustomize
overlay over a ``base/`` (module ``board``) and a ``source.yaml`` that names a chart to pull
(module ``web``). Callers: the kustomize and source renderer tests of ``tests/render`` and
``bench/sources_bench.py``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.support.repos import API, dump

#: The Deployment of the overlay's ``base/``.
BASE_DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "board-operator", "labels": {"app.kubernetes.io/version": "1.0.0"}},
    "spec": {
        "replicas": 1,
        "selector": {"matchLabels": {"app": "board"}},
        "template": {
            "metadata": {"labels": {"app": "board"}},
            "spec": {"containers": [{"name": "board", "image": "example/board:1"}]},
        },
    },
}

#: The overlay: three replicas and a generated ConfigMap.
OVERLAY = {
    "resources": ["base"],
    "patches": [
        {
            "target": {"kind": "Deployment", "name": "board-operator"},
            "patch": "- op: replace\n  path: /spec/replicas\n  value: 3\n",
        }
    ],
    "configMapGenerator": [{"name": "board-settings", "literals": ["TITLE=ours"]}],
}


def overlay_files(overlay: Mapping[str, Any] = OVERLAY) -> dict[str, str]:
    """``modules/board/``: module.yaml and a version folder holding an overlay over ``base/``."""
    spec = {
        "namespace": "board-system",
        "operator": {"kind": "Deployment", "name": "board-operator"},
    }
    module = {"apiVersion": API, "kind": "Module", "metadata": {"name": "board"}, "spec": spec}
    folder = "modules/board/1.0.0"
    return {
        "modules/board/module.yaml": dump(module),
        f"{folder}/kustomization.yaml": dump(overlay),
        f"{folder}/base/kustomization.yaml": dump({"resources": ["deployment.yaml"]}),
        f"{folder}/base/deployment.yaml": dump(BASE_DEPLOYMENT),
    }


def source_module_files(
    spec: Mapping[str, Any], version: str = "1.0.0", values: Mapping[str, Any] | None = None
) -> dict[str, str]:
    """``modules/web/``: module.yaml and a version folder holding ``source.yaml``."""
    module_spec = {
        "namespace": "web-system",
        "operator": {"kind": "Deployment", "name": "web-operator"},
    }
    module = {"apiVersion": API, "kind": "Module", "metadata": {"name": "web"}, "spec": module_spec}
    source = {"apiVersion": API, "kind": "Source", "spec": dict(spec)}
    files = {
        "modules/web/module.yaml": dump(module),
        f"modules/web/{version}/source.yaml": dump(source),
    }
    if values is not None:
        files[f"modules/web/{version}/values.yaml"] = dump(dict(values))
    return files
