"""A chart's Helm hooks run in their phases on a real API server (the ``kube_control_plane``
fixture; a Job stand-in finishes the hook Jobs, tests/support/kube_jobs.py): a pre-install Job
runs before any object of the release and a post-install one after them, in weight order (a
ConfigMap hook of a lower weight first); the Job kept by ``before-hook-creation`` is deleted and
run again by an upgrade, the one marked ``hook-succeeded`` is gone after its phase; a test hook
never runs; no hook is in the module's inventory. A failing pre-install hook fails the module
(Error, HookFailed, naming the Job and its condition's message) and nothing of the release is
applied (docs/charts.md, Hooks). The corpus ingress-nginx chart with its admission webhook on
installs, upgrades and is removed, its certgen Jobs' work done by the stand-in (the Secret made,
the webhook's caBundle patched). The corpus cert-manager chart runs its startupapicheck
post-install hook once, after the release's objects, and the hook is never in the inventory."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.cluster.kube import k8s_client
from reconciler.core.objects import ObjectRef
from tests.support.charts import CHART_TEMPLATES, corpus_chart_module
from tests.support.kube_control_plane import ControlPlane
from tests.support.kube_fleet import KubeFleet, kube_fleet
from tests.support.kube_jobs import JobStandIn, jobs_finished
from tests.support.repos import API, dump, write_files

pytestmark = pytest.mark.kube

MODULE = "hooked"


def _hook(kind: str, name: str, phases: str, weight: int, policy: str | None = None) -> str:
    annotations = {"helm.sh/hook": phases, "helm.sh/hook-weight": str(weight)}
    if policy is not None:
        annotations["helm.sh/hook-delete-policy"] = policy
    meta = {"name": "{{ .Release.Name }}-" + name, "annotations": annotations}
    if kind == "ConfigMap":
        return dump({"apiVersion": "v1", "kind": kind, "metadata": meta, "data": {"a": "b"}})
    if kind == "Pod":
        spec = {"containers": [{"name": "t", "image": "example/test:1"}]}
        return dump({"apiVersion": "v1", "kind": kind, "metadata": meta, "spec": spec})
    container = {"name": "h", "image": "example/hook:1", "args": ["{{ .Values.greeting }}"]}
    template = {"spec": {"restartPolicy": "Never", "containers": [container]}}
    job: dict[str, Any] = {"backoffLimit": 0, "template": template}
    return dump({"apiVersion": "batch/v1", "kind": kind, "metadata": meta, "spec": job})


HOOKS = "---\n".join(
    (
        _hook("Job", "pre", "pre-install,pre-upgrade", 0),
        _hook("ConfigMap", "hook-config", "pre-install,pre-upgrade", -5),
        _hook("Job", "post", "post-install", 0, "hook-succeeded"),
        _hook("Pod", "test", "test", 0),
        _hook("Job", "drain", "pre-delete", 0),
        _hook("Job", "cleanup", "post-delete", 0),
    )
)


def _write_module(fleet: KubeFleet) -> None:
    spec = {
        "namespace": fleet.namespace,
        "operator": {"kind": "Deployment", "name": f"{MODULE}-operator"},
    }
    module = {"apiVersion": API, "kind": "Module", "metadata": {"name": MODULE}, "spec": spec}
    chart = {"apiVersion": "v2", "name": MODULE, "version": "1.0.0", "appVersion": "1.0.0"}
    folder = f"modules/{MODULE}/1.0.0/chart"
    files = {
        f"modules/{MODULE}/module.yaml": dump(module),
        f"{folder}/Chart.yaml": dump(chart),
        f"{folder}/values.yaml": dump({"greeting": "hello", "size": "small", "replicas": 1}),
        f"{folder}/templates/hooks.yaml": HOOKS,
        **{f"{folder}/{path}": text for path, text in CHART_TEMPLATES.items()},
    }
    write_files(fleet.repo, files)


def _entries(values: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"name": MODULE, "version": "1.0.0", "values": values}]


@pytest.fixture
def fleet(kube_control_plane: ControlPlane, tmp_path: Path) -> Iterator[KubeFleet]:
    for fleet in kube_fleet(kube_control_plane, tmp_path):
        _write_module(fleet)
        yield fleet


def _stand_in(fleet: KubeFleet, **fail: str) -> JobStandIn:
    watched = (fleet.namespace, f"{MODULE}-operator")
    return JobStandIn(fleet.control_plane.kubeconfig, watched, dict(fail))


def _ref(fleet: KubeFleet, kind: str, name: str) -> ObjectRef:
    api = "batch/v1" if kind == "Job" else "v1"
    return ObjectRef(api, kind, fleet.namespace, f"{MODULE}-{name}")


def _inventory(fleet: KubeFleet) -> dict[str, Any] | None:
    ref = ObjectRef("v1", "ConfigMap", fleet.system_namespace, f"inventory-{MODULE}")
    body = fleet.cluster.get(ref)
    return None if body is None else json.loads(body["data"]["inventory.json"])


def test_hooks_run_in_their_phases_on_install_upgrade_and_removal(fleet: KubeFleet) -> None:
    fleet.set_modules(_entries({}))
    validated = fleet.reconciler("validate", str(fleet.repo))
    assert validated.exit_code == 0, validated.output
    with jobs_finished(_stand_in(fleet)) as stand_in:
        fleet.sync_until("succeeded", operator=f"{MODULE}-operator")
        installed = list(stand_in.runs)
        # before the release's objects, the pre-install Job; after them, the post-install one
        assert installed == [(f"{MODULE}-pre", False), (f"{MODULE}-post", True)]
        pre = fleet.cluster.get(_ref(fleet, "Job", "pre"))
        assert pre is not None  # before-hook-creation: kept until the next run
        first_run = pre["metadata"]["annotations"]["reconciler.dev/hook-run"]
        assert first_run.endswith("/pre-install")
        assert fleet.cluster.get(_ref(fleet, "Job", "post")) is None  # hook-succeeded
        assert fleet.cluster.get(_ref(fleet, "ConfigMap", "hook-config")) is not None
        assert fleet.cluster.get(_ref(fleet, "Pod", "test")) is None  # helm test's only
        inventory = _inventory(fleet)
        assert inventory is not None
        hook_names = {f"{MODULE}-{n}" for n in ("pre", "post", "hook-config", "test")}
        assert {o["name"] for o in inventory["objects"]} == {
            f"{MODULE}-settings",
            f"{MODULE}-operator",
        }
        assert not hook_names & {o["name"] for o in inventory["objects"]}

        fleet.set_modules(_entries({"greeting": "bonjour"}))
        fleet.sync_until("succeeded", operator=f"{MODULE}-operator")
        assert stand_in.names()[len(installed) :] == [f"{MODULE}-pre"]  # pre-upgrade only
        again = fleet.cluster.get(_ref(fleet, "Job", "pre"))
        assert again is not None
        assert again["metadata"]["annotations"]["reconciler.dev/hook-run"].endswith("/pre-upgrade")
        container = again["spec"]["template"]["spec"]["containers"][0]
        assert container["args"] == ["bonjour"]  # created again from the new render

        upgraded = len(stand_in.runs)
        fleet.set_modules([])
        fleet.sync_until("succeeded")
        # pre-delete while the release's objects are there, post-delete once they are gone
        removed = stand_in.runs[upgraded:]
        assert removed == [(f"{MODULE}-drain", True), (f"{MODULE}-cleanup", False)]
    assert _inventory(fleet) is None
    assert fleet.cluster.get(_ref(fleet, "Job", "cleanup")) is not None  # as Helm leaves it


def test_a_failing_pre_install_hook_applies_nothing_and_says_why(fleet: KubeFleet) -> None:
    fleet.set_modules(_entries({}))
    failing = {f"{MODULE}-pre": "Job has reached the specified backoff limit"}
    with jobs_finished(_stand_in(fleet, **failing)):
        result = fleet.sync()
    assert result.exit_code != 0, result.output
    assert f"hook Job/{fleet.namespace}/{MODULE}-pre (pre-install) failed" in result.output
    assert "BackoffLimitExceeded" in result.output
    assert "reached the specified backoff limit" in result.output
    deployment = ObjectRef("apps/v1", "Deployment", fleet.namespace, f"{MODULE}-operator")
    assert fleet.cluster.get(deployment) is None
    assert fleet.cluster.get(_ref(fleet, "ConfigMap", "settings")) is None
    assert _inventory(fleet) is None
    status = fleet.reconciler("status", "--runtime", fleet.runtime, "-o", "json")
    assert "HookFailed" in status.output, status.output


CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nstand-in\n-----END CERTIFICATE-----\n")
NGINX_OPERATOR = "ingress-nginx-controller"


def _create_secret(api_client: Any, namespace: str) -> None:
    """What ``kube-webhook-certgen create`` does: the webhook's certificate as a Secret."""
    data = {"ca": CA.decode(), "cert": CA.decode(), "key": base64.b64encode(b"key").decode()}
    body = {"metadata": {"name": "ingress-nginx-admission"}, "data": data}
    core = k8s_client.CoreV1Api(api_client)
    try:
        core.create_namespaced_secret(namespace, body)
    except k8s_client.ApiException as error:  # a second run: certgen keeps the Secret
        if error.status != 409:
            raise


