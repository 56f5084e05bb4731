"""Two field managers on one object, as configuration enforcement uses them
(:mod:`reconciler.core.enforce`): ``reconciler`` applies the whole default configuration once,
``reconciler-config`` applies only the enforced fields with force, a user applies others.
Runs on the in-memory cluster and on the real API server: the in-memory one must keep field
owners as the server does, and the hand-over before a release must keep the value on both."""

from __future__ import annotations

from typing import Any

from reconciler.core.enforce import CONFIG_FIELD_MANAGER, handover_body, identity, owned_paths
from reconciler.core.model import FIELD_MANAGER
from reconciler.core.objects import ObjectRef
from tests.support.contract_targets import Target


def _namespace(target: Target) -> str:
    name = target.namespace("managers")
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    target.cluster.apply(body, field_manager=FIELD_MANAGER)
    target.created.append(ObjectRef.of(body))
    return name


def _configmap(namespace: str, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": namespace},
        **({"data": data} if data else {}),
    }


def _data(target: Target, ref: ObjectRef) -> dict[str, str]:
    body = target.cluster.get(ref)
    assert body is not None
    return dict(body.get("data") or {})


def _set_up(target: Target) -> ObjectRef:
    """The default configuration (a, b) by ``reconciler``, ``c`` enforced, a user's change of
    ``a`` and ``c``, then the enforced ``c`` re-asserted."""
    namespace = _namespace(target)
    cluster = target.cluster
    cluster.apply(_configmap(namespace, a="1", b="2"), field_manager=FIELD_MANAGER)
    cluster.apply(_configmap(namespace, c="x"), field_manager=CONFIG_FIELD_MANAGER, force=True)
    cluster.apply(_configmap(namespace, a="9", c="y"), field_manager="kubectl", force=True)
    cluster.apply(_configmap(namespace, c="x"), field_manager=CONFIG_FIELD_MANAGER, force=True)
    return ObjectRef("v1", "ConfigMap", namespace, "settings")


def test_the_enforcing_manager_takes_its_field_back_and_leaves_the_users_other_field(
    target: Target,
) -> None:
    ref = _set_up(target)
    assert _data(target, ref) == {"a": "9", "b": "2", "c": "x"}
    body = target.cluster.get(ref)
    assert body is not None
    assert owned_paths(body, CONFIG_FIELD_MANAGER) == {("data", "c")}
    assert ("data", "a") not in owned_paths(body, FIELD_MANAGER)  # the user's now
    assert ("data", "b") in owned_paths(body, FIELD_MANAGER)


def test_a_manager_that_stops_applying_a_field_it_alone_owns_deletes_it(target: Target) -> None:
    ref = _set_up(target)
    target.cluster.apply(identity(ref), field_manager=CONFIG_FIELD_MANAGER, force=True)
    assert _data(target, ref) == {"a": "9", "b": "2"}


def test_a_field_handed_over_first_keeps_its_value_when_released(target: Target) -> None:
    ref = _set_up(target)
    live = target.cluster.get(ref)
    assert live is not None
    handover = handover_body(live, ["data.c"], FIELD_MANAGER)
    assert handover.get("data") == {"b": "2", "c": "x"}  # not the user's `a`
    target.cluster.apply(handover, field_manager=FIELD_MANAGER, force=True)
    target.cluster.apply(identity(ref), field_manager=CONFIG_FIELD_MANAGER, force=True)
    assert _data(target, ref) == {"a": "9", "b": "2", "c": "x"}
    body = target.cluster.get(ref)
    assert body is not None
    assert not owned_paths(body, CONFIG_FIELD_MANAGER) & {("data", "c")}
    target.cluster.apply(_configmap(ref.namespace, c="z"), field_manager="kubectl", force=True)
    assert _data(target, ref)["c"] == "z"  # released: the user's to change


def test_two_managers_applying_the_same_value_both_own_it(target: Target) -> None:
    namespace = _namespace(target)
    cluster = target.cluster
    cluster.apply(_configmap(namespace, a="1", b="2"), field_manager=FIELD_MANAGER)
    cluster.apply(_configmap(namespace, a="1"), field_manager=CONFIG_FIELD_MANAGER, force=True)
    ref = ObjectRef("v1", "ConfigMap", namespace, "settings")
    body = cluster.get(ref)
    assert body is not None
    assert ("data", "a") in owned_paths(body, FIELD_MANAGER)
    assert owned_paths(body, CONFIG_FIELD_MANAGER) == {("data", "a")}
    cluster.apply(identity(ref), field_manager=CONFIG_FIELD_MANAGER, force=True)
    assert _data(target, ref) == {"a": "1", "b": "2"}  # still owned by the other: kept
