"""The corpus charts as modules on a real API server (the ``kube_control_plane`` fixture):
cert-manager (CRDs enabled, its post-install hook stated skipped: ``hooks: Skip``) and
ingress-nginx (its admission webhook and hooks switched off by values; with them on:
tests/e2e/test_chart_hooks.py), install with ``sync``, upgrade to changed runtime
values, and are removed by the CreateAndDelete rules (L8), the CRDs cert-manager marks
``helm.sh/resource-policy: keep`` released, not deleted, as Helm leaves them. A small chart's
release namespace is created by the sync and left by the module's removal; its Secret written with
``stringData`` is no drift (docs/charts.md). A small chart's objects marked
``helm.sh/resource-policy: keep`` stay, released and reported kept, when a version stops rendering
them and when the module is removed; an unmarked one the version drops is pruned."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.core.inventory import inventory_ref
from reconciler.core.objects import ObjectRef
from tests.support.charts import (
    CHART_TEMPLATES,
    INGRESS_NGINX,
    chart_module_files,
    corpus_chart_module,
)
from tests.support.kube_control_plane import ControlPlane
from tests.support.kube_fleet import KubeFleet, kube_fleet, until
from tests.support.repos import write_files

CRD = ObjectRef(
    "apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "certificates.cert-manager.io"
)
INGRESS_CLASS = ObjectRef("networking.k8s.io/v1", "IngressClass", "", "nginx")


@pytest.fixture
def fleet(
    kube_control_plane: ControlPlane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[KubeFleet]:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for fleet in kube_fleet(kube_control_plane, tmp_path):
        try:
            yield fleet
        finally:
            _delete_cluster_objects(fleet)


def _namespaces(fleet: KubeFleet) -> tuple[str, str]:
    return f"cm-{fleet.suffix}", f"nginx-{fleet.suffix}"


def _write_modules(fleet: KubeFleet) -> None:
    cert_ns, nginx_ns = _namespaces(fleet)
    files = {
        **corpus_chart_module(
            "cert-manager",
            "cert-manager",
            "0.0.0",
            namespace=cert_ns,
            operator="cert-manager",
            values={"crds": {"enabled": True}},  # startupapicheck's hook Job left on,
            hooks="Skip",  # and stated skipped: never run, never applied
        ),
        **corpus_chart_module(
            "ingress-nginx",
            "ingress-nginx",
            "1.15.1",
            namespace=nginx_ns,
            operator="ingress-nginx-controller",
            values=INGRESS_NGINX,
        ),
    }
    write_files(fleet.repo, files)
    for namespace in (cert_ns, nginx_ns):  # as `helm install --create-namespace` would
        fleet.create_namespace(namespace)


def _entries(cert: dict[str, Any], nginx: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"name": "cert-manager", "version": "0.0.0", "values": cert},
        {"name": "ingress-nginx", "version": "1.15.1", "values": nginx},
    ]


def _operators(fleet: KubeFleet) -> list[tuple[str, str]]:
    cert_ns, nginx_ns = _namespaces(fleet)
    return [(cert_ns, "cert-manager"), (nginx_ns, "ingress-nginx-controller")]


def _replicas(fleet: KubeFleet) -> list[int]:
    found = []
    for namespace, name in _operators(fleet):
        body = fleet.cluster.get(ObjectRef("apps/v1", "Deployment", namespace, name))
        assert body is not None, f"{namespace}/{name}"
        found.append(body["spec"]["replicas"])
    return found


def test_corpus_charts_install_upgrade_and_are_removed(fleet: KubeFleet) -> None:
    _write_modules(fleet)
    fleet.set_modules(_entries({}, {}))
    validated = fleet.reconciler("validate", str(fleet.repo))
    assert validated.exit_code == 0, validated.output
    rendered = fleet.reconciler("render", str(fleet.repo), "--runtime", fleet.runtime)
    assert rendered.exit_code == 0, rendered.output
    kinds = [d["kind"] for d in yaml.safe_load_all(rendered.output) if d]
    assert kinds.count("CustomResourceDefinition") == 6
    assert "Job" not in kinds  # hooks switched off or stated skipped: never objects
    assert "# hooks skipped (spec.hooks: Skip), never run: Job/cert-manager-startupapicheck" in (
        rendered.output
    )

    fleet.sync_until("succeeded", operators=_operators(fleet))
    assert fleet.cluster.get(CRD) is not None
    assert fleet.cluster.get(INGRESS_CLASS) is not None
    assert _replicas(fleet) == [1, 1]
    cert_ns, _ = _namespaces(fleet)
    hook = ObjectRef("batch/v1", "Job", cert_ns, "cert-manager-startupapicheck")
    assert fleet.cluster.get(hook) is None

    fleet.set_modules(_entries({"replicaCount": 2}, {"controller": {"replicaCount": 2}}))
    fleet.sync_until("succeeded", operators=_operators(fleet))
    assert _replicas(fleet) == [2, 2]

    fleet.set_modules([])
    removed = fleet.sync_until("succeeded", operators=_operators(fleet))
    until(lambda: fleet.cluster.get(INGRESS_CLASS) is None)
    # cert-manager's CRDs carry `helm.sh/resource-policy: keep` (its crds.keep, on by default):
    # as `helm uninstall` leaves them, the removal releases them (tests/contract: keep on prune)
    kept = fleet.cluster.get(CRD)
    assert kept is not None
    assert "reconciler.dev/module" not in (kept["metadata"].get("labels") or {})
    assert f"{CRD.subject} is kept (helm.sh/resource-policy: keep)" in removed.output
    for namespace, name in _operators(fleet):
        assert fleet.cluster.get(ObjectRef("apps/v1", "Deployment", namespace, name)) is None


def _delete_cluster_objects(fleet: KubeFleet) -> None:
    """What a failed run left: the charts' cluster-wide objects and their namespaces."""
    result = fleet.reconciler("render", str(fleet.repo), "--runtime", fleet.runtime)
    bodies = [d for d in yaml.safe_load_all(result.output) if d] if result.exit_code == 0 else []
    for body in bodies:
        if not body.get("metadata", {}).get("namespace"):
            _quietly_delete(fleet, ObjectRef.of(body))
    for namespace in _namespaces(fleet):
        _quietly_delete(fleet, ObjectRef("v1", "Namespace", "", namespace))


