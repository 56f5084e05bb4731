"""Before a module version's first write (L14, reconciler.lifecycle.preflight): every object's
kind served or defined by a CRD of the module or of a module it depends on, and what the plan
writes dry-run, so a version the cluster cannot take fails with nothing written; and the opt-in
recreate of an object whose change the server refuses as immutable (a Job's template), shown
by ``diff`` as a replace. On the in-memory cluster (the real server: tests/e2e/test_preflight.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from reconciler.cli.report import plan_text
from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.brake import Allowance, Limits, count_deletions, judge
from reconciler.core.model import ConfigRepo, ModuleRef, ModuleVersion
from reconciler.core.objects import ObjectRef
from reconciler.core.plan_values import ObjectAction
from reconciler.core.preflight import RECREATE_ANNOTATION, RECREATE_ON_IMMUTABLE
from reconciler.core.status import ChangeAction, ModuleState, Reason
from reconciler.lifecycle.executor import sync_runtime
from tests.support.lifecycle_helpers import GADGET, NAMESPACE, NOW, WIDGET, repo, simple, sync

OPERATOR = ObjectRef("apps/v1", "Deployment", NAMESPACE, "widget-operator")
JOB = ObjectRef("batch/v1", "Job", NAMESPACE, "widget-migrate")


def _job(image: str, *, recreate: bool = False) -> dict[str, Any]:
    annotations = {RECREATE_ANNOTATION: RECREATE_ON_IMMUTABLE} if recreate else {}
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "m", "image": image}]}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "widget-migrate", "annotations": annotations},
        "spec": {"template": template},
    }


def _widget_with(*extra: dict[str, Any], version: str = "1.0.0") -> ConfigRepo:
    """The catalog of tests.support.lifecycle_helpers, widget ``version`` shipping ``extra``."""
    return _widget_shipping({version: extra}, version)


def _widget_shipping(extras: Mapping[str, Sequence[dict[str, Any]]], version: str) -> ConfigRepo:
    """The catalog with each widget version of ``extras`` shipping its objects too; the runtime
    on widget ``version``."""
    versions = dict(WIDGET.versions)
    for name, extra in extras.items():
        base = versions[name]
        versions[name] = ModuleVersion(name, (*base.objects, *extra), base.default_configuration)
    config = repo(ModuleRef("widget"), regular={"widget": version, "gadget": "1.0.0"})
    return replace(config, modules={**config.modules, "widget": replace(WIDGET, versions=versions)})


def _status(result: Any, module: str = "widget") -> Any:
    return next(s for s in result.modules if s.module == module)


def test_an_object_of_a_removed_api_fails_the_module_with_nothing_written() -> None:
    cluster = InMemoryCluster()
    pdb = simple("PodDisruptionBudget", "widget", "policy/v1beta1", spec={"minAvailable": 1})

    result = sync(cluster, _widget_with(pdb))

    status = _status(result)
    assert status.state is ModuleState.ERROR
    assert status.reason == Reason.KIND_NOT_SERVED
    assert f"PodDisruptionBudget/{NAMESPACE}/widget is policy/v1beta1" in status.message
    assert "ship it as policy/v1" in status.message
    assert "nothing of widget 1.0.0 was written" in status.message
    assert cluster.calls.get("apply", 0) == 0
    assert cluster.objects() == []


def test_a_kind_no_crd_defines_or_a_version_its_crd_does_not_serve_is_refused() -> None:
    cluster = InMemoryCluster()
    sprocket = simple("Sprocket", "one", "example.io/v1")
    widget_v2 = simple("Widget", "other", "example.io/v2")

    result = sync(cluster, _widget_with(sprocket, widget_v2))

    status = _status(result)
    assert status.reason == Reason.KIND_NOT_SERVED
    assert f"Sprocket/{NAMESPACE}/one is example.io/v1 Sprocket" in status.message
    assert f"Widget/{NAMESPACE}/other is example.io/v2 Widget" in status.message
    assert cluster.objects() == []


def test_a_kind_defined_by_a_crd_of_a_module_it_depends_on_is_accepted() -> None:
    cluster = InMemoryCluster()
    config = repo(ModuleRef("gadget"))
    gadget_version = GADGET.versions["1.0.0"]
    extra = simple("Widget", "for-gadget", "example.io/v1", spec={"size": 1})
    shipped = replace(gadget_version, objects=(*gadget_version.objects, extra))
    gadget = replace(GADGET, versions={"1.0.0": shipped})
    config = replace(config, modules={**config.modules, "gadget": gadget})

    result = sync(cluster, config)

    assert {s.module: s.state for s in result.modules} == {
        "widget": ModuleState.READY,
        "gadget": ModuleState.READY,
    }
    assert cluster.get(ObjectRef("example.io/v1", "Widget", NAMESPACE, "for-gadget"))


def _upgrade_with_job(cluster: InMemoryCluster, *, recreate: bool) -> ConfigRepo:
    """Widget 1.0.0 with a Job synced; the repo of 2.0.0, whose Job has another template."""
    sync(cluster, _widget_with(_job("migrate:1", recreate=recreate)))
    return _widget_with(_job("migrate:2", recreate=recreate), version="2.0.0")


def test_an_upgrade_the_server_refuses_as_immutable_fails_with_nothing_written() -> None:
    cluster = InMemoryCluster()
    upgraded = _upgrade_with_job(cluster, recreate=False)
    before = cluster.objects()

    result = sync(cluster, upgraded)

    status = _status(result)
    assert status.state is ModuleState.ERROR
    assert status.reason == Reason.FIELD_IMMUTABLE
    assert f"Job/{NAMESPACE}/widget-migrate (batch/v1)" in status.message
    assert "field is immutable" in status.message
    assert f"{RECREATE_ANNOTATION}: {RECREATE_ON_IMMUTABLE}" in status.message
    assert "nothing of widget 2.0.0 was written" in status.message
    assert cluster.objects() == before


def test_an_opted_in_object_refused_as_immutable_is_replaced_and_diff_shows_it() -> None:
    cluster = InMemoryCluster()
    upgraded = _upgrade_with_job(cluster, recreate=True)
    old = cluster.get(JOB)
    assert old is not None

    planned = sync_runtime(cluster, upgraded, "rt", now=NOW, dry_run=True)
    result = sync(cluster, upgraded)

    widget = planned.plan.module("widget")
    assert widget is not None
    actions = {c.ref: c.action for c in widget.changes}
    assert actions[JOB] is ObjectAction.REPLACE
    assert actions[OPERATOR] is ObjectAction.UPDATE
    assert f"      -/+ {JOB.subject}\n" in plan_text(planned.plan)
    assert _status(result).state is ModuleState.READY
    assert (JOB.subject, ChangeAction.REPLACED) in {
        (c.subject, c.action) for c in result.outcome.changes
    }
    new = cluster.get(JOB)
    assert new is not None
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    assert new["spec"]["template"]["spec"]["containers"][0]["image"] == "migrate:2"


def test_a_pass_that_writes_nothing_dry_runs_nothing() -> None:
    cluster = InMemoryCluster()
    config = _widget_with(_job("migrate:1", recreate=True))
    sync(cluster, config)
    before = dict(cluster.calls)

    result = sync(cluster, config)

    assert _status(result).state is ModuleState.READY
    assert cluster.calls.get("dry-run", 0) == before.get("dry-run", 0)


def test_an_upgrade_that_may_replace_an_object_counts_for_the_deletion_brake() -> None:
    first = (_job("migrate:1", recreate=True),)
    upgraded = _widget_shipping(
        {"1.0.0": first, "2.0.0": (_job("migrate:2", recreate=True),)}, "2.0.0"
    )
    unchanged = _widget_shipping({"1.0.0": first, "2.0.0": first}, "2.0.0")
    known = {"rt": {"widget": "1.0.0"}}

    deletions = count_deletions(known, upgraded)
    verdict = judge(deletions, Limits(max_deletions=0), Allowance())

    assert deletions.recreates == (f"rt/widget/{JOB.kind}/{JOB.name}",)
    assert deletions.count == 1
    assert verdict.held
    assert f"recreate rt/widget/{JOB.kind}/{JOB.name}" in verdict.message
    assert count_deletions(known, unchanged).count == 0


def test_a_module_wide_recreate_replaces_an_object_without_the_annotation() -> None:
    cluster = InMemoryCluster()
    extras = {"1.0.0": (_job("migrate:1"),), "2.0.0": (_job("migrate:2"),)}
    config = _widget_shipping(extras, "1.0.0")
    widget = replace(config.modules["widget"], recreate_on_immutable=True)
    config = replace(config, modules={**config.modules, "widget": widget})
    sync(cluster, config)
    upgraded = replace(config, channels=_widget_shipping(extras, "2.0.0").channels)

    deletions = count_deletions({"rt": {"widget": "1.0.0"}}, upgraded)
    result = sync(cluster, upgraded)

    # every object the upgrade changes may be refused as immutable: the brake counts the worst
    assert deletions.recreates == (
        f"rt/widget/{OPERATOR.kind}/{OPERATOR.name}",
        f"rt/widget/{JOB.kind}/{JOB.name}",
    )
    assert _status(result).state is ModuleState.READY
    done = {c.subject: c.action for c in result.outcome.changes}
    assert done[JOB.subject] is ChangeAction.REPLACED
    assert done[OPERATOR.subject] is ChangeAction.CONFIGURED
