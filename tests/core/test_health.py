"""Opt-in health (reconciler.core.health) on plain data: one object judged as kstatus judges it
(a Job, a workload, a CRD, a custom resource by its conditions and generations), the objects a
version's ``healthChecks`` name (the default configuration only when named), and the one
judgement of them all."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.core.health import Health, Judgement, judge, named_objects, named_refs, overall
from reconciler.core.model import HealthCheck, Module, ModuleVersion
from reconciler.core.objects import ObjectRef
from reconciler.core.plan_values import DesiredModule
from reconciler.core.render import RenderedObject
from reconciler.core.resolve import Inclusion, ResolvedModule, VersionSource

NS = "widget-system"


def _condition(kind: str, state: str, reason: str = "", message: str = "") -> dict[str, str]:
    return {"type": kind, "status": state, "reason": reason, "message": message}


def _body(
    kind: str,
    *conditions: dict[str, str],
    api: str = "example.io/v1",
    generation: int | None = None,
    **status: Any,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "w", "namespace": NS}
    if generation is not None:
        metadata["generation"] = generation
    body: dict[str, Any] = {"apiVersion": api, "kind": kind, "metadata": metadata}
    if conditions or status:
        body["status"] = {**status, "conditions": list(conditions)}
    return body


# -- one object -----------------------------------------------------------------------------------


def test_a_job_is_in_progress_until_complete_and_failed_with_its_condition() -> None:
    running = _body("Job", api="batch/v1", active=1)
    complete = _body("Job", _condition("Complete", "True"), api="batch/v1", succeeded=1)
    failed = _body(
        "Job",
        _condition("FailureTarget", "True", "BackoffLimitExceeded"),
        _condition("Failed", "True", "BackoffLimitExceeded", "Job has reached the\n limit"),
        api="batch/v1",
        failed=1,
    )

    assert judge(running) == Judgement(
        Health.IN_PROGRESS, "Job in progress (active 1, succeeded 0, failed 0)"
    )
    assert judge(complete).health is Health.CURRENT
    assert judge(failed) == Judgement(
        Health.FAILED, "Failed=True (BackoffLimitExceeded): Job has reached the limit"
    )


@pytest.mark.parametrize("kind", ["Deployment", "StatefulSet"])
def test_a_workload_is_current_once_available_and_failed_past_its_progress_deadline(
    kind: str,
) -> None:
    waiting = _body(kind, api="apps/v1", generation=2, observedGeneration=2)
    available = _body(kind, api="apps/v1", generation=2, observedGeneration=2, availableReplicas=1)
    deadline = _condition("Progressing", "False", "ProgressDeadlineExceeded", "timed out")
    stuck = _body(kind, deadline, api="apps/v1", generation=2, observedGeneration=2)

    assert judge(waiting) == Judgement(Health.IN_PROGRESS, f"{kind} is not available yet")
    assert judge(available).health is Health.CURRENT
    assert judge(stuck) == Judgement(
        Health.FAILED, "Progressing=False (ProgressDeadlineExceeded): timed out"
    )


def test_a_daemonset_is_current_once_every_scheduled_pod_is_available() -> None:
    body = _body(
        "DaemonSet",
        api="apps/v1",
        observedGeneration=1,
        desiredNumberScheduled=2,
        numberAvailable=1,
    )
    assert judge(body).health is Health.IN_PROGRESS
    body["status"]["numberAvailable"] = 2
    assert judge(body).health is Health.CURRENT


def test_a_crd_is_current_once_established_and_failed_when_its_names_are_refused() -> None:
    api = "apiextensions.k8s.io/v1"
    established = _body("CustomResourceDefinition", _condition("Established", "True"), api=api)
    taken = _condition("NamesAccepted", "False", "KindConflict", "in use")

    assert judge(established).health is Health.CURRENT
    assert judge(_body("CustomResourceDefinition", api=api)).health is Health.IN_PROGRESS
    assert judge(_body("CustomResourceDefinition", taken, api=api)).health is Health.FAILED


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (_body("Gadget"), Judgement(Health.CURRENT)),  # no conditions: current once it exists
        (_body("Gadget", _condition("Ready", "True")), Judgement(Health.CURRENT)),
        (
            _body("Gadget", _condition("Ready", "False", "Provisioning", "creating")),
            Judgement(Health.IN_PROGRESS, "Ready=False (Provisioning): creating"),
        ),
        (
            _body("Gadget", _condition("Ready", "Unknown")),
            Judgement(Health.IN_PROGRESS, "Ready=Unknown (no reason): no message"),
        ),
        (
            _body("Gadget", _condition("Reconciling", "True", "Progressing", "step 2 of 3")),
            Judgement(Health.IN_PROGRESS, "Reconciling=True (Progressing): step 2 of 3"),
        ),
        (
            _body(
                "Gadget",
                _condition("Ready", "False", "InvalidSpec", "size must be odd"),
                _condition("Stalled", "True", "InvalidSpec", "size must be odd"),
            ),
            Judgement(Health.FAILED, "Stalled=True (InvalidSpec): size must be odd"),
        ),
        (
            _body("Gadget", _condition("Ready", "True"), generation=3, observedGeneration=2),
            Judgement(Health.IN_PROGRESS, "generation 3, observed generation 2"),
        ),
        (  # a status of an older generation says nothing of this one, even Stalled
            _body("Gadget", _condition("Stalled", "True"), generation=3, observedGeneration=2),
            Judgement(Health.IN_PROGRESS, "generation 3, observed generation 2"),
        ),
        (None, Judgement(Health.IN_PROGRESS, "not found")),
    ],
)
def test_a_custom_resource_is_judged_by_its_conditions_and_generations(
    body: dict[str, Any] | None, expected: Judgement
) -> None:
    assert judge(body) == expected


def test_an_object_being_deleted_is_in_progress() -> None:
    body = _body("Gadget", _condition("Ready", "True"))
    body["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"

    assert judge(body) == Judgement(Health.IN_PROGRESS, "being deleted")


# -- what a version names -------------------------------------------------------------------------

JOB = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "migrate", "namespace": NS}}
OPERATOR = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "widget-operator", "namespace": NS},
}
DEFAULT = {
    "apiVersion": "example.io/v1",
    "kind": "Widget",
    "metadata": {"name": "default", "namespace": NS},
}


def _desired(*checks: HealthCheck) -> DesiredModule:
    version = ModuleVersion("1.0.0", (OPERATOR, JOB), DEFAULT, health_checks=checks)
    module = Module("widget", NS, "Deployment", "widget-operator", {"1.0.0": version})
    resolved = ResolvedModule(
        "widget", "1.0.0", VersionSource.RUNTIME_CHANNEL, "regular", Inclusion.LISTED
    )
    objects = tuple(RenderedObject("widget", "1.0.0", b) for b in (OPERATOR, JOB))
    return DesiredModule(
        resolved, module, objects, RenderedObject("widget", "1.0.0", DEFAULT, True)
    )


def test_the_default_configuration_counts_only_when_a_check_names_it() -> None:
    job = HealthCheck("Job", "migrate", group="batch")
    default = HealthCheck("Widget", "default", namespace=NS)

    assert named_refs(_desired()) == []
    assert named_refs(_desired(job)) == [ObjectRef.of(JOB)]
    assert named_refs(_desired(job, default)) == [ObjectRef.of(JOB), ObjectRef.of(DEFAULT)]


def test_a_check_that_names_no_object_of_the_version_finds_none() -> None:
    elsewhere = HealthCheck("Job", "migrate", namespace="other")
    other_group = HealthCheck("Job", "migrate", group="example.io")

    assert named_objects(_desired(elsewhere, other_group)) == {elsewhere: [], other_group: []}


def test_one_failure_fails_them_all_and_each_one_on_its_way_is_named() -> None:
    running = Judgement(Health.IN_PROGRESS, "Job in progress")
    failed = Judgement(Health.FAILED, "Stalled=True (X): y")
    current = Judgement(Health.CURRENT)

    assert overall([]) == current
    assert overall([("Job a", current), ("Job b", running), ("Widget c", running)]) == Judgement(
        Health.IN_PROGRESS, "Job b: Job in progress; Widget c: Job in progress"
    )
    assert overall([("Job b", running), ("Widget c", failed)]) == Judgement(
        Health.FAILED, "Widget c: Stalled=True (X): y"
    )