def _quietly_delete(fleet: KubeFleet, ref: ObjectRef) -> None:
    try:
        fleet.cluster.delete(ref)
    except Exception:
        return


SECRET_TEMPLATE = (
    "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {{ .Release.Name }}-greeting\n"
    "stringData:\n  greeting: {{ .Values.greeting | quote }}\n"
)


def test_a_charts_namespace_is_created_and_its_string_data_secret_is_no_drift(
    fleet: KubeFleet,
) -> None:
    name = f"web-{fleet.suffix}"
    namespace = ObjectRef("v1", "Namespace", "", f"{name}-system")
    templates = {**CHART_TEMPLATES, "templates/secret.yaml": SECRET_TEMPLATE}
    write_files(fleet.repo, chart_module_files(name, templates=templates))
    fleet.set_modules([{"name": name, "version": "1.0.0"}])
    assert fleet.cluster.get(namespace) is None
    try:
        fleet.sync_until("succeeded", operators=[(namespace.name, f"{name}-operator")])
        created = fleet.cluster.get(namespace)
        assert created is not None
        assert "reconciler.dev/module" not in (created["metadata"].get("labels") or {})
        secret = fleet.cluster.get(ObjectRef("v1", "Secret", namespace.name, f"{name}-greeting"))
        assert secret is not None
        assert "stringData" not in secret
        assert secret["data"] == {"greeting": "aGVsbG8="}  # "hello", stored base64-encoded

        where = (
            "--runtime",
            fleet.runtime,
            "--kubeconfig-dir",
            str(fleet.control_plane.kubeconfig_dir),
        )
        diff = fleet.reconciler("diff", str(fleet.repo), *where)
        assert diff.exit_code == 0, diff.output
        assert "hello" not in diff.output

        fleet.set_modules([])
        fleet.sync_until("succeeded")
        operator = ObjectRef("apps/v1", "Deployment", namespace.name, f"{name}-operator")
        until(lambda: fleet.cluster.get(operator) is None)
        assert fleet.cluster.get(namespace) is not None  # never ours: left by the removal
    finally:
        _quietly_delete(fleet, namespace)