def _patch_webhook(api_client: Any, namespace: str) -> None:
    """What ``kube-webhook-certgen patch`` does: the Secret's CA as the webhook's caBundle."""
    secret = k8s_client.CoreV1Api(api_client).read_namespaced_secret(
        "ingress-nginx-admission", namespace
    )
    admission = k8s_client.AdmissionregistrationV1Api(api_client)
    webhook = admission.read_validating_webhook_configuration("ingress-nginx-admission")
    patch = [
        {"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": secret.data["ca"]}
        for i in range(len(webhook.webhooks))
    ]
    admission.patch_validating_webhook_configuration("ingress-nginx-admission", patch)


def test_ingress_nginx_with_its_admission_webhook_installs_upgrades_and_is_removed(
    fleet: KubeFleet,
) -> None:
    namespace = fleet.namespace
    files = corpus_chart_module(
        "ingress-nginx", "ingress-nginx", "1.15.1", namespace=namespace, operator=NGINX_OPERATOR
    )
    write_files(fleet.repo, files)
    entry = {"name": "ingress-nginx", "version": "1.15.1"}
    fleet.set_modules([{**entry, "values": {}}])
    actions: dict[str, Callable[[Any, str], None]] = {
        "ingress-nginx-admission-create": _create_secret,
        "ingress-nginx-admission-patch": _patch_webhook,
    }
    stand_in = JobStandIn(fleet.control_plane.kubeconfig, (namespace, NGINX_OPERATOR))
    stand_in.actions = actions
    webhook = ObjectRef(
        "admissionregistration.k8s.io/v1",
        "ValidatingWebhookConfiguration",
        "",
        "ingress-nginx-admission",
    )
    try:
        with jobs_finished(stand_in):
            try:
                fleet.sync_until("succeeded", operators=[(namespace, NGINX_OPERATOR)], rounds=8)
            except AssertionError as error:
                raise AssertionError(f"{error}\nstand-in: {stand_in.problems}") from error
            assert stand_in.runs == [
                ("ingress-nginx-admission-create", False),  # before the controller
                ("ingress-nginx-admission-patch", True),  # after it
            ]
            installed = fleet.cluster.get(webhook)
            assert installed is not None
            assert {w["clientConfig"].get("caBundle") for w in installed["webhooks"]} == {
                CA.decode()
            }
            secret = ObjectRef("v1", "Secret", namespace, "ingress-nginx-admission")
            assert fleet.cluster.get(secret) is not None
            # hook-succeeded: the certgen RBAC and Jobs are gone once their phase succeeded
            role = ObjectRef(
                "rbac.authorization.k8s.io/v1", "ClusterRole", "", "ingress-nginx-admission"
            )
            assert fleet.cluster.get(role) is None

            fleet.set_modules([{**entry, "values": {"controller": {"replicaCount": 2}}}])
            fleet.sync_until("succeeded", operators=[(namespace, NGINX_OPERATOR)])
            assert stand_in.names()[2:] == [
                "ingress-nginx-admission-create",  # pre-upgrade
                "ingress-nginx-admission-patch",  # post-upgrade
            ]
            upgraded = fleet.cluster.get(webhook)
            assert upgraded is not None  # applied again: the caBundle stays (not ours)
            assert upgraded["webhooks"][0]["clientConfig"].get("caBundle") == CA.decode()

            fleet.set_modules([])
            fleet.sync_until("succeeded")
        assert fleet.cluster.get(webhook) is None
    finally:
        for ref in _nginx_cluster_objects(fleet):  # what a failed test would leave
            fleet.cluster.delete(ref)


