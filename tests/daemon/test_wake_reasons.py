"""Why a watch event wakes its runtime (:func:`reconciler.daemon.watches.reason_to_wake`), as
plain data: an operator's availability and a CRD's establishment are judged by the lifecycle's
own rules (:func:`reconciler.core.live.workload_available`, L2, and
:func:`reconciler.core.objects.is_established`), never by a second spelling of them; the
"ours" test of a watch is S1's (:func:`reconciler.core.live.labelled_ours`)."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.cluster.api import WatchEvent, WatchEventType
from reconciler.core.live import workload_available
from reconciler.daemon.watches import reason_to_wake


def _modified(body: dict[str, Any]) -> WatchEvent:
    return WatchEvent(WatchEventType.MODIFIED, body)


def _daemon_set(generation: int, observed: int, available: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "ns", "generation": generation},
        "status": {
            "observedGeneration": observed,
            "desiredNumberScheduled": 2,
            "numberAvailable": available,
        },
    }


def _deployment(replicas: Any, available: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "op", "namespace": "ns", "generation": 1},
        "spec": {"replicas": replicas},
        "status": {"observedGeneration": 1, "availableReplicas": available},
    }


def test_an_operator_that_becomes_available_by_the_lifecycle_rule_wakes() -> None:
    before, after = _deployment(1, 0), _deployment(1, 1)
    assert reason_to_wake(_modified(after), before) == ("availability changed", None)


@pytest.mark.parametrize(
    ("before", "after"),
    [
        # a DaemonSet's status of an older generation says nothing of the spec now (L2)
        (_daemon_set(2, 1, 0), _daemon_set(2, 1, 2)),
        # ``replicas: null`` is one replica to the lifecycle: 0 available is not available
        (_deployment(1, 0), _deployment(None, 0)),
    ],
)
def test_a_change_the_lifecycle_does_not_see_as_availability_does_not_wake(
    before: dict[str, Any], after: dict[str, Any]
) -> None:
    assert workload_available(before) == workload_available(after)
    assert reason_to_wake(_modified(after), before) is None


def test_a_crd_established_wakes() -> None:
    crd: dict[str, Any] = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.io"},
    }
    established = crd | {"status": {"conditions": [{"type": "Established", "status": "True"}]}}
    assert reason_to_wake(_modified(established), crd) == ("CRD established", None)
