"""What a live object says (reconciler.core.live) on plain data: readiness, the running
version, whether an object is ours or one a Namespace may hold and still be deleted."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.core.live import (
    labelled_ours,
    live_state,
    ours_or_generated,
    running_version,
    stall,
    workload_available,
)
from reconciler.core.model import (
    LABEL_APP_VERSION,
    LABEL_MANAGED_BY,
    LABEL_MODULE,
    LABEL_RUNTIME,
    MANAGED_BY_VALUE,
    Module,
)
from reconciler.core.objects import ObjectRef

OURS = {LABEL_MANAGED_BY: MANAGED_BY_VALUE, LABEL_RUNTIME: "rt", LABEL_MODULE: "widget"}
WIDGET = Module("widget", "widget-system", "Deployment", "widget-operator", {})
OPERATOR = ObjectRef("apps/v1", "Deployment", "widget-system", "widget-operator")


def _workload(kind: str, *, generation: int = 2, **status: Any) -> dict[str, Any]:
    return {
        "kind": kind,
        "metadata": {"name": "w", "generation": generation},
        "status": {"observedGeneration": 2, **status},
    }


def test_a_deployment_is_available_when_its_replicas_are() -> None:
    deployment = _workload("Deployment", availableReplicas=3) | {"spec": {"replicas": 3}}
    assert workload_available(deployment)
    assert not workload_available(deployment | {"status": {"observedGeneration": 2}})


def test_a_workload_without_replicas_wants_one_and_zero_replicas_are_available_at_once() -> None:
    assert not workload_available(_workload("StatefulSet"))
    assert workload_available(_workload("StatefulSet", availableReplicas=1))
    assert workload_available(_workload("Deployment") | {"spec": {"replicas": 0}})


def test_a_workload_whose_spec_the_controller_has_not_seen_is_not_available() -> None:
    behind = _workload("Deployment", generation=3, availableReplicas=1)
    assert not workload_available(behind)


def test_a_daemonset_is_available_when_every_scheduled_pod_is_and_one_is_scheduled() -> None:
    assert workload_available(_workload("DaemonSet", desiredNumberScheduled=2, numberAvailable=2))
    assert not workload_available(
        _workload("DaemonSet", desiredNumberScheduled=2, numberAvailable=1)
    )
    assert not workload_available(_workload("DaemonSet", desiredNumberScheduled=0))


@pytest.mark.parametrize(
    ("body", "state"),
    [
        (None, "Missing"),
        ({"kind": "ConfigMap", "metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}},
         "Terminating"),
        ({"kind": "CustomResourceDefinition",
          "status": {"conditions": [{"type": "Established", "status": "True"}]}},
         "Established"),
        ({"kind": "CustomResourceDefinition"}, "NotEstablished"),
        (_workload("Deployment", availableReplicas=1), "Available"),
        (_workload("DaemonSet"), "Progressing"),
        ({"kind": "ConfigMap", "metadata": {"name": "c"}}, "Present"),
    ],
)  # fmt: skip
def test_the_live_state_is_one_word(body: dict[str, Any] | None, state: str) -> None:
    assert live_state(body) == state


def _operator(labels: Any) -> dict[str, Any]:
    return {"kind": "Deployment", "metadata": {"name": "widget-operator", "labels": labels}}


def test_the_running_version_is_the_operators_version_label_and_says_where_it_was_read() -> None:
    version, source = running_version(WIDGET, {OPERATOR: _operator({LABEL_APP_VERSION: "1.2"})})
    assert version == "1.2"
    assert source == f"label {LABEL_APP_VERSION} of {OPERATOR.subject}"


def test_a_version_label_that_is_not_text_is_read_as_found() -> None:
    assert running_version(WIDGET, {OPERATOR: _operator({LABEL_APP_VERSION: 2})})[0] == "2"


@pytest.mark.parametrize("labels", [{}, None, "not-a-map", {"other": "1.0"}])
def test_an_operator_without_a_version_label_runs_no_known_version(labels: Any) -> None:
    assert running_version(WIDGET, {OPERATOR: _operator(labels)}) == (None, "")


def test_without_the_operator_no_version_runs() -> None:
    other = ObjectRef("apps/v1", "Deployment", "widget-system", "other")
    assert running_version(WIDGET, {other: _operator({LABEL_APP_VERSION: "1.0"})}) == (None, "")
    assert running_version(WIDGET, {}) == (None, "")


def test_an_object_is_ours_only_with_all_three_labels_for_the_runtime_and_module() -> None:
    assert labelled_ours({"metadata": {"labels": OURS}}, "rt", "widget")
    assert not labelled_ours({"metadata": {"labels": OURS}}, "rt", "gadget")
    assert not labelled_ours({"metadata": {"labels": OURS}}, "other", "widget")
    assert not labelled_ours({"metadata": {"labels": OURS | {LABEL_MANAGED_BY: "helm"}}}, "rt",
                             "widget")  # fmt: skip
    assert not labelled_ours(None, "rt", "widget")
    assert not labelled_ours({"metadata": {}}, "rt", "widget")


def test_labelled_ours_without_a_runtime_or_module_asks_only_what_is_named() -> None:
    """S1 spelled once: the planner asks of a runtime-less inventory (the fleet diff's
    assumption) any runtime, the daemon's watches and a Namespace's content any module."""
    other_runtime = {"metadata": {"labels": OURS | {LABEL_RUNTIME: "other"}}}
    assert labelled_ours(other_runtime, None, "widget")
    assert not labelled_ours(other_runtime, None, "gadget")
    assert labelled_ours(other_runtime)
    assert labelled_ours({"metadata": {"labels": {LABEL_MANAGED_BY: "reconciler"}}})
    assert not labelled_ours({"metadata": {"labels": {LABEL_MANAGED_BY: "helm"}}})
    assert labelled_ours({"metadata": {"labels": OURS}}, "rt", None)
    assert not labelled_ours(None)


@pytest.mark.parametrize(
    ("body", "deletable"),
    [
        ({"kind": "ConfigMap", "metadata": {"name": "x", "labels": OURS}}, True),
        ({"kind": "Pod", "metadata": {"name": "x", "ownerReferences": [{"name": "rs"}]}}, True),
        ({"kind": "ServiceAccount", "metadata": {"name": "default"}}, True),
        ({"kind": "ConfigMap", "metadata": {"name": "kube-root-ca.crt"}}, True),
        ({"kind": "ConfigMap", "metadata": {"name": "openshift-service-ca.crt"}}, True),
        ({"kind": "ConfigMap", "metadata": {"name": "default"}}, False),
        ({"kind": "PersistentVolumeClaim", "metadata": {"name": "data"}}, False),
    ],
)
def test_a_namespace_is_ours_to_delete_only_with_ours_owned_or_generated_objects_in_it(
    body: dict[str, Any], deletable: bool
) -> None:
    assert ours_or_generated(body) is deletable


def _with_conditions(kind: str, conditions: list[dict[str, str]], **status: int) -> dict[str, Any]:
    return {"kind": kind, "metadata": {"name": "x", "generation": 2},
            "status": {"conditions": conditions, **status}}  # fmt: skip


def test_a_stall_is_judged_as_kstatus_does() -> None:
    deadline = {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
                "message": "timed out"}  # fmt: skip
    names = {"type": "NamesAccepted", "status": "False", "reason": "KindConflict",
             "message": "Kind is already in use"}  # fmt: skip
    assert stall(_with_conditions("Deployment", [deadline], observedGeneration=2)) == (
        "Progressing=False (ProgressDeadlineExceeded): timed out"
    )
    assert stall(_with_conditions("Deployment", [deadline], observedGeneration=1)) is None  # old
    progressing = {**deadline, "status": "True", "reason": "NewReplicaSetAvailable"}
    assert stall(_with_conditions("Deployment", [progressing], observedGeneration=2)) is None
    assert stall(_with_conditions("CustomResourceDefinition", [names])) == (
        "NamesAccepted=False (KindConflict): Kind is already in use"
    )
    stalled = {"type": "Stalled", "status": "True", "reason": "Oops", "message": "gave up"}
    assert stall(_with_conditions("Widget", [stalled])) == "Stalled=True (Oops): gave up"
    assert stall(_with_conditions("Widget", [])) is None
