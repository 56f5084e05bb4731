"""L14 and the opt-in recreate on a real API server, through ``reconciler sync`` and ``diff`` as
a user runs them: a module version with an object of an API the server no longer serves
(``policy/v1beta1`` PodDisruptionBudget) fails with nothing of it written; an upgrade that
changes a Job's template fails before anything is written, its message keeping the server's
``field is immutable``; with ``reconciler.dev/recreate: on-immutable`` on the Job, ``diff``
shows it as a replace (``-/+``), the deletion brake counts it, and the sync replaces it."""

from __future__ import annotations

from typing import Any

from reconciler.core.inventory import inventory_name
from tests.support.e2e_harness import reconciler
from tests.support.e2e_world import World

RECREATE = {"reconciler.dev/recreate": "on-immutable"}


def _job(image: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """A suspended Job (the server runs no Pods): its template changes with ``image``."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "migrate", "annotations": annotations or {}},
        "spec": {
            "suspend": True,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "m", "image": f"example.invalid/migrate:{image}"}],
                }
            },
        },
    }


def test_an_object_of_a_removed_api_fails_the_module_with_nothing_written(world: World) -> None:
    fleet, kube = world.fleet, world.kube
    pdb = {
        "apiVersion": "policy/v1beta1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "guard"},
        "spec": {"minAvailable": 1},
    }
    app = fleet.module("app", more_at={"1.0.0": [pdb]})
    fleet.channel[app.name] = "1.0.0"
    runtime = fleet.runtime("rt", [{"name": app.name}])

    result = world.sync()

    assert result.exit_code != 0, result.output
    status = world.status(runtime)[app.name]
    assert (status["state"], status["reason"]) == ("Error", "KindNotServed"), status
    assert f"PodDisruptionBudget/{app.namespace}/guard is policy/v1beta1" in status["message"]
    assert "ship it as policy/v1" in status["message"]
    assert kube.crd(app.crd.name) is None
    assert kube.namespace(app.namespace) is None
    assert kube.config_map(fleet.system_namespace, inventory_name(app.name)) is None


def test_an_immutable_change_fails_first_and_an_opted_in_job_is_replaced(world: World) -> None:
    fleet, kube = world.fleet, world.kube
    more_at = {
        "1.0.0": [_job("1")],
        "2.0.0": [_job("2")],
        "3.0.0": [_job("3", RECREATE)],
    }
    app = fleet.module("app", versions=("1.0.0", "2.0.0", "3.0.0"), more_at=more_at)
    fleet.channel[app.name] = "1.0.0"
    runtime = fleet.runtime("rt", [{"name": app.name}])
    assert world.sync().exit_code == 0
    kube.make_available(app.namespace, app.operator)
    first = kube.job(app.namespace, "migrate")
    assert first is not None

    # 2.0.0 changes the Job's template: refused by the dry-run, before anything is written
    fleet.channel[app.name] = "2.0.0"
    refused = world.sync()
    assert refused.exit_code != 0, refused.output
    status = world.status(runtime)[app.name]
    assert (status["state"], status["reason"]) == ("Error", "FieldImmutable"), status
    assert "spec.template" in status["message"]
    assert "field is immutable" in status["message"]
    assert f"nothing of {app.name} 2.0.0 was written" in status["message"]
    operator = kube.deployment(app.namespace, app.operator)
    assert operator is not None
    assert operator["metadata"]["labels"]["app.kubernetes.io/version"] == "1.0.0"
    assert kube.config_map(app.namespace, app.config_map("2.0.0")) is None

    # 3.0.0 opts the Job in: diff shows a replace, the brake counts it, the sync replaces it
    fleet.channel[app.name] = "3.0.0"
    repo = fleet.write()
    diff = reconciler("diff", repo, "--runtime", runtime, *world.cluster_flags(), env=world.env)
    assert f"-/+ Job/{app.namespace}/migrate" in diff.output, diff.output
    fleet.max_deletions = 0
    held = world.sync()
    assert held.exit_code != 0, held.output
    assert f"recreate {runtime}/{app.name}/Job/migrate" in held.output, held.output
    replaced = world.sync("--allow-deletions", "1")
    assert replaced.exit_code == 0, replaced.output
    job = kube.job(app.namespace, "migrate")
    assert job is not None
    assert job["metadata"]["uid"] != first["metadata"]["uid"]
    containers = job["spec"]["template"]["spec"]["containers"]
    assert containers[0]["image"] == "example.invalid/migrate:3"
