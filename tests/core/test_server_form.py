"""What the API server rewrites is no drift, with plain data: quantities in the server's words
(figures read off a real API server, see tests/contract), ports with their defaulted protocol, empty
values the server leaves out, and the field diff of a live object as the server answers it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.fielddiff import field_diff, removed_owned_fields
from reconciler.core.model import ModuleRef, ModuleVersion
from reconciler.core.quantity import MILLI, canonical_quantity
from reconciler.core.serverform import is_builtin, server_form
from tests.support import lifecycle_helpers as helpers
from tests.support.server_answers import SERVER_ANSWERS


@pytest.mark.parametrize(("written", "answered"), SERVER_ANSWERS)
def test_a_resource_quantity_is_answered_as_the_server_answers_it(
    written: object, answered: str
) -> None:
    assert canonical_quantity(written, scale=MILLI) == answered


def test_only_a_resource_list_is_rounded_to_milli() -> None:
    assert canonical_quantity("1n") == "1n"
    assert canonical_quantity("0.1n") == "1n"
    assert canonical_quantity("1n", scale=MILLI) == "1m"


@pytest.mark.parametrize("value", ["http", "", "1.5.5", "Mi", "1x", True, None, [1]])
def test_what_is_no_quantity_is_left_alone(value: object) -> None:
    assert canonical_quantity(value) is None


def _deployment(container: dict[str, Any], **pod: Any) -> dict[str, Any]:
    spec = {"containers": [container], **pod}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "op", "namespace": "ns"},
        "spec": {"template": {"spec": spec}},
    }


def _container(**fields: Any) -> dict[str, Any]:
    return {"name": "c", "image": "x", **fields}


def test_the_server_form_canonicalises_quantities_and_defaults_the_port_protocol() -> None:
    resources = {"limits": {"cpu": "1000m", "memory": "1024Mi"}, "requests": {"cpu": 0.5}}
    ports = [{"containerPort": 8080}, {"containerPort": 53, "protocol": "UDP"}]
    volumes = [{"name": "v", "emptyDir": {"sizeLimit": "2048Mi"}}]
    body = _deployment(_container(resources=resources, ports=ports), volumes=volumes)

    pod = server_form(body)["spec"]["template"]["spec"]

    container = pod["containers"][0]
    assert container["resources"] == {
        "limits": {"cpu": "1", "memory": "1Gi"},
        "requests": {"cpu": "500m"},
    }
    assert container["ports"] == [
        {"containerPort": 8080, "protocol": "TCP"},
        {"containerPort": 53, "protocol": "UDP"},
    ]
    assert pod["volumes"] == [{"name": "v", "emptyDir": {"sizeLimit": "2Gi"}}]
    assert body["spec"]["template"]["spec"]["containers"][0]["resources"] == resources


def test_service_ports_quotas_and_limit_ranges_in_the_server_form() -> None:
    service = {"apiVersion": "v1", "kind": "Service", "spec": {"ports": [{"port": 80}]}}
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "spec": {"hard": {"cpu": "2000m"}}}
    limits = {"apiVersion": "v1", "kind": "LimitRange",
              "spec": {"limits": [{"type": "Container", "max": {"memory": "1024Mi"}}]}}  # fmt: skip

    assert server_form(service)["spec"]["ports"] == [{"port": 80, "protocol": "TCP"}]
    assert server_form(quota)["spec"]["hard"] == {"cpu": "2"}
    assert server_form(limits)["spec"]["limits"][0]["max"] == {"memory": "1Gi"}


def test_custom_resources_and_crds_are_stored_as_written() -> None:
    spec = {"resources": {"limits": {"cpu": "1000m"}}, "ports": [{"port": 1}]}
    custom = {"apiVersion": "example.io/v1", "kind": "Thing", "spec": spec}
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "spec": {"x": {"resources": {"limits": {"cpu": "1000m"}}}}}  # fmt: skip

    assert server_form(custom) == custom
    assert server_form(crd) == crd
    assert all(is_builtin(v) for v in ("v1", "apps/v1", "networking.k8s.io/v1"))
    assert not is_builtin("monitoring.coreos.com/v1")


def _as_the_server_answers(body: dict[str, Any]) -> dict[str, Any]:
    """A Deployment as a real server answers the apply of ``_written()`` (trimmed)."""
    live = server_form(body)
    container = live["spec"]["template"]["spec"]["containers"][0]
    container.pop("args")
    container["imagePullPolicy"] = "Always"
    key = 'k:{"containerPort":8080,"protocol":"TCP"}'
    item: dict[str, Any] = {
        ".": {}, "f:args": {}, "f:name": {}, "f:image": {},
        "f:ports": {key: {".": {}, "f:containerPort": {}}},
        "f:resources": {"f:limits": {"f:cpu": {}, "f:memory": {}}},
    }  # fmt: skip
    fields = {"f:spec": {"f:template": {"f:spec": {"f:containers": {'k:{"name":"c"}': item}}}}}
    managed = {"manager": "reconciler", "operation": "Apply", "fieldsV1": fields}
    live["metadata"] = {**live["metadata"], "managedFields": [managed]}
    return live


def _written() -> dict[str, Any]:
    resources = {"limits": {"cpu": "1000m", "memory": "1024Mi"}}
    return _deployment(_container(args=[], ports=[{"containerPort": 8080}], resources=resources))


def test_a_live_object_as_the_server_answers_it_is_no_change_in_the_server_form() -> None:
    written = _written()
    live = _as_the_server_answers(written)
    answered = server_form(written)
    as_written = {c.path for c in field_diff(written, live)}
    as_written |= {c.path for c in removed_owned_fields(written, live, "reconciler")}
    assert "spec.template.spec.containers[c].resources.limits.cpu" in as_written
    # (a port the server keys by port and protocol is known to fielddiff itself: no assertion)

    assert field_diff(answered, live) == ()
    assert removed_owned_fields(answered, live, "reconciler") == ()


def test_a_real_change_is_still_drift_in_the_server_form() -> None:
    written = _written()
    live = _as_the_server_answers(written)
    live["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "2"

    changes = field_diff(server_form(written), live)

    assert [(c.path, c.old, c.new) for c in changes] == [
        ("spec.template.spec.containers[c].resources.limits.cpu", "2", "1")
    ]


@pytest.mark.parametrize("empty", ["", [], {}])
def test_an_empty_value_the_server_leaves_out_is_no_change(empty: object) -> None:
    desired = {"kind": "ConfigMap", "spec": {"field": empty, "kept": 1}}

    assert field_diff(desired, {"kind": "ConfigMap", "spec": {"kept": 1}}) == ()
    assert field_diff({"spec": {"field": "x"}}, {"spec": {}}) != ()


def test_a_second_sync_on_the_in_memory_cluster_writes_nothing() -> None:
    """The in-memory cluster answers in the server's words too: the same drift showed there."""
    resources = {"limits": {"cpu": "1000m", "memory": "1024Mi"}, "requests": {"cpu": 0.5}}
    operator = helpers.deployment("widget-operator", "1.0.0")
    operator["spec"]["template"]["spec"]["containers"][0].update(
        ports=[{"containerPort": 8080}], resources=resources
    )
    service = helpers.simple("Service", "widget-metrics", spec={"ports": [{"port": 80}]})
    version = ModuleVersion("1.0.0", (helpers.crd("Widget"), operator, service))
    widget = replace(helpers.WIDGET, versions={"1.0.0": version})
    config = helpers.repo(ModuleRef("widget"), regular={"widget": "1.0.0"})
    config = replace(config, modules={"widget": widget})
    cluster = InMemoryCluster()
    helpers.sync(cluster, config)
    writes = cluster.writes

    again = helpers.sync(cluster, config)

    assert cluster.writes == writes
    assert [(s.module, s.reason) for s in again.modules] == [("widget", "Ready")]
    assert [m.action.value for m in again.plan.modules] == ["unchanged"]
