"""A runtime reached through a kubeconfig Secret (``spec.cluster.kubeconfigSecret``) that is
missing, or that the daemon's identity may not read, on a real API server: ``check``, ``sync``
and ``diff`` say in one line which runtime, which Secret in which namespace, and what to do;
never an internal error, a status dump or HTTP headers.

The commands run as processes with ``KUBECONFIG`` naming the home cluster's identity: the
admin, or a ServiceAccount with no grant at all (its token from the TokenRequest API).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.kube_control_plane import ControlPlane
from tests.support.repos import RepoFactory, channel_file, module_files, runtime_file

SECRET = "fleet-kubeconfig"


@pytest.fixture
def home(kube_control_plane: ControlPlane, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A namespace of the home cluster with no Secret in it, and a kubeconfig for a
    ServiceAccount there that may do nothing: (namespace, that kubeconfig)."""
    from reconciler.cluster.kube import k8s_client, k8s_config

    api = k8s_config.new_client_from_config(config_file=str(kube_control_plane.kubeconfig))
    core = k8s_client.CoreV1Api(api)
    namespace = f"home-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": namespace}})
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "nobody"}})
    request = {"spec": {"audiences": [], "expirationSeconds": 3600}}
    token = core.create_namespaced_service_account_token("nobody", namespace, request)
    path = kube_control_plane.token_kubeconfig(tmp_path / "nobody.yaml", token.status.token)
    try:
        yield namespace, path
    finally:
        core.delete_namespace(namespace)


def _repo(make_repo: RepoFactory) -> Path:
    cluster = {"kubeconfigSecret": {"name": SECRET, "key": "config"}}
    return make_repo(
        {
            **module_files("solo"),
            **channel_file("regular", {"solo": "1.0.0"}),
            **runtime_file("prod", "regular", [{"name": "solo"}], cluster=cluster),
        }
    )


def _run(kubeconfig: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "KUBECONFIG": str(kubeconfig),
        "RECONCILER_STATE": f"sqlite:///{tmp_path / 'state.db'}",
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    return subprocess.run(
        [sys.executable, "-m", "reconciler", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _one_line_about_the_secret(done: subprocess.CompletedProcess[str], namespace: str) -> str:
    said = done.stdout + done.stderr
    assert done.returncode != 0, said
    assert "internal error" not in said
    assert "Traceback" not in said
    assert "HTTPHeaderDict" not in said
    lines = [line for line in said.splitlines() if f"{namespace}/{SECRET}" in line]
    assert lines, said
    assert "prod" in lines[0]  # the runtime
    return lines[0]


@pytest.mark.parametrize("command", ["check", "sync", "diff"])
def test_a_missing_kubeconfig_secret_is_named_with_what_to_do(
    kube_control_plane: ControlPlane,
    home: tuple[str, Path],
    make_repo: RepoFactory,
    tmp_path: Path,
    command: str,
) -> None:
    namespace, _ = home
    repo = _repo(make_repo)
    done = _run(
        kube_control_plane.kubeconfig, tmp_path, command, str(repo), "--secret-namespace", namespace
    )
    line = _one_line_about_the_secret(done, namespace)
    assert f"kubeconfig Secret {namespace}/{SECRET}: not found" in line
    assert "create it" in line


@pytest.mark.parametrize("command", ["check", "sync"])
def test_a_kubeconfig_secret_the_identity_may_not_read_is_named(
    home: tuple[str, Path], make_repo: RepoFactory, tmp_path: Path, command: str
) -> None:
    namespace, nobody = home
    repo = _repo(make_repo)
    done = _run(nobody, tmp_path, command, str(repo), "--secret-namespace", namespace)
    line = _one_line_about_the_secret(done, namespace)
    assert f"kubeconfig Secret {namespace}/{SECRET}: forbidden" in line
    assert "get on secrets" in line
