"""What an API server writes back in its own words, on both targets: resource quantities
canonicalised (``cpu: 1000m`` answers ``1``, ``1024Mi`` answers ``1Gi``, a ``ResourceList`` rounded
up to milli), ``protocol: TCP`` defaulted on container and Service ports, and a dry-run answer of a
built-in kind in the same words. The in-memory cluster answers as the real one does, so unit tests
see what a real server makes of a manifest."""

from __future__ import annotations

from typing import Any

from reconciler.core.objects import ObjectRef
from tests.support.contract_targets import MANAGER, Target, apply_namespace
from tests.support.server_answers import SERVER_ANSWERS


def _pod(namespace: str, values: list[object]) -> dict[str, Any]:
    containers = [
        {"name": f"c{i}", "image": "registry.k8s.io/pause:3.9", "resources": {"limits": {"cpu": v}}}
        for i, v in enumerate(values)
    ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "quantities", "namespace": namespace},
        "spec": {"containers": containers},
    }


def test_resource_quantities_are_answered_in_the_servers_words(target: Target) -> None:
    namespace = apply_namespace(target)
    written = [w for w, _ in SERVER_ANSWERS]

    answer = target.cluster.apply(_pod(namespace, written), field_manager=MANAGER, dry_run=True)

    answered = [c["resources"]["limits"]["cpu"] for c in answer["spec"]["containers"]]
    assert answered == [a for _, a in SERVER_ANSWERS]


def test_ports_get_protocol_tcp_and_a_deployment_its_quantities_canonical(
    target: Target,
) -> None:
    namespace = apply_namespace(target)
    labels = {"app": "op"}
    container = {
        "name": "c",
        "image": "registry.k8s.io/pause:3.9",
        "ports": [{"containerPort": 8080, "name": "http"}],
        "resources": {"limits": {"cpu": "1000m", "memory": "1024Mi"}},
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "op", "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "op", "namespace": namespace},
        "spec": {"selector": labels, "ports": [{"port": 80, "targetPort": "http"}]},
    }

    target.cluster.apply(deployment, field_manager=MANAGER)
    target.cluster.apply(service, field_manager=MANAGER)

    found = target.cluster.get(ObjectRef.of(deployment))
    assert found is not None
    live = found["spec"]["template"]["spec"]["containers"][0]
    assert live["resources"]["limits"] == {"cpu": "1", "memory": "1Gi"}
    assert live["ports"][0]["protocol"] == "TCP"
    answered = target.cluster.get(ObjectRef.of(service))
    assert answered is not None
    assert answered["spec"]["ports"][0]["protocol"] == "TCP"
