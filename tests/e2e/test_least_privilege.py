"""Least privilege on a real API server: a ServiceAccount bound only to the role ``reconciler
rbac`` prints (its token from the TokenRequest API, in a kubeconfig the test writes) installs,
upgrades and removes a module with a CRD, a default configuration (a custom resource), an
operator Deployment and RBAC of its own (a ClusterRole bound by a RoleBinding), with no request
refused in the audit log; ``reconciler check`` with that identity says ok, and with one grant
taken away names it and fails."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.cluster.kube import k8s_client
from tests.support.e2e_harness import KUBECONFIG, TestModule, reconciler, until
from tests.support.e2e_world import World
from tests.support.watched_daemon import watched_daemon

RBAC = "rbac.authorization.k8s.io"


@dataclass(frozen=True, slots=True)
class ModuleWithRbac(TestModule):
    """A test module whose manifest also holds the operator's ServiceAccount, a ClusterRole
    on its custom resources and a RoleBinding of that ClusterRole in its namespace."""

    def objects(self, version: str) -> list[dict[str, Any]]:
        role = {
            "apiVersion": f"{RBAC}/v1",
            "kind": "ClusterRole",
            "metadata": {"name": self.operator},
            "rules": [
                {"apiGroups": [self.crd.group], "resources": [self.crd.plural],
                 "verbs": ["get", "list", "watch"]},
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]},
            ],
        }  # fmt: skip
        binding = {
            "apiVersion": f"{RBAC}/v1",
            "kind": "RoleBinding",
            "metadata": {"name": self.operator},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": self.operator},
            "subjects": [
                {"kind": "ServiceAccount", "name": self.operator, "namespace": self.namespace}
            ],
        }
        account = {"apiVersion": "v1", "kind": "ServiceAccount",
                   "metadata": {"name": self.operator}}  # fmt: skip
        return [*TestModule.objects(self, version), account, role, binding]


@dataclass(frozen=True, slots=True)
class Identity:
    """A ServiceAccount of the test: its user name, and a folder holding its kubeconfig under
    the name the fleet's runtimes use."""

    namespace: str
    user: str
    kubeconfig_dir: Path


@pytest.fixture
def identity(world: World, tmp_path: Path) -> Iterator[Identity]:
    core = world.kube.core
    namespace = f"sa-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": namespace}})
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "reconciler"}})
    request = {"spec": {"audiences": [], "expirationSeconds": 3600}}
    token = core.create_namespaced_service_account_token("reconciler", namespace, request)
    folder = tmp_path / "least"
    folder.mkdir()
    world.control_plane.token_kubeconfig(folder / KUBECONFIG, token.status.token)
    try:
        yield Identity(namespace, f"system:serviceaccount:{namespace}:reconciler", folder)
    finally:
        world.kube.delete_namespace(namespace)
        for resource in ("clusterroles", "clusterrolebindings"):
            world.kube.delete_cluster_rbac(resource, namespace)
        for module in world.fleet.modules.values():
            world.kube.delete_cluster_rbac("clusterroles", module.operator)


def _apply(world: World, documents: list[dict[str, Any]]) -> None:
    """Create ``documents`` as the admin (as ``kubectl apply`` would the first time)."""
    from kubernetes import dynamic as k8s_dynamic

    client: Any = k8s_dynamic.DynamicClient  # untyped: held as Any, as the product does
    dynamic = client(world.kube.api)
    for body in documents:
        resource = dynamic.resources.get(api_version=body["apiVersion"], kind=body["kind"])
        namespace = body["metadata"].get("namespace")
        try:
            resource.create(body=body, namespace=namespace)
        except k8s_client.ApiException as error:
            if error.status != 409:  # the system Namespace may be there already
                raise


def _sync(world: World, identity: Identity) -> str:
    repo = world.fleet.write()
    done = reconciler("sync", repo, "--kubeconfig-dir", identity.kubeconfig_dir, env=world.env)
    assert done.exit_code == 0, done.output
    return done.output


