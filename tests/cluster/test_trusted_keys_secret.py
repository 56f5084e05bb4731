"""Trusted signing keys read from a Kubernetes Secret through the API (``--trusted-keys-secret``)
on a real API server: read again at each verification (a key rotated in the Secret counts at
once), and a Secret that is missing named in one line."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.cli.signing import with_secret
from reconciler.cluster.kube import KubeCluster, fetch_secret_data, k8s_config
from reconciler.core.objects import ObjectRef
from reconciler.errors import AccessError, SourceError, TransientError
from reconciler.source.signatures import TrustedKeys, check_trusted_keys, verify_commits
from tests.support.kube_control_plane import ControlPlane
from tests.support.signing import Keys, SshKey, git, keys, signed_commit

__all__ = ["keys"]  # the fixture


@pytest.fixture
def cluster(
    kube_control_plane: ControlPlane, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[KubeCluster, str]]:
    """The API server as the daemon's home cluster (the default kubeconfig, which the client
    reads from ``KUBECONFIG`` once, at import), and a namespace of the test's own."""
    location = str(kube_control_plane.kubeconfig)
    monkeypatch.setattr(k8s_config.kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", location)
    api = k8s_config.new_client_from_config(config_file=str(kube_control_plane.kubeconfig))
    made = KubeCluster(api, name="home")
    namespace = f"keys-{uuid.uuid4().hex[:8]}"
    made.apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        field_manager="kubectl",
    )
    try:
        yield made, namespace
    finally:
        made.delete(ObjectRef("v1", "Namespace", "", namespace))


def _secret(cluster: KubeCluster, namespace: str, *signers: SshKey) -> None:
    text = "".join(key.signers_line for key in signers)
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "trusted-keys", "namespace": namespace},
        "data": {"allowed_signers": base64.b64encode(text.encode()).decode()},
    }
    cluster.apply(body, field_manager="kubectl")


def test_keys_from_a_secret_rotate_without_a_restart(
    cluster: tuple[KubeCluster, str], keys: Keys, tmp_path: Path
) -> None:
    home, namespace = cluster
    alice, bob = keys.ssh("alice"), keys.ssh("bob")
    _secret(home, namespace, alice)
    work = tmp_path / "work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    by_alice = signed_commit(work, "alice", alice)
    by_bob = signed_commit(work, "bob", bob)
    trusted = with_secret(TrustedKeys(), namespace, "trusted-keys")

    assert trusted.configured
    assert check_trusted_keys(trusted) == "1 SSH signer, 0 OpenPGP keys"
    assert fetch_secret_data(namespace, "trusted-keys")["allowed_signers"].startswith(b"alice@")
    assert verify_commits(work / ".git", by_alice, trusted).accepted
    assert not verify_commits(work / ".git", by_bob, trusted).accepted

    _secret(home, namespace, bob)  # rotated in the Secret: read again at the next commit
    assert verify_commits(work / ".git", by_bob, trusted).accepted
    assert not verify_commits(work / ".git", by_alice, trusted).accepted


def test_a_missing_secret_is_named(cluster: tuple[KubeCluster, str], tmp_path: Path) -> None:
    _, namespace = cluster
    with pytest.raises(AccessError, match=f"Secret {namespace}/nope: not found"):
        fetch_secret_data(namespace, "nope")
    trusted = with_secret(TrustedKeys(), namespace, "nope")
    with pytest.raises(TransientError, match=f"trusted keys: Secret {namespace}/nope: not found"):
        verify_commits(tmp_path, "a" * 40, trusted)  # a commit waits for its keys
    with pytest.raises(SourceError, match="not found"):
        check_trusted_keys(trusted)

    need = ["daemon", "--repo", str(tmp_path), "--secret-namespace", namespace]
    (tmp_path / "HEAD").write_text("ref: refs/heads/main\n")  # looks like a bare repository
    result = CliRunner().invoke(cli, [*need, "--trusted-keys-secret", "nope"])
    assert result.exit_code == 2, result.output
    assert f"error: trusted keys: Secret {namespace}/nope: not found" in result.stderr
    assert "Traceback" not in result.output + result.stderr