def _capabilities_chart(fleet: KubeFleet, name: str, group: str, kube_version: str) -> None:
    """A chart module whose ConfigMap shows what ``.Capabilities`` said, with a ``kubeVersion``
    constraint."""
    shown = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-capabilities\n"
        "data:\n  kube: {{ .Capabilities.KubeVersion.Version | quote }}\n"
        f'  gadgets: {{{{ .Capabilities.APIVersions.Has "{group}/v1" | quote }}}}\n'
        f'  gadgetKind: {{{{ .Capabilities.APIVersions.Has "{group}/v1/Gadget" | quote }}}}\n'
    )
    files = chart_module_files(name, templates={**CHART_TEMPLATES, "templates/caps.yaml": shown})
    chart = f"modules/{name}/1.0.0/chart/Chart.yaml"
    files[chart] += f'kubeVersion: "{kube_version}"\n'
    write_files(fleet.repo, files)


def _gadget_crd(group: str) -> dict[str, Any]:
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"gadgets.{group}"},
        "spec": {
            "group": group,
            "names": {"kind": "Gadget", "plural": "gadgets", "singular": "gadget"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": True, "storage": True, "schema": schema}],
        },
    }


def test_a_chart_renders_for_the_capabilities_of_the_cluster_it_goes_to(
    fleet: KubeFleet,
) -> None:
    name, group = f"caps-{fleet.suffix}", f"caps{fleet.suffix}.example.io"
    crd = _gadget_crd(group)
    fleet.cluster.apply(crd, field_manager="kubectl")  # a CRD of the cluster, not the chart's
    namespace = f"{name}-system"
    settings = ObjectRef("v1", "ConfigMap", namespace, f"{name}-capabilities")
    server = fleet.cluster.server_version()
    fleet.set_modules([{"name": name, "version": "1.0.0"}])
    try:
        # a cluster too old for the chart: refused by its kubeVersion, nothing applied
        _capabilities_chart(fleet, name, group, ">=1.99.0-0")
        refused = fleet.sync()
        assert refused.exit_code == 1, refused.output  # the operation failed, nothing applied
        assert (
            f"chart requires kubeVersion: >=1.99.0-0 which is incompatible with Kubernetes "
            f"{server}" in refused.output
        )
        assert fleet.cluster.get(settings) is None
        # offline, validate judges by what that sync recorded
        validated = fleet.reconciler("validate", str(fleet.repo))
        assert validated.exit_code == 1
        assert f"incompatible with Kubernetes {server}" in validated.output

        # one it meets: rendered for it, the CRD it serves seen by .Capabilities.APIVersions
        _capabilities_chart(fleet, name, group, ">=1.20.0-0")
        fleet.sync_until("succeeded", operators=[(namespace, f"{name}-operator")])
        shown = fleet.cluster.get(settings)
        assert shown is not None
        assert shown["data"] == {"kube": server, "gadgets": "true", "gadgetKind": "true"}
        validated = fleet.reconciler("validate", str(fleet.repo))  # and says which it used
        assert validated.exit_code == 0, validated.output
        said = f"chart .Capabilities: {fleet.runtime}: as the last sync recorded their clusters"
        assert f"{said} (Kubernetes {server}, " in validated.output

        # the CRD gone from the cluster: the next sync renders the other branch
        fleet.cluster.delete(ObjectRef.of(crd))
        until(lambda: _gadgets_served(fleet, group) is False)
        fleet.sync_until("succeeded", operators=[(namespace, f"{name}-operator")])
        shown = fleet.cluster.get(settings)
        assert shown is not None
        assert shown["data"]["gadgets"] == "false"
    finally:
        _quietly_delete(fleet, ObjectRef.of(crd))
        _quietly_delete(fleet, ObjectRef("v1", "Namespace", "", namespace))