def _check(world: World, identity: Identity) -> tuple[int, str]:
    repo = world.fleet.write()
    done = reconciler("check", repo, "--kubeconfig-dir", identity.kubeconfig_dir, env=world.env)
    return done.exit_code, done.output


def _states(world: World, runtime: str) -> dict[str, str]:
    return {name: m["state"] for name, m in world.status(runtime).items()}


def _synced_until(world: World, identity: Identity, runtime: str, wanted: dict[str, str]) -> None:
    """Sync (the operator made Available as a kubelet would) until the module states are
    ``wanted``; a bounded number of passes."""
    for _ in range(4):
        _sync(world, identity)
        for module in world.fleet.modules.values():
            if world.kube.deployment(module.namespace, module.operator) is not None:
                world.kube.make_available(module.namespace, module.operator)
        if _states(world, runtime) == wanted:
            return
    assert _states(world, runtime) == wanted


def _granted(world: World, identity: Identity) -> list[dict[str, Any]]:
    """Print the role of the fleet as written now for the identity, and apply it as the admin;
    the documents, once ``check`` with the identity approves (the server's RBAC cache takes a
    grant in a moment)."""
    repo = world.fleet.write()
    account = f"{identity.namespace}/reconciler"
    printed = reconciler("rbac", repo, "--name", identity.namespace, "--service-account", account)
    assert printed.exit_code == 0, printed.output
    documents = [d for d in yaml.safe_load_all(printed.stdout) if d]
    _apply(world, documents)
    until(lambda: _check(world, identity)[0] == 0, "check approves the identity")
    return documents


def _calls_none_refused(world: World, identity: Identity, mark: int) -> set[tuple[str, str]]:
    """(verb, resource) of the identity's requests since ``mark``, asserting none was refused."""
    calls = world.control_plane.audit_events(mark, user=identity.user)
    refused = [
        (e["verb"], e.get("objectRef", {}).get("resource"), e.get("requestURI"))
        for e in calls
        if (e.get("responseStatus") or {}).get("code") == 403
    ]
    assert calls, "the requests were made as the ServiceAccount"
    assert refused == []
    return {(e["verb"], e.get("objectRef", {}).get("resource", "")) for e in calls}


def _module_with_rbac(world: World) -> tuple[str, ModuleWithRbac]:
    fleet = world.fleet
    crd = fleet.module("app").crd
    module = ModuleWithRbac(f"app-{fleet.suffix}", crd, ("1.0.0", "2.0.0"), default=True)
    fleet.modules[module.name] = module
    fleet.channel[module.name] = "1.0.0"
    return fleet.runtime("rt", [{"name": module.name}]), module


def test_the_printed_role_is_enough_to_install_upgrade_and_remove_with_no_403(
    world: World, identity: Identity
) -> None:
    fleet, kube = world.fleet, world.kube
    runtime, module = _module_with_rbac(world)
    crd = module.crd
    documents = _granted(world, identity)
    mark = world.control_plane.audit_mark()

    _synced_until(world, identity, runtime, {module.name: "Ready"})  # install
    assert kube.resource(crd, module.namespace, "default") is not None
    fleet.channel[module.name] = "2.0.0"
    _synced_until(world, identity, runtime, {module.name: "Ready"})  # upgrade
    assert kube.config_map(module.namespace, module.config_map("2.0.0")) is not None
    assert kube.config_map(module.namespace, module.config_map("1.0.0")) is None
    fleet.runtimes[runtime]["modules"] = []
    _synced_until(world, identity, runtime, {})  # removal
    until(lambda: kube.crd(crd.name) is None, "the CRD deleted")  # its instances go first

    verbs = _calls_none_refused(world, identity, mark)
    assert {("patch", "clusterroles"), ("delete", "customresourcedefinitions")} <= verbs

    # check, with the module back in git: ok; with escalate taken away: named, exit 1.
    fleet.runtimes[runtime]["modules"] = [{"name": module.name}]
    code, said = _check(world, identity)
    assert code == 0, said
    assert "1 of 1 runtimes ready for sync" in said
    role = next(d for d in documents if d["kind"] == "ClusterRole")
    for rule in role["rules"]:
        rule["verbs"] = [v for v in rule["verbs"] if v != "escalate"]
    k8s_client.RbacAuthorizationV1Api(kube.api).replace_cluster_role(identity.namespace, role)

    until(lambda: _check(world, identity)[0] == 1, "check sees the grant gone")
    code, said = _check(world, identity)
    assert "missing escalate clusterroles.rbac.authorization.k8s.io" in said
    assert "0 of 1 runtimes ready for sync" in said


