"""The permissions a managed cluster's identity needs (one list, :func:`needed_permissions`):
what ``reconciler check`` asks the server about and ``reconciler rbac`` prints as a role. On
the in-memory cluster; the real API server's proof is ``tests/e2e/test_least_privilege.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.cli.check import check_runtime, needed_permissions
from reconciler.cluster.api import Permission
from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.model import ClusterAccess
from reconciler.source.loader import load_repo
from tests.support.e2e_harness import reconciler
from tests.support.repos import RepoFactory, channel_file, dump, module_files, runtime_file

RBAC = "rbac.authorization.k8s.io"
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.io"},
    "spec": {
        "group": "example.io",
        "scope": "Namespaced",
        "names": {"kind": "Widget", "plural": "widgets"},
        "versions": [{"name": "v1", "served": True, "storage": True}],
    },
}
OBJECTS: list[dict[str, Any]] = [
    CRD,
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}},
    {"apiVersion": f"{RBAC}/v1", "kind": "Role", "metadata": {"name": "r", "namespace": "shop"},
     "rules": []},
    {"apiVersion": f"{RBAC}/v1", "kind": "RoleBinding",
     "metadata": {"name": "r", "namespace": "shop"},
     "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "r"}, "subjects": []},
    {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
     "metadata": {"name": "web", "namespace": "shop"}},
]  # fmt: skip
DEFAULT = {"apiVersion": "example.io/v1", "kind": "Widget", "metadata": {"name": "default"}}


@pytest.fixture
def repo(make_repo: RepoFactory) -> Path:
    files = {
        **module_files("shop", objects=OBJECTS, default=DEFAULT),
        **channel_file("regular", {"shop": "1.0.0"}),
        **runtime_file("one", "regular", [{"name": "shop"}]),
        **runtime_file("empty", "regular"),
    }
    module = yaml.safe_load(files["modules/shop/module.yaml"])
    module["spec"]["managedResources"] = [{"group": "example.io", "kind": "Gadget"}]
    files["modules/shop/module.yaml"] = dump(module)
    return make_repo(files)


def _needed(repo: Path, runtime: str) -> set[str]:
    config = load_repo(repo).repo
    assert config is not None
    return {p.describe() for p in needed_permissions(config, runtime, InMemoryCluster())}


def test_every_call_of_sync_and_the_daemon_is_asked_for(repo: Path) -> None:
    needed = _needed(repo, "one")

    for verb in ("create", "get", "list", "watch", "patch", "delete"):
        assert f"{verb} widgets.example.io" in needed  # the default configuration's kind
        assert f"{verb} ingresses.networking.k8s.io" in needed  # not built in: plural guessed
        assert f"{verb} deployments.apps" in needed
    for verb in ("create", "get", "list", "patch", "delete"):
        assert f"{verb} configmaps in reconciler-system" in needed  # the inventories
    assert {"list gadgets.example.io", "watch gadgets.example.io"} <= needed  # managedResources
    assert "delete gadgets.example.io" not in needed
    assert {"escalate roles.rbac.authorization.k8s.io", "bind roles.rbac.authorization.k8s.io"} <= (
        needed
    )
    assert "escalate clusterroles.rbac.authorization.k8s.io" not in needed  # none shipped
    assert "list *.* in shop" in needed  # a Namespace it deletes: every object in it is read
    assert {"create namespaces", "create events", "watch customresourcedefinitions."
            "apiextensions.k8s.io"} <= needed  # fmt: skip


def test_a_runtime_without_modules_needs_only_the_system_namespace_and_namespaces(
    repo: Path,
) -> None:
    needed = _needed(repo, "empty")

    assert "list configmaps in reconciler-system" in needed
    assert not any("widgets" in p or "escalate" in p or "deployments" in p for p in needed)


def test_check_names_a_missing_escalate(repo: Path) -> None:
    config = load_repo(repo).repo
    assert config is not None
    cluster = InMemoryCluster()
    cluster.denied = {
        Permission("escalate", RBAC, "roles"),
        Permission("watch", "apps", "deployments"),
    }

    class Clusters:
        def connect(self, access: ClusterAccess, name: str) -> InMemoryCluster:
            return cluster

        def release(self, name: str) -> None:
            pass

    found = check_runtime(config, Clusters(), "one")  # type: ignore[arg-type]

    assert found.missing == (
        "escalate roles.rbac.authorization.k8s.io",
        "watch deployments.apps",
    )
    assert not found.ok


def test_rbac_prints_the_same_list_as_roles_ready_to_apply(repo: Path) -> None:
    printed = reconciler("rbac", repo, "--runtime", "one", "--user", "prod-eu-1-sync")
    assert printed.exit_code == 0, printed.output
    documents = [d for d in yaml.safe_load_all(printed.stdout) if d]

    kinds = [(d["kind"], d["metadata"].get("namespace")) for d in documents]
    assert kinds == [
        ("ClusterRole", None),
        ("ClusterRoleBinding", None),
        ("Namespace", None),
        ("Role", "reconciler-system"),
        ("RoleBinding", "reconciler-system"),
    ]
    granted = {
        Permission(verb, group, resource, d["metadata"].get("namespace", ""))
        for d in documents
        if d["kind"] in ("ClusterRole", "Role")
        for rule in d["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    config = load_repo(repo).repo
    assert config is not None
    needed = set(needed_permissions(config, "one", InMemoryCluster()))
    everywhere = {Permission(p.verb, p.group, p.resource) for p in needed if p.namespace == "shop"}
    assert granted == {p for p in needed if p.namespace != "shop"} | everywhere
    assert documents[1]["subjects"] == [
        {"kind": "User", "apiGroup": RBAC, "name": "prod-eu-1-sync"}
    ]


def test_rbac_refuses_an_unknown_runtime_and_a_bad_service_account(repo: Path) -> None:
    unknown = reconciler("rbac", repo, "--runtime", "nowhere")
    bad = reconciler("rbac", repo, "--service-account", "reconciler")

    assert unknown.exit_code != 0
    assert "runtime 'nowhere' does not exist" in unknown.output
    assert bad.exit_code == 2
    assert "NAMESPACE/NAME" in bad.output


def test_the_whole_fleet_is_the_union_of_its_runtimes(repo: Path) -> None:
    fleet = reconciler("rbac", repo)
    one = reconciler("rbac", repo, "--runtime", "one")

    assert fleet.exit_code == one.exit_code == 0
    assert fleet.stdout.splitlines()[1:] == one.stdout.splitlines()[1:]
    assert "runtime(s) empty, one" in fleet.stdout.splitlines()[0]


def test_a_forbidden_answer_points_to_the_managed_clusters_role() -> None:
    from reconciler.cluster.kube_errors import _HINTS

    assert "reconciler rbac" in _HINTS[403]
    assert "deploy/" not in _HINTS[403]