def _gadgets_served(fleet: KubeFleet, group: str) -> bool:
    return any(k.group == group for k in fleet.cluster.served_kinds())


KEPT_TEMPLATES = {
    **CHART_TEMPLATES,
    # while .Values.cache: a ConfigMap Helm keeps, and one it does not; always: one it keeps
    "templates/cache.yaml": (
        "{{- if .Values.cache }}\n"
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cache\n"
        '  annotations:\n    helm.sh/resource-policy: keep\ndata: {warm: "yes"}\n'
        "---\n"
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-scratch\n"
        'data: {warm: "no"}\n'
        "{{- end }}\n"
    ),
    "templates/state.yaml": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-state\n"
        '  annotations:\n    helm.sh/resource-policy: keep\ndata: {users: "3"}\n'
    ),
}


def _released(fleet: KubeFleet, ref: ObjectRef) -> bool:
    """Whether ``ref`` is on the server without our labels and version annotation."""
    body = fleet.cluster.get(ref)
    assert body is not None, f"{ref.subject} was deleted"
    labels = body["metadata"].get("labels") or {}
    annotations = body["metadata"].get("annotations") or {}
    return "reconciler.dev/module" not in labels and (
        "reconciler.dev/module-version" not in annotations
    )


def test_a_chart_object_helm_keeps_stays_when_a_version_drops_it_and_when_the_module_goes(
    fleet: KubeFleet,
) -> None:
    name = f"keep-{fleet.suffix}"
    namespace = f"{name}-system"
    defaults = {"greeting": "hello", "size": "small", "replicas": 1}
    files = {
        **chart_module_files(name, defaults={**defaults, "cache": True}, templates=KEPT_TEMPLATES),
        **chart_module_files(
            name, "2.0.0", defaults={**defaults, "cache": False}, templates=KEPT_TEMPLATES
        ),
    }
    write_files(fleet.repo, files)
    cache, scratch, state = (
        ObjectRef("v1", "ConfigMap", namespace, f"{name}-{part}")
        for part in ("cache", "scratch", "state")
    )
    operator = f"{name}-operator"
    try:
        fleet.set_modules([{"name": name, "version": "1.0.0"}])
        fleet.sync_until("succeeded", operators=[(namespace, operator)])
        assert fleet.cluster.get(cache) is not None
        assert fleet.cluster.get(scratch) is not None

        fleet.set_modules([{"name": name, "version": "2.0.0"}])  # no cache any more
        upgraded = fleet.sync()  # the pass that drops it says so, whatever the operator does
        assert f"{cache.subject} is kept (helm.sh/resource-policy: keep)" in upgraded.output, (
            upgraded.output
        )
        fleet.sync_until("succeeded", operators=[(namespace, operator)])
        assert _released(fleet, cache)  # as `helm upgrade` leaves it
        until(lambda: fleet.cluster.get(scratch) is None)  # pruned: nothing keeps it
        inventory = fleet.cluster.get(inventory_ref(fleet.system_namespace, name))
        assert inventory is not None
        assert f"{name}-cache" not in str(inventory["data"])  # no longer ours
        assert f"{name}-state" in str(inventory["data"])

        fleet.set_modules([])
        removed = fleet.sync_until("succeeded")
        assert f"{state.subject} is kept (helm.sh/resource-policy: keep)" in removed.output
        until(
            lambda: (
                fleet.cluster.get(ObjectRef("apps/v1", "Deployment", namespace, operator)) is None
            )
        )
        assert _released(fleet, state)  # as `helm uninstall` leaves it
        assert _released(fleet, cache)
    finally:
        _quietly_delete(fleet, ObjectRef("v1", "Namespace", "", namespace))