def test_a_daemon_with_only_the_printed_role_watches_installs_and_removes_with_no_403(
    world: World, identity: Identity, tmp_path: Path
) -> None:
    kube, fleet = world.kube, world.fleet
    runtime, module = _module_with_rbac(world)
    _granted(world, identity)
    mark = world.control_plane.audit_mark()
    daemon = watched_daemon(world, tmp_path, watch=True, kubeconfig_dir=identity.kubeconfig_dir)
    watching = next(daemon)
    try:
        watching.first_run()  # the watches of its kinds listed, as the ServiceAccount
        kube.make_available(module.namespace, module.operator)
        until(lambda: watching.state(runtime, module.name) == "Ready", "Ready after a wake")
        kube.create_resource(module.crd, module.namespace, module.crd.instance("users"))
        fleet.runtimes[runtime]["modules"] = []
        watching.commit("remove the module")
        watching.daemon.poll()
        watching.daemon.wait_idle()
        until(watching._listed, "every instance of the module's kind watched")
        kube.delete_resource(module.crd, module.namespace, "users")
        until(lambda: kube.crd(module.crd.name) is None, "the removal finished after a wake")
    finally:
        next(daemon, None)  # the daemon closed, every watch ended

    verbs = _calls_none_refused(world, identity, mark)
    assert {
        ("watch", module.crd.plural),
        ("watch", "deployments"),
        ("list", module.crd.plural),
    } <= verbs


def _without_watch(documents: list[dict[str, Any]], resources: set[str]) -> None:
    """The printed ClusterRole's ``watch`` of ``resources`` taken away (lists kept)."""
    role = next(d for d in documents if d["kind"] == "ClusterRole")
    rules = []
    for rule in role["rules"]:
        kept = [r for r in rule["resources"] if r not in resources]
        taken = [r for r in rule["resources"] if r in resources]
        if kept:
            rules.append(rule | {"resources": kept})
        if taken:
            verbs = [v for v in rule["verbs"] if v != "watch"]
            rules.append(rule | {"resources": taken, "verbs": verbs})
    role["rules"] = rules


def test_a_daemon_that_may_not_watch_a_kind_everywhere_narrows_or_reports_it_once(
    world: World, identity: Identity, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    kube = world.kube
    runtime, module = _module_with_rbac(world)
    repo = world.fleet.write()
    account = f"{identity.namespace}/reconciler"
    printed = reconciler("rbac", repo, "--name", identity.namespace, "--service-account", account)
    documents = [d for d in yaml.safe_load_all(printed.stdout) if d]
    # no watch of Deployments in all namespaces (a Role in the module's namespace instead),
    # none of CRDs at all (a cluster-scoped kind: nothing to narrow it to)
    _without_watch(documents, {"deployments", "customresourcedefinitions"})
    grant = {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["list", "watch"]}
    role = {
        "apiVersion": f"{RBAC}/v1",
        "kind": "Role",
        "metadata": {"name": "watcher", "namespace": module.namespace},
        "rules": [grant],
    }
    binding = {
        "apiVersion": f"{RBAC}/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "watcher", "namespace": module.namespace},
        "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "watcher"},
        "subjects": [
            {"kind": "ServiceAccount", "name": "reconciler", "namespace": identity.namespace}
        ],
    }
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": module.namespace}}
    _apply(world, [*documents, namespace, role, binding])
    crds = "missing watch customresourcedefinitions.apiextensions.k8s.io"
    until(lambda: crds in _check(world, identity)[1], "check names the watch not granted")
    assert "watch deployments.apps" in _check(world, identity)[1]
    mark = world.control_plane.audit_mark()
    caplog.set_level(logging.INFO)

    daemon = watched_daemon(world, tmp_path, watch=True, kubeconfig_dir=identity.kubeconfig_dir)
    watching = next(daemon)
    try:
        watching.first_run()
        kube.make_available(module.namespace, module.operator)  # told by the narrowed watch
        until(lambda: watching.state(runtime, module.name) == "Ready", "Ready after a wake")
        watching.daemon.reconcile_all(wait=True)  # one more run: nothing logged again
        status = next(r for r in watching.daemon.status()["runtimes"] if r["runtime"] == runtime)
    finally:
        next(daemon, None)

    assert status["watches"]["narrowed"] == [
        {"kind": "Deployment", "apiVersion": "apps/v1", "namespaces": [module.namespace]}
    ]
    refused = status["watches"]["refused"]
    assert [(r["kind"], r["namespace"]) for r in refused] == [("CustomResourceDefinition", "")]
    assert "customresourcedefinitions.apiextensions.k8s.io in all namespaces" in refused[0]["fix"]
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("reconciler")]
    assert len([m for m in lines if "CustomResourceDefinition" in m and "not watched" in m]) == 1
    assert len([m for m in lines if "watched in" in m and "instead" in m]) == 1
    assert not [m for m in lines if "tried again in" in m]  # no watch failing in a loop
    _calls_none_refused(world, identity, mark)  # reviewed first: no list or watch refused


