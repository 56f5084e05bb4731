"""A stall is named, on a real API server, through ``reconciler sync`` as a user runs it: an
operator Deployment past its progress deadline (``Progressing=False``,
``ProgressDeadlineExceeded``) and a CRD whose kind is taken in its group (``NamesAccepted=False``,
``KindConflict``, set by the API server's naming controller) leave the module in Error, reason
``Stalled``, naming the condition, its reason and message, and the sync fails; once recovered,
the next sync finds the module Ready. (Before, both were waited for in silence: Processing,
"waiting", exit 0.)"""

from __future__ import annotations

from typing import Any

from tests.support.e2e_harness import until
from tests.support.e2e_world import World


def _past_deadline(world: World, namespace: str, name: str) -> None:
    """What the deployment controller writes when a rollout passed its progress deadline."""
    found = world.kube.deployment(namespace, name)
    assert found is not None
    status = {
        "observedGeneration": found["metadata"]["generation"],
        "replicas": 1,
        "unavailableReplicas": 1,
        "conditions": [
            {
                "type": "Progressing",
                "status": "False",
                "reason": "ProgressDeadlineExceeded",
                "message": f'ReplicaSet "{name}-5d9c" has timed out progressing.',
            }
        ],
    }
    world.kube.apps.patch_namespaced_deployment_status(name, namespace, {"status": status})


def test_an_operator_past_its_progress_deadline_is_an_error_until_it_recovers(
    world: World,
) -> None:
    fleet = world.fleet
    app = fleet.module("app")
    fleet.channel[app.name] = "1.0.0"
    runtime = fleet.runtime("rt", [{"name": app.name}])
    assert world.sync().exit_code == 0  # applied; the operator not available yet
    _past_deadline(world, app.namespace, app.operator)

    stalled = world.sync()

    assert stalled.exit_code != 0, stalled.output
    status = world.status(runtime)[app.name]
    assert (status["state"], status["reason"]) == ("Error", "Stalled"), status
    assert (
        f"Deployment {app.operator}: Progressing=False (ProgressDeadlineExceeded)"
        in (status["message"])
    )
    assert "has timed out progressing" in status["message"]

    world.kube.make_available(app.namespace, app.operator)
    recovered = world.sync()
    assert recovered.exit_code == 0, recovered.output
    assert world.status(runtime)[app.name]["state"] == "Ready"


def test_a_crd_whose_kind_is_taken_in_its_group_is_an_error_until_it_is_free(
    world: World,
) -> None:
    fleet, kube = world.fleet, world.kube
    app = fleet.module("app")
    fleet.channel[app.name] = "1.0.0"
    runtime = fleet.runtime("rt", [{"name": app.name}])
    theirs: dict[str, Any] = app.crd.body()
    plural = f"other{app.crd.plural}"
    theirs["metadata"]["name"] = f"{plural}.{app.crd.group}"
    theirs["spec"]["names"] = {
        "kind": app.crd.kind,
        "plural": plural,
        "singular": f"other{app.crd.kind.lower()}",
    }
    kube.create_crd(theirs)  # a user's CRD took the kind first
    try:
        stalled = world.sync()

        assert stalled.exit_code != 0, stalled.output
        status = world.status(runtime)[app.name]
        assert (status["state"], status["reason"]) == ("Error", "Stalled"), status
        assert (
            f"CustomResourceDefinition {app.crd.name}: NamesAccepted=False" in (status["message"])
        )
        assert "KindConflict" in status["message"]
    finally:
        kube.crds.delete_custom_resource_definition(theirs["metadata"]["name"])

    # the kind is free: once the server accepts the CRD's names (a pass never waits for it,
    # and a sync before that still finds it stalled), the module is Ready
    until(lambda: _names_accepted(kube.crd(app.crd.name)), "the names accepted", 60)
    world.install(app, runtime)


def _names_accepted(crd: dict[str, Any] | None) -> bool:
    conditions = ((crd or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "NamesAccepted" and c.get("status") == "True" for c in conditions)