def _nginx_cluster_objects(fleet: KubeFleet) -> list[ObjectRef]:
    rbac = "rbac.authorization.k8s.io/v1"
    refs = [ObjectRef("networking.k8s.io/v1", "IngressClass", "", "nginx")]
    refs.append(
        ObjectRef(
            "admissionregistration.k8s.io/v1",
            "ValidatingWebhookConfiguration",
            "",
            "ingress-nginx-admission",
        )
    )
    for name in ("ingress-nginx", "ingress-nginx-admission"):
        refs += [ObjectRef(rbac, "ClusterRole", "", name)]
        refs += [ObjectRef(rbac, "ClusterRoleBinding", "", name)]
    return [r for r in refs if fleet.cluster.get(r) is not None]


CERT_MANAGER_OPERATOR = "cert-manager"
STARTUP_CHECK = "cert-manager-startupapicheck"


def test_cert_manager_runs_its_startupapicheck_post_install_hook(fleet: KubeFleet) -> None:
    files = corpus_chart_module(
        "cert-manager",
        "cert-manager",
        "0.0.0",
        namespace=fleet.namespace,
        operator=CERT_MANAGER_OPERATOR,
        values={"crds": {"enabled": True}},  # its hooks run: the default
    )
    write_files(fleet.repo, files)
    fleet.set_modules([{"name": "cert-manager", "version": "0.0.0", "values": {}}])
    stand_in = JobStandIn(fleet.control_plane.kubeconfig, (fleet.namespace, CERT_MANAGER_OPERATOR))
    job = ObjectRef("batch/v1", "Job", fleet.namespace, STARTUP_CHECK)
    operators = [(fleet.namespace, CERT_MANAGER_OPERATOR)]
    try:
        with jobs_finished(stand_in):
            try:
                fleet.sync_until("succeeded", operators=operators, rounds=8)
            except AssertionError as error:
                raise AssertionError(f"{error}\nstand-in: {stand_in.problems}") from error
            # post-install: once the release's objects are applied, the operator among them
            assert stand_in.runs == [(STARTUP_CHECK, True)]
            ref = ObjectRef("v1", "ConfigMap", fleet.system_namespace, "inventory-cert-manager")
            inventory = fleet.cluster.get(ref)
            assert inventory is not None
            assert STARTUP_CHECK not in json.dumps(inventory["data"])  # a hook: never ours
            # hook-succeeded: the Job and its RBAC are gone once the phase succeeded
            assert fleet.cluster.get(job) is None

            fleet.set_modules([])
            fleet.sync_until("succeeded")
        assert stand_in.names() == [STARTUP_CHECK]  # run once: no delete hook in this chart
    finally:
        for ref in _cert_manager_cluster_objects(fleet, files):
            fleet.cluster.delete(ref)


def _cert_manager_cluster_objects(
    fleet: KubeFleet, files: dict[str, str | bytes]
) -> list[ObjectRef]:
    """The chart's cluster-wide objects left: its CRDs (kept by ``helm.sh/resource-policy``),
    and what a failed test would leave (read from the chart's render)."""
    write_files(fleet.repo, files)
    fleet.set_modules([{"name": "cert-manager", "version": "0.0.0", "values": {}}])
    shown = fleet.reconciler("render", str(fleet.repo), "--runtime", fleet.runtime)
    bodies = [d for d in yaml.safe_load_all(shown.output) if d] if shown.exit_code == 0 else []
    refs = [ObjectRef.of(b) for b in bodies if not b.get("metadata", {}).get("namespace")]
    return [r for r in refs if r.kind != "Namespace" and fleet.cluster.get(r) is not None]
