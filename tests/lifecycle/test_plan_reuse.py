"""A run's stages plan from one observation while nothing changed (a no-change sync is planned once
per run, not once per stage), and plan again as soon as anything the plan depends on did: the live
view, the desired modules, the planner's facts, or whether the maintenance window is open."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.model import ConfigRepo, MaintenanceWindow, ModuleRef
from reconciler.core.plan_values import Context, DesiredModule, desired_modules
from reconciler.core.render import Renderer
from reconciler.core.resolve import resolve_runtime
from reconciler.lifecycle.executor import Lifecycle, SyncPart
from tests.support.lifecycle_helpers import NOW, repo, sync

#: Saturdays 02:00-06:00 UTC.
WINDOW = MaintenanceWindow(("Sat",), "02:00", 240, "UTC")


def _installed(
    window: MaintenanceWindow | None = None,
) -> tuple[InMemoryCluster, ConfigRepo, list[DesiredModule], Lifecycle]:
    cluster = InMemoryCluster()
    config = repo(ModuleRef("widget"), window=window)
    sync(cluster, config)
    desired = desired_modules(
        config, resolve_runtime(config, config.runtimes["rt"]), Renderer(config)
    )
    lifecycle = Lifecycle(cluster, system_namespace=config.settings.system_namespace)
    return cluster, config, desired, lifecycle


def test_the_next_stage_plans_from_the_same_observation_without_reading_again() -> None:
    cluster, config, desired, lifecycle = _installed()
    first = lifecycle.sync(Context.of(config, "rt", NOW), desired, dry_run=True)
    calls = dict(cluster.calls)

    later = Context.of(config, "rt", NOW + timedelta(seconds=3))
    second = lifecycle.sync(later, desired, dry_run=True)
    applied = lifecycle.sync(later, desired, part=SyncPart.DESIRED)

    assert second.plan is first.plan
    assert applied.plan.modules == first.plan.modules
    assert not first.plan.has_changes
    assert cluster.calls == calls  # no list, no read, no write


def test_a_new_read_of_the_cluster_other_desired_modules_or_facts_plan_again() -> None:
    _, config, desired, lifecycle = _installed()
    context = Context.of(config, "rt", NOW)
    first = lifecycle.sync(context, desired, dry_run=True)

    lifecycle.read_inventories("rt", fresh=True)  # the view changed: observe again
    reread = lifecycle.sync(context, desired, dry_run=True)
    assert reread.plan is not first.plan
    assert reread.plan == first.plan

    assert lifecycle.sync(context, list(desired), dry_run=True).plan is not reread.plan
    suspended = lifecycle.sync(replace(context, suspended=True), desired, dry_run=True)
    assert suspended.plan.suspended
    assert not reread.plan.suspended


def test_a_maintenance_window_opening_between_stages_plans_again() -> None:
    closed_at = datetime(2026, 11, 27, 12, 0, tzinfo=NOW.tzinfo)  # a Friday
    open_at = datetime(2026, 11, 28, 3, 0, tzinfo=NOW.tzinfo)  # Saturday 03:00
    _, config, desired, lifecycle = _installed(WINDOW)

    closed = lifecycle.sync(Context.of(config, "rt", closed_at), desired, dry_run=True)
    still_closed = Context.of(config, "rt", closed_at + timedelta(hours=1))
    opened = Context.of(config, "rt", open_at)

    assert lifecycle.sync(still_closed, desired, dry_run=True).plan is closed.plan
    assert lifecycle.sync(opened, desired, dry_run=True).plan is not closed.plan
