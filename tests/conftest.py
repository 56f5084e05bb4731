"""Shared test setup: every test gets its own state store (never the user's); helpers that
write small config repos into ``tmp_path``; one real Kubernetes control plane for the session
(``kube_control_plane``, see tests/kube_control_plane.py), whose tests carry the ``kube`` marker."""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import pytest
import yaml

from tests.kube_control_plane import (
    ASSETS_ENV,
    KUBECONFIG_ENV,
    ControlPlane,
    external_control_plane,
    find_assets,
    start_control_plane,
    unpack,
)


@pytest.fixture(autouse=True)
def _private_state_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECONCILER_STATE", f"sqlite:///{tmp_path / 'state' / 'state.db'}")


# -- a real control plane -------------------------------------------------------------------------

KUBE_FIXTURE = "kube_control_plane"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test on the real control plane carries the ``kube`` marker (``pytest -m kube``),
    and they run last, together: the control plane starts at the first of them and is not
    running (taking CPU and memory) while the other tests run."""
    for item in items:
        if KUBE_FIXTURE in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.kube)
    items.sort(key=lambda item: item.get_closest_marker("kube") is not None)


NO_SERVER = (
    f"no real API server: set {ASSETS_ENV}=../shared/k8s (or {KUBECONFIG_ENV}) "
    "to run the real-server tests (pytest -m kube runs them alone)"
)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item,
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Every skip for want of a real API server at one place, so that ``-ra`` folds them into
    one line (else one line per test module)."""
    report: pytest.TestReport = yield
    longrepr = report.longrepr
    if report.skipped and isinstance(longrepr, tuple) and longrepr[2] == f"Skipped: {NO_SERVER}":
        report.longrepr = (__file__, _no_server.__code__.co_firstlineno, longrepr[2])
    return report


def _no_server() -> None:
    """Skip, or fail under CI (where the real-server tests must run)."""
    if os.environ.get("CI"):
        pytest.fail(f"{NO_SERVER} (CI is set: they must run)", pytrace=False)
    pytest.skip(NO_SERVER)


@pytest.fixture(scope="session")
def kube_control_plane() -> Iterator[ControlPlane]:
    """A real API server for the whole session: the cluster of ``RECONCILER_TEST_KUBECONFIG``
    when set, else etcd, kube-apiserver and kube-controller-manager from
    ``RECONCILER_K8S_ASSETS``. Tests on it share it: each uses names of its own and cleans up."""
    external = os.environ.get(KUBECONFIG_ENV)
    if external:
        yield external_control_plane(Path(external))
        return
    assets = find_assets()
    if assets is None or not assets.is_dir():
        _no_server()
    assert assets is not None
    with start_control_plane(unpack(assets)) as control_plane:
        yield control_plane


# -- small config repos on disk (shared by the reading, resolution, rendering and CLI tests) -----

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


@pytest.fixture
def make_repo(tmp_path: Path) -> RepoFactory:
    """``make_repo(files, name="repo")`` writes a config repo under ``tmp_path / name``."""

    def make(files: Mapping[str, str | bytes], name: str = "repo") -> Path:
        return write_files(tmp_path / name, files)

    return make
