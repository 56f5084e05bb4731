"""What an API server refuses, what it adds on its own, and how the in-memory cluster follows.

Each was seen on a real API server and once missing from the in-memory cluster, so a fixture or
module that only the real server refuses passed every test that runs in memory:

- a ConfigMap whose ``data`` (or ``binaryData``) holds a value that is not a string fails the
  typed apply patch with a 500 ("expected string"), which the adapter reads, as every 5xx, as
  a :class:`~reconciler.errors.ServerError`;
- a Deployment, StatefulSet or DaemonSet without ``spec.selector`` is Invalid (422);
- a dry-run apply of a new object is answered with a ``uid`` and a ``creationTimestamp`` (and no
  ``resourceVersion``: nothing was stored);
- a new Namespace gets the ``default`` ServiceAccount and the ``kube-root-ca.crt`` ConfigMap
  from kube-controller-manager (asynchronously on a server, at once in memory), so a Namespace
  is never empty, and the lifecycle's "a Namespace holding only our objects" must allow for them.

Runs against the in-memory cluster always and against a real cluster when one is at hand.
"""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.core.objects import ObjectRef
from reconciler.errors import InvalidObjectError, ServerError
from tests.support.contract_targets import (
    MANAGER,
    Target,
    apply_namespace,
    configmap,
    deployment,
    wait_until,
)


@pytest.mark.parametrize("field", ["data", "binaryData"])
def test_a_config_map_value_that_is_no_string_is_refused_as_a_server_error(
    target: Target, field: str
) -> None:
    namespace = apply_namespace(target)
    body = configmap(namespace, "numbers")
    body.pop("data")
    body[field] = {"a": 1}

    with pytest.raises(ServerError, match=rf"\.{field}\.a: expected string") as refused:
        target.cluster.apply(body, field_manager=MANAGER)

    assert refused.value.retry_after == 10.0
    assert target.cluster.get(ObjectRef.of(body)) is None


@pytest.mark.parametrize("kind", ["Deployment", "StatefulSet", "DaemonSet"])
def test_a_workload_without_a_selector_is_invalid(target: Target, kind: str) -> None:
    namespace = apply_namespace(target)
    body = deployment(namespace, kind.lower())
    body["kind"] = kind
    del body["spec"]["selector"]
    if kind == "DaemonSet":
        del body["spec"]["replicas"]

    with pytest.raises(InvalidObjectError, match=rf'{kind}\.apps "{kind.lower()}" is invalid'):
        target.cluster.apply(body, field_manager=MANAGER)
    with pytest.raises(InvalidObjectError):
        target.cluster.apply(body, field_manager=MANAGER, dry_run=True)

    assert target.cluster.get(ObjectRef.of(body)) is None


def test_a_dry_run_apply_of_a_new_object_has_a_uid_and_a_creation_time(target: Target) -> None:
    namespace = apply_namespace(target)
    body = deployment(namespace)

    answer = target.cluster.apply(body, field_manager=MANAGER, dry_run=True)

    metadata = answer["metadata"]
    assert metadata["uid"]
    assert metadata["creationTimestamp"]
    assert metadata["generation"] == 1
    assert "resourceVersion" not in metadata
    assert answer["status"] == {}
    assert target.cluster.get(ObjectRef.of(body)) is None
    created = target.cluster.apply(body, field_manager=MANAGER)
    assert created["metadata"]["uid"] != metadata["uid"], "a dry run's uid is never used"


def test_a_dry_run_apply_of_a_stored_object_answers_its_uid_and_resource_version(
    target: Target,
) -> None:
    namespace = apply_namespace(target)
    stored = target.cluster.apply(configmap(namespace, a="1"), field_manager=MANAGER)

    answer = target.cluster.apply(configmap(namespace, a="2"), field_manager=MANAGER, dry_run=True)

    for name in ("uid", "creationTimestamp", "resourceVersion"):
        assert answer["metadata"][name] == stored["metadata"][name], name
    assert answer["data"] == {"a": "2"}
    found = target.cluster.get(ObjectRef.of(stored))
    assert found is not None
    assert found["data"] == {"a": "1"}


def _names(target: Target, kind: str, namespace: str) -> set[str]:
    return {
        str(o["metadata"]["name"])
        for o in target.cluster.list_objects("v1", kind, namespace=namespace)
    }


def test_a_new_namespace_gets_the_default_service_account_and_the_root_ca(
    target: Target,
) -> None:
    namespace = apply_namespace(target)

    def generated() -> bool:
        accounts = _names(target, "ServiceAccount", namespace)
        return "default" in accounts and "kube-root-ca.crt" in _names(
            target, "ConfigMap", namespace
        )

    wait_until(generated)  # kube-controller-manager creates them a little after the Namespace
    root_ca: dict[str, Any] | None = target.cluster.get(
        ObjectRef("v1", "ConfigMap", namespace, "kube-root-ca.crt")
    )
    assert root_ca is not None
    assert root_ca["data"]["ca.crt"].startswith("-----BEGIN CERTIFICATE-----")
    assert "kubernetes.io/description" in root_ca["metadata"]["annotations"]
    managers = {e["manager"] for e in root_ca["metadata"]["managedFields"]}
    assert managers == {"kube-controller-manager"}
