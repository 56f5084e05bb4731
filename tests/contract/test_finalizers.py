"""Finalizers as the API server keeps them (L13 depends on it), on memory and a real server.

A deleted object with finalizers stays, Terminating (``deletionTimestamp``, grace period 0),
until a patch or an apply empties ``metadata.finalizers``; none may be added meanwhile. A CRD
whose instance is held that way stays Terminating, and so does a Namespace holding such an
object, until it is released; then both go by themselves (the apiextensions and namespace
controllers on a real server). Each test releases what it held, whatever happens, so a failed
test leaves nothing stuck on the real server.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import pytest

from reconciler.core.objects import ObjectRef, is_established
from reconciler.errors import InvalidObjectError, UnknownKindError
from tests.support.contract_targets import (
    MANAGER,
    Target,
    apply_namespace,
    configmap,
    gizmo_crd,
    wait_until,
)

HOLD = "contract.reconciler.dev/hold"


def _held(body: dict[str, Any]) -> dict[str, Any]:
    body["metadata"]["finalizers"] = [HOLD]
    return body


def _terminating(target: Target, ref: ObjectRef) -> bool:
    found = target.cluster.get(ref)
    return found is not None and bool(found["metadata"].get("deletionTimestamp"))


@contextmanager
def _released_at_the_end(target: Target, ref: ObjectRef) -> Iterator[None]:
    try:
        yield
    finally:
        with suppress(UnknownKindError):  # its CRD is gone, and it with it
            if target.cluster.get(ref) is not None:
                target.cluster.patch(ref, {"metadata": {"finalizers": None}})


def test_a_deletion_held_by_a_finalizer_has_a_timestamp_and_no_grace_period(
    target: Target,
) -> None:
    namespace = apply_namespace(target)
    ref = ObjectRef.of(target.cluster.apply(_held(configmap(namespace)), field_manager=MANAGER))
    with _released_at_the_end(target, ref):
        assert target.cluster.delete(ref) is True
        held = target.cluster.get(ref)
        assert held is not None
        assert held["metadata"]["deletionTimestamp"]
        assert held["metadata"]["deletionGracePeriodSeconds"] == 0
        assert held["metadata"]["finalizers"] == [HOLD]
        assert target.cluster.delete(ref) is True, "deleting again changes nothing"
        assert _terminating(target, ref)


def test_no_finalizer_can_be_added_to_an_object_being_deleted(target: Target) -> None:
    namespace = apply_namespace(target)
    ref = ObjectRef.of(target.cluster.apply(_held(configmap(namespace)), field_manager=MANAGER))
    with _released_at_the_end(target, ref):
        target.cluster.delete(ref)

        with pytest.raises(InvalidObjectError):
            target.cluster.patch(ref, {"metadata": {"finalizers": [HOLD, "x.dev/more"]}})
        more = configmap(namespace)
        more["metadata"]["finalizers"] = [HOLD, "x.dev/more"]
        with pytest.raises(InvalidObjectError):
            target.cluster.apply(more, field_manager=MANAGER)
        found = target.cluster.get(ref)
        assert found is not None
        assert found["metadata"]["finalizers"] == [HOLD]


def test_an_apply_that_drops_the_last_finalizer_completes_the_deletion(target: Target) -> None:
    namespace = apply_namespace(target)
    ref = ObjectRef.of(target.cluster.apply(_held(configmap(namespace)), field_manager=MANAGER))
    with _released_at_the_end(target, ref):
        target.cluster.delete(ref)
        assert _terminating(target, ref)

        target.cluster.apply(configmap(namespace), field_manager=MANAGER)

        wait_until(lambda: target.cluster.get(ref) is None)


def test_a_crd_stays_terminating_while_an_instance_of_it_is_held(target: Target) -> None:
    namespace = apply_namespace(target)
    crd = ObjectRef.of(target.cluster.apply(gizmo_crd(target), field_manager=MANAGER))
    target.created.insert(0, crd)
    api_version = f"{target.group}/v1"
    wait_until(lambda: is_established(target.cluster.get(crd) or {}))
    wait_until(lambda: target.cluster.kind_info(api_version, "Gizmo") is not None)
    metadata = {"name": "g", "namespace": namespace}
    gizmo: dict[str, Any] = {"apiVersion": api_version, "kind": "Gizmo", "metadata": metadata}
    instance = ObjectRef.of(target.cluster.apply(_held(gizmo), field_manager=MANAGER))
    with _released_at_the_end(target, instance):
        target.cluster.delete(crd)

        wait_until(lambda: _terminating(target, instance))
        assert _terminating(target, crd)

        target.cluster.patch(instance, {"metadata": {"finalizers": None}})
        wait_until(lambda: target.cluster.get(crd) is None)


def test_a_namespace_stays_terminating_while_an_object_in_it_is_held(target: Target) -> None:
    namespace = apply_namespace(target, "held")
    space = ObjectRef("v1", "Namespace", "", namespace)
    plain = ObjectRef.of(target.cluster.apply(configmap(namespace, "plain"), field_manager=MANAGER))
    held = ObjectRef.of(
        target.cluster.apply(_held(configmap(namespace, "held")), field_manager=MANAGER)
    )
    with _released_at_the_end(target, held):
        target.cluster.delete(space)

        wait_until(lambda: _terminating(target, held) and target.cluster.get(plain) is None)
        assert _terminating(target, space)

        target.cluster.patch(held, {"metadata": {"finalizers": None}})
        wait_until(lambda: target.cluster.get(space) is None, seconds=60.0)
