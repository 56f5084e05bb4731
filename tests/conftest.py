"""Shared test setup: every test gets its own state store (never the user's); helpers that
write small config repos into ``tmp_path``; one real Kubernetes control plane for the session
(``kube_control_plane``, see tests/support/kube_control_plane.py), whose tests carry the ``kube``
marker."""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator, Mapping
from pathlib import Path

import pytest

from tests.support.kube_control_plane import (
    ASSETS_ENV,
    KUBECONFIG_ENV,
    ControlPlane,
    external_control_plane,
    find_assets,
    start_control_plane,
    unpack,
)
from tests.support.repos import RepoFactory, write_files


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


# -- small config repos on disk (the helpers: tests/support/repos.py) ----------------------------


@pytest.fixture
def make_repo(tmp_path: Path) -> RepoFactory:
    """``make_repo(files, name="repo")`` writes a config repo under ``tmp_path / name``."""

    def make(files: Mapping[str, str | bytes], name: str = "repo") -> Path:
        return write_files(tmp_path / name, files)

    return make