#: What the module's ClusterRole grants beyond its own kind: permissions the identity does not
#: hold, so creating the role needs ``escalate``.
NOT_HELD = [
    {"apiGroups": ["storage.k8s.io"], "resources": ["volumeattachments"], "verbs": ["get", "list"]},
    {"apiGroups": [""], "resources": ["nodes/proxy"], "verbs": ["get"]},
    {"apiGroups": ["certificates.k8s.io"], "resources": ["signers"], "verbs": ["approve"]},
]


@dataclass(frozen=True, slots=True)
class ModuleGrantingMore(ModuleWithRbac):
    """:class:`ModuleWithRbac` whose ClusterRole also grants :data:`NOT_HELD`."""

    def objects(self, version: str) -> list[dict[str, Any]]:
        documents = ModuleWithRbac.objects(self, version)
        for document in documents:
            if document["kind"] == "ClusterRole":
                document["rules"] = [*document["rules"], *NOT_HELD]
        return documents


def test_an_escalate_refusal_names_every_permission_not_held_on_one_line(
    world: World, identity: Identity
) -> None:
    fleet = world.fleet
    crd = fleet.module("app").crd
    module = ModuleGrantingMore(f"app-{fleet.suffix}", crd, ("1.0.0",), default=True)
    fleet.modules[module.name] = module
    fleet.channel[module.name] = "1.0.0"
    fleet.runtime("rt", [{"name": module.name}])
    documents = _granted(world, identity)
    role = next(d for d in documents if d["kind"] == "ClusterRole")
    for rule in role["rules"]:
        rule["verbs"] = [v for v in rule["verbs"] if v != "escalate"]
    k8s_client.RbacAuthorizationV1Api(world.kube.api).replace_cluster_role(identity.namespace, role)
    until(lambda: _check(world, identity)[0] == 1, "check sees escalate gone")

    done = reconciler(
        "sync", fleet.write(), "--kubeconfig-dir", identity.kubeconfig_dir, env=world.env
    )

    assert done.exit_code == 1, done.output
    refused = [line for line in done.output.splitlines() if "not currently held" in line]
    assert refused, done.output
    line = refused[0]
    assert (
        f'user "{identity.user}" is attempting to grant RBAC permissions not currently held' in line
    )
    for shown in (
        '{APIGroups:["storage.k8s.io"], Resources:["volumeattachments"], Verbs:["get" "list"]}',
        '{APIGroups:[""], Resources:["nodes/proxy"], Verbs:["get"]}',
        '{APIGroups:["certificates.k8s.io"], Resources:["signers"], Verbs:["approve"]}',
    ):
        assert shown in line, done.output
    assert "groups=" not in line  # the identity's groups say nothing about what to grant
    assert "reconciler rbac" in line  # and what to do
