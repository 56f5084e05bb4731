"""Small config repos on disk, shared by the reading, resolution, rendering and CLI tests:
``write_files`` and the YAML helpers, one file of each kind, and ``small_repo`` (a valid repo).
The ``make_repo`` fixture (tests/conftest.py) writes them under ``tmp_path``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import yaml

API = "reconciler.dev/v1alpha1"


def write_files(root: Path, files: Mapping[str, str | bytes]) -> Path:
    """Write ``files`` (relative path -> text or bytes) under ``root``; returns ``root``."""
    for relative, content in files.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")
    root.mkdir(parents=True, exist_ok=True)
    return root


def dump(document: Mapping[str, Any]) -> str:
    """One YAML document, keys in the order given."""
    return yaml.safe_dump(dict(document), sort_keys=False)


def dump_all(documents: Sequence[Mapping[str, Any]]) -> str:
    """A multi-document YAML stream."""
    return yaml.safe_dump_all([dict(d) for d in documents], sort_keys=False)


def runtime_file(
    name: str,
    channel: str = "regular",
    modules: Sequence[Mapping[str, Any]] = (),
    **spec: Any,
) -> dict[str, str]:
    """``runtimes/<name>.yaml`` reaching its cluster through a kubeconfig context."""
    body: dict[str, Any] = {"channel": channel, "cluster": {"context": f"ctx-{name}"}}
    if modules:
        body["modules"] = [dict(m) for m in modules]
    body.update(spec)
    document = {"apiVersion": API, "kind": "Runtime", "metadata": {"name": name}, "spec": body}
    return {f"runtimes/{name}.yaml": dump(document)}


def channel_file(name: str, modules: Mapping[str, str], folder: str = "channels") -> dict[str, str]:
    """``<folder>/<name>.yaml``: a channel serving ``modules`` (name -> version)."""
    document = {
        "apiVersion": API,
        "kind": "Channel",
        "metadata": {"name": name},
        "spec": {"modules": dict(modules)},
    }
    return {f"{folder}/{name}.yaml": dump(document)}


def operator(module: str, version: str) -> dict[str, Any]:
    """The operator Deployment of ``module`` (what module.yaml's ``spec.operator`` names)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": f"{module}-operator",
            "labels": {"app.kubernetes.io/version": version},
        },
        "spec": {"replicas": 1},
    }


def module_files(
    name: str,
    versions: Sequence[str] = ("1.0.0",),
    *,
    namespace: str | None = None,
    depends_on: Sequence[str] = (),
    mandatory: bool = False,
    objects: Sequence[Mapping[str, Any]] = (),
    default: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """``modules/<name>/``: module.yaml and one folder per version with a manifest holding
    ``objects`` and the operator Deployment (last), and ``default`` as default.yaml."""
    spec: dict[str, Any] = {
        "namespace": namespace or f"{name}-system",
        "operator": {"kind": "Deployment", "name": f"{name}-operator"},
    }
    if depends_on:
        spec["dependsOn"] = list(depends_on)
    if mandatory:
        spec["mandatory"] = True
    module = {"apiVersion": API, "kind": "Module", "metadata": {"name": name}, "spec": spec}
    files = {f"modules/{name}/module.yaml": dump(module)}
    for version in versions:
        manifest = [*objects, operator(name, version)]
        files[f"modules/{name}/{version}/manifest.yaml"] = dump_all(manifest)
        if default is not None:
            files[f"modules/{name}/{version}/default.yaml"] = dump(default)
    return files


def small_repo() -> dict[str, str]:
    """A valid repo: modules alpha (1.0.0, 1.1.0) and beta (1.0.0, 2.0.0), channels regular
    (alpha 1.0.0, beta 1.0.0) and fast (alpha 1.1.0, beta 2.0.0), runtime ``one`` on regular
    listing both."""
    return {
        **module_files("alpha", ("1.0.0", "1.1.0")),
        **module_files("beta", ("1.0.0", "2.0.0")),
        **channel_file("regular", {"alpha": "1.0.0", "beta": "1.0.0"}),
        **channel_file("fast", {"alpha": "1.1.0", "beta": "2.0.0"}),
        **runtime_file("one", "regular", [{"name": "alpha"}, {"name": "beta"}]),
    }


class RepoFactory(Protocol):
    """Writes a config repo from relative path -> content; returns its folder."""

    def __call__(self, files: Mapping[str, str | bytes], name: str = "repo") -> Path: ...
