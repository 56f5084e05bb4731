"""What a Kubernetes 1.36 API server no longer serves, and what it refuses as immutable, and how
the in-memory cluster follows (the lifecycle's preflight, L14, and the opt-in recreate rely on
both):

- an object of a removed API (``policy/v1beta1`` PodDisruptionBudget, ``batch/v1beta1`` CronJob,
  ``autoscaling/v2beta2`` HorizontalPodAutoscaler) is not served: discovery does not name it and
  an apply of it is refused as :class:`~reconciler.errors.UnknownKindError`, nothing written;
- a Job whose ``spec.template`` changes is Invalid (422) with ``field is immutable`` kept in the
  message after the server's dump of the value (:class:`~reconciler.errors.ImmutableFieldError`),
  as an apply and as a dry-run apply;
- a dry-run apply writes nothing: a new object is not created, a changed one keeps its fields.

Runs against the in-memory cluster always and against a real cluster when one is at hand.
"""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.core.objects import ObjectRef
from reconciler.errors import ImmutableFieldError, UnknownKindError
from tests.support.contract_targets import MANAGER, Target, apply_namespace, configmap

REMOVED = [
    ("policy/v1beta1", "PodDisruptionBudget", "policy/v1"),
    ("batch/v1beta1", "CronJob", "batch/v1"),
    ("autoscaling/v2beta2", "HorizontalPodAutoscaler", "autoscaling/v2"),
]


def job(namespace: str, image: str = "registry.k8s.io/pause:3.9") -> dict[str, Any]:
    """A Job of one pause container that never runs (the server has no kubelet)."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "migrate", "namespace": namespace},
        "spec": {
            "suspend": True,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": image}],
                }
            },
        },
    }


@pytest.mark.parametrize(("api_version", "kind", "served"), REMOVED)
def test_a_removed_api_is_not_served_and_its_apply_writes_nothing(
    target: Target, api_version: str, kind: str, served: str
) -> None:
    namespace = apply_namespace(target)
    body = {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": "old", "namespace": namespace},
        "spec": {},
    }

    assert target.cluster.kind_info(api_version, kind) is None
    assert target.cluster.kind_info(served, kind) is not None
    with pytest.raises(UnknownKindError, match=kind):
        target.cluster.apply(body, field_manager=MANAGER)
    with pytest.raises(UnknownKindError, match=kind):
        target.cluster.apply(body, field_manager=MANAGER, dry_run=True)

    found = target.cluster.list_objects(served, kind, namespace=namespace)
    assert found == []


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_change_of_a_job_template_is_refused_as_immutable(target: Target, dry_run: bool) -> None:
    namespace = apply_namespace(target)
    target.cluster.apply(job(namespace), field_manager=MANAGER)

    changed = job(namespace, image="registry.k8s.io/pause:3.10")
    with pytest.raises(ImmutableFieldError) as refused:
        target.cluster.apply(changed, field_manager=MANAGER, dry_run=dry_run)

    message = str(refused.value)
    assert "spec.template" in message
    assert "field is immutable" in message
    assert len(message) < 600
    live = target.cluster.get(ObjectRef.of(changed))
    assert live is not None
    assert live["spec"]["template"]["spec"]["containers"][0]["image"].endswith("pause:3.9")


def test_a_dry_run_apply_writes_nothing(target: Target) -> None:
    namespace = apply_namespace(target)
    target.cluster.apply(configmap(namespace, "kept", a="1"), field_manager=MANAGER)

    changed = target.cluster.apply(
        configmap(namespace, "kept", a="2"), field_manager=MANAGER, dry_run=True
    )
    target.cluster.apply(configmap(namespace, "new", a="1"), field_manager=MANAGER, dry_run=True)

    assert changed["data"] == {"a": "2"}
    kept = target.cluster.get(ObjectRef("v1", "ConfigMap", namespace, "kept"))
    assert kept is not None
    assert kept["data"] == {"a": "1"}
    assert target.cluster.get(ObjectRef("v1", "ConfigMap", namespace, "new")) is None
