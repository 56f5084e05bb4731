"""``reconciler check``: each runtime's cluster reached, the identity it is reached with, and a
SelfSubjectAccessReview per permission its sync needs.

The real adapter is checked against an HTTP server on 127.0.0.1 that answers discovery,
SelfSubjectReview and SelfSubjectAccessReview as a kube-apiserver does (a throwaway fake of the
API server, our boundary); the command itself on snapshots and on the in-memory cluster.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler.cli.check import check_runtime, needed_permissions
from reconciler.cli.clusters import Access
from reconciler.cli.options import ClusterOptions
from reconciler.cluster.api import Permission
from reconciler.cluster.kube import KubeCluster
from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.model import ClusterAccess
from reconciler.source.loader import load_repo
from tests.support.http_fakes import NOT_FOUND, Answer, JsonServer, discovery, write_kubeconfig
from tests.support.sample_fleet import ROOT, Fleet, check_document

_GROUPS = {
    "authorization.k8s.io/v1": [
        {
            "name": "selfsubjectaccessreviews",
            "kind": "SelfSubjectAccessReview",
            "namespaced": False,
            "verbs": ["create"],
        }
    ],
    "authentication.k8s.io/v1": [
        {
            "name": "selfsubjectreviews",
            "kind": "SelfSubjectReview",
            "namespaced": False,
            "verbs": ["create"],
        }
    ],
}


class ApiServer(JsonServer):
    """Discovery, SelfSubjectReview and SelfSubjectAccessReview, as a kube-apiserver answers
    them; ``denied`` holds the (verb, resource) pairs it refuses; ``reviews`` what it was asked."""

    def __init__(self, denied: set[tuple[str, str]]) -> None:
        self.denied = denied
        self.reviews: list[dict[str, Any]] = []
        self.user = "alice@example.com"
        super().__init__(self.answer)

    def answer(self, method: str, path: str, body: dict[str, Any]) -> Answer:
        if method == "GET":
            return discovery(path, _GROUPS) or NOT_FOUND
        if path.endswith("/selfsubjectreviews"):
            return 201, body | {"status": {"userInfo": {"username": self.user, "groups": ["dev"]}}}
        if path.endswith("/selfsubjectaccessreviews"):
            attributes = body["spec"]["resourceAttributes"]
            self.reviews.append(attributes)
            allowed = (attributes["verb"], attributes["resource"]) not in self.denied
            return 201, body | {"status": {"allowed": allowed}}
        return NOT_FOUND


@pytest.fixture
def apiserver() -> Iterator[ApiServer]:
    server = ApiServer(denied={("delete", "customresourcedefinitions")})
    yield server
    server.close()


def test_the_real_adapter_asks_the_server_who_we_are_and_what_we_may_do(
    apiserver: ApiServer, tmp_path: Path
) -> None:
    folder = write_kubeconfig(tmp_path, apiserver.url)
    access = Access(ClusterOptions(folder, "ns", cache_dir=tmp_path))
    cluster = access.connect(ClusterAccess(kubeconfig_file="k"), "one")
    assert isinstance(cluster, KubeCluster)

    crds = Permission("delete", "apiextensions.k8s.io", "customresourcedefinitions")
    maps = Permission("patch", "", "configmaps", "reconciler-system")

    assert cluster.server_version() == "v1.31.4"
    assert cluster.whoami() == "alice@example.com"
    assert cluster.can_i(crds) is False
    assert cluster.can_i(maps) is True
    assert apiserver.reviews[-1] == {
        "verb": "patch",
        "group": "",
        "resource": "configmaps",
        "namespace": "reconciler-system",
    }


class _Clusters:
    """Hands out one in-memory cluster per runtime, as :class:`Access` hands out real ones."""

    def __init__(self) -> None:
        self.clusters: dict[str, InMemoryCluster] = {}

    def connect(self, access: ClusterAccess, name: str) -> InMemoryCluster:
        return self.clusters.setdefault(name, InMemoryCluster())

    def release(self, name: str) -> None:
        pass


def test_check_names_the_permissions_a_sync_would_miss() -> None:
    config = load_repo(ROOT / "sample-repo").repo
    assert config is not None
    clusters = _Clusters()
    denied = clusters.connect(ClusterAccess(), "prod-eu-1")
    denied.denied = {Permission("delete", "apiextensions.k8s.io", "customresourcedefinitions")}

    found = check_runtime(config, clusters, "prod-eu-1")  # type: ignore[arg-type]
    fine = check_runtime(config, clusters, "prod-us-1")  # type: ignore[arg-type]

    assert (found.reachable, found.ok, fine.ok) == (True, False, True)
    assert found.missing == ("delete customresourcedefinitions.apiextensions.k8s.io",)
    assert found.checked > 20
    assert denied.calls["review"] == found.checked + 1  # one review per permission, and whoami


def test_the_permissions_cover_every_kind_of_the_runtimes_modules() -> None:
    config = load_repo(ROOT / "sample-repo").repo
    assert config is not None
    cluster = InMemoryCluster()  # no CRD installed yet: plurals come from the manifests' CRDs

    needed = {p.describe() for p in needed_permissions(config, "prod-eu-1", cluster)}

    for verb in ("get", "list", "patch", "delete"):
        assert f"{verb} deployments.apps" in needed
        assert f"{verb} customresourcedefinitions.apiextensions.k8s.io" in needed
        assert f"{verb} serverlesses.operator.kyma-project.io" in needed  # a default configuration
        assert f"{verb} configmaps in reconciler-system" in needed
    assert "delete namespaces" not in needed  # namespaces are never deleted (S1)
    assert {"create events", "patch events"} <= needed  # Events on what a sync changes


def test_check_on_snapshots_prints_a_table_and_a_document(tmp_path: Path) -> None:
    fleet = Fleet(tmp_path)
    where = ["--snapshot", f"{fleet.clusters}/"]

    text = fleet.run("check", str(fleet.repo), *where)
    document = fleet.document("check", str(fleet.repo), "--runtime", "prod-eu-1", *where)
    unknown = fleet.run("check", str(fleet.repo), "--runtime", "nowhere", *where, code=2)

    lines = text.splitlines()
    assert lines[0].split() == ["RUNTIME", "REACHABLE", "VERSION", "IDENTITY", "ALLOWED", "MESSAGE"]
    assert len(lines) == 7
    assert all(line.split()[1] == "yes" and line.endswith("ok") for line in lines[1:])
    check_document(document, "AccessCheckList")
    assert [(i["runtime"], i["ok"]) for i in document["items"]] == [("prod-eu-1", True)]
    assert unknown == ""


def test_an_unreachable_runtime_fails_the_check_with_its_cause(tmp_path: Path) -> None:
    fleet = Fleet(tmp_path)
    runtime = fleet.repo / "runtimes" / "prod-eu-1.yaml"
    text = runtime.read_text()
    secret = "    kubeconfigSecret:\n      name: prod-eu-1-kubeconfig\n      key: config\n"
    assert secret in text
    runtime.write_text(text.replace(secret, "    kubeconfigFile: gone.yaml\n"))
    folder = tmp_path / "kubeconfigs"
    folder.mkdir()
    args = ["--runtime", "prod-eu-1", "--kubeconfig-dir", str(folder)]
    shown = fleet.run("check", str(fleet.repo), *args, code=1)

    assert shown.splitlines()[1].split()[:2] == ["prod-eu-1", "no"]
    assert "gone.yaml: no such file" in shown
