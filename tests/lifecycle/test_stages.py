"""The stages of a lifecycle pass as its change set shows them (reconciler.lifecycle.apply),
which modules a part of a sync carries out (``SyncPart``), and that each pass returns its own
change set. On the in-memory cluster."""

from __future__ import annotations

from dataclasses import replace

import pytest

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.model import ModuleRef
from reconciler.core.plan_values import Context, ModuleAction, ModulePlan, desired_modules
from reconciler.core.reasons import Reason
from reconciler.core.render import Renderer
from reconciler.core.resolve import resolve_runtime
from reconciler.core.status import ChangeAction, ChangeSetEntry
from reconciler.lifecycle.executor import Lifecycle, SyncPart, SyncResult
from tests.support.lifecycle_helpers import NAMESPACE, NOW, repo, sync


def _subjects(changes: tuple[ChangeSetEntry, ...], *actions: ChangeAction) -> list[str]:
    return [c.subject for c in changes if c.action in actions]


def test_an_install_applies_crds_first_and_the_default_configuration_after_the_rest() -> None:
    result = sync(InMemoryCluster(), repo(ModuleRef("widget")))

    created = _subjects(result.outcome.changes, ChangeAction.CREATED)
    assert created[0] == "CustomResourceDefinition/widgets.example.io"
    assert created[-1] == f"Widget/{NAMESPACE}/default"
    assert f"Deployment/{NAMESPACE}/widget-operator" in created[1:-1]


def test_an_upgrade_applies_everything_before_it_prunes() -> None:
    cluster = InMemoryCluster()
    sync(cluster, repo(ModuleRef("widget")))

    result = sync(cluster, repo(ModuleRef("widget"), regular={"widget": "2.0.0"}))

    actions = [c.action for c in result.outcome.changes]
    pruned = actions.index(ChangeAction.PRUNED)
    assert _subjects(result.outcome.changes, ChangeAction.PRUNED) == [
        f"ConfigMap/{NAMESPACE}/widget-extra"
    ]
    assert set(actions[:pruned]) <= {ChangeAction.CREATED, ChangeAction.CONFIGURED}
    assert set(actions[pruned + 1 :]) <= {ChangeAction.UNCHANGED}
    assert ChangeAction.CONFIGURED in actions[:pruned]


def _entry(module: str) -> ModulePlan:
    return ModulePlan(module, ModuleAction.INSTALL, Reason.INSTALL, "")


@pytest.mark.parametrize(
    ("part", "kept"),
    [
        (SyncPart.ALL, {"widget", "gadget"}),
        (SyncPart.DESIRED, {"widget"}),
        (SyncPart.REMOVALS, {"gadget"}),
    ],
)
def test_a_part_of_a_sync_keeps_the_desired_modules_or_the_removed_ones(
    part: SyncPart, kept: set[str]
) -> None:
    entries = [_entry("widget"), _entry("gadget")]
    assert {e.module for e in entries if part.keeps(e, {"widget"})} == kept


def _lifecycle_sync(lifecycle: Lifecycle, version: str, part: SyncPart) -> SyncResult:
    config = repo(ModuleRef("widget"), regular={"widget": version})
    resolution = resolve_runtime(config, config.runtimes["rt"])
    desired = desired_modules(config, resolution, Renderer(config))
    return lifecycle.sync(Context.of(config, "rt", NOW), desired, part=part)


def test_each_pass_returns_its_own_change_set() -> None:
    lifecycle = Lifecycle(InMemoryCluster(), system_namespace="reconciler-system")
    first = _lifecycle_sync(lifecycle, "1.0.0", SyncPart.DESIRED)
    second = _lifecycle_sync(lifecycle, "2.0.0", SyncPart.DESIRED)

    assert ChangeAction.CREATED in {c.action for c in first.outcome.changes}
    assert not set(first.outcome.changes) & {
        c for c in second.outcome.changes if c.action is not ChangeAction.UNCHANGED
    }
    assert _subjects(second.outcome.changes, ChangeAction.PRUNED) == [
        f"ConfigMap/{NAMESPACE}/widget-extra"
    ]


def test_a_removals_part_leaves_a_desired_module_alone() -> None:
    lifecycle = Lifecycle(InMemoryCluster(), system_namespace="reconciler-system")
    result = _lifecycle_sync(lifecycle, "1.0.0", SyncPart.REMOVALS)

    assert result.plan.modules == ()
    assert result.outcome == replace(result.outcome, modules=(), changes=())
