"""The planner (reconciler.core.plan) on plain data: no cluster, no files, no lifecycle.

Every value is built by hand: a ``DesiredModule`` (what git asks for, already rendered), a
``LiveModule`` (what the cluster shows: inventory, objects, running version, blockers) and a
``Context`` (runtime, time, maintenance window). Each action of the closed vocabulary
(``ModuleAction``, ``ObjectAction``) is produced at least once, and a test iterates both enums
so that a new action cannot be added without a case here. Also: removals (``plan_removal``:
blocking objects, released namespaces, kept CRDs, default configurations), the orders of
removal and deletion, and what a maintenance window does to an upgrade that needs downtime
(when a window is open is reconciler.core.windows': tests/core/test_windows.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from reconciler.core.fielddiff import FieldChange
from reconciler.core.inventory import Inventory
from reconciler.core.model import (
    ANNOTATION_DEFAULT_CONFIGURATION,
    ANNOTATION_MODULE_VERSION,
    LABEL_MANAGED_BY,
    LABEL_MODULE,
    LABEL_RUNTIME,
    MANAGED_BY_VALUE,
    MaintenanceWindow,
    Module,
    ModuleRef,
    ModuleVersion,
    Strategy,
)
from reconciler.core.objects import ObjectRef
from reconciler.core.plan import VERSION_SHOWN, plan, plan_module, plan_removal
from reconciler.core.plan_values import (
    BLOCKING_SHOWN,
    Context,
    DesiredModule,
    LiveModule,
    ModuleAction,
    ModulePlan,
    ObjectAction,
    Occupants,
    Plan,
)
from reconciler.core.preflight import replaced
from reconciler.core.render import RenderedObject, deletion_order, removal_order
from reconciler.core.resolve import Inclusion, ResolvedModule, VersionSource
from tests.support.lifecycle_helpers import repo

NOW = datetime(2026, 11, 18, 12, 0, tzinfo=UTC)  # a Wednesday
RUNTIME = "rt"
NS = "widget-system"

# -- builders: module `widget` and its objects, as rendered ---------------------------------------


def _body(
    kind: str,
    name: str,
    *,
    api: str = "v1",
    namespace: str = NS,
    version: str = "1.0.0",
    module: str = "widget",
    **fields: Any,
) -> dict[str, Any]:
    """An object as the renderer makes it: our labels and the module-version annotation."""
    metadata: dict[str, Any] = {
        "name": name,
        "labels": {
            LABEL_MANAGED_BY: MANAGED_BY_VALUE,
            LABEL_RUNTIME: RUNTIME,
            LABEL_MODULE: module,
        },
        "annotations": {ANNOTATION_MODULE_VERSION: version},
    }
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": api, "kind": kind, "metadata": metadata, **fields}


def _crd(version: str) -> dict[str, Any]:
    spec = {"group": "example.io", "scope": "Namespaced", "names": {"kind": "Widget"}}
    return _body(
        "CustomResourceDefinition",
        "widgets.example.io",
        api="apiextensions.k8s.io/v1",
        namespace="",
        version=version,
        spec=spec,
    )


def _objects(version: str) -> tuple[dict[str, Any], ...]:
    """Widget's manifest in apply order: 1.0.0 has a ConfigMap, 2.x a Service instead."""
    extra = (
        _body("ConfigMap", "widget-extra", version=version, data={"a": "1"})
        if version == "1.0.0"
        else _body("Service", "widget-metrics", version=version, spec={"port": 8080})
    )
    operator = _body(
        "Deployment",
        "widget-operator",
        api="apps/v1",
        version=version,
        spec={"replicas": 1, "image": f"widget:{version}"},
    )
    return (_crd(version), extra, operator)


def _default(version: str = "1.0.0") -> dict[str, Any]:
    body = _body("Widget", "default", api="example.io/v1", version=version, spec={"size": 3})
    body["metadata"]["annotations"][ANNOTATION_DEFAULT_CONFIGURATION] = "true"
    return body


CRD = ObjectRef.of(_crd("1.0.0"))
CONFIG_MAP = ObjectRef("v1", "ConfigMap", NS, "widget-extra")
SERVICE = ObjectRef("v1", "Service", NS, "widget-metrics")
OPERATOR = ObjectRef("apps/v1", "Deployment", NS, "widget-operator")
DEFAULT = ObjectRef("example.io/v1", "Widget", NS, "default")
NAMESPACE = ObjectRef("v1", "Namespace", "", NS)

#: 2.1.0 requires downtime (L10).
WIDGET = Module(
    "widget",
    NS,
    "Deployment",
    "widget-operator",
    {
        v: ModuleVersion(v, _objects(v), _default(v), requires_downtime=v == "2.1.0")
        for v in ("1.0.0", "2.0.0", "2.1.0")
    },
)


def _desired(
    version: str = "1.0.0",
    *,
    strategy: Strategy = Strategy.CREATE_AND_DELETE,
    objects: Sequence[Mapping[str, Any]] | None = None,
    default: bool = True,
) -> DesiredModule:
    resolved = ResolvedModule(
        "widget", version, VersionSource.RUNTIME_CHANNEL, "regular", Inclusion.LISTED, strategy
    )
    bodies = _objects(version) if objects is None else objects
    rendered = tuple(RenderedObject("widget", version, b) for b in bodies)
    configuration = RenderedObject("widget", version, _default(version), True) if default else None
    return DesiredModule(resolved, WIDGET, rendered, configuration)


def _live(
    version: str = "1.0.0",
    *,
    strategy: Strategy = Strategy.CREATE_AND_DELETE,
    objects: Sequence[Mapping[str, Any]] | None = None,
    default_done: bool = True,
    **fields: Any,
) -> LiveModule:
    """Widget ``version`` installed by us: its inventory, its objects and the default
    configuration (created, unless ``default_done`` is false)."""
    bodies = [dict(b) for b in (_objects(version) if objects is None else objects)]
    if default_done:
        bodies.append(_default(version))
    inventory = Inventory(
        RUNTIME,
        "widget",
        version,
        strategy,
        tuple(ObjectRef.of(b) for b in bodies if b["kind"] != "Widget"),
        (("example.io", "Widget"),),
        DEFAULT,
        default_done,
    )
    live = LiveModule(inventory, {ObjectRef.of(b): b for b in bodies}, running_version=version)
    return replace(live, **fields)


def _context(**fields: Any) -> Context:
    return Context(RUNTIME, NOW, **fields)


def _changes(entry: ModulePlan) -> list[tuple[ObjectAction, str]]:
    return [(c.action, c.ref.subject) for c in entry.changes]


def _without_our_labels(body: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` as a user left it after taking our labels off (it is no longer ours, S1)."""
    metadata = {**body["metadata"], "labels": {"app": "theirs"}}
    return {**body, "metadata": metadata}


def _occupants(*names: str) -> Occupants:
    return Occupants(len(names), tuple(ObjectRef("v1", "ConfigMap", NS, n) for n in names))


#: Window Saturday 02:00-06:00 UTC.
WEEKEND = MaintenanceWindow(("Sat",), "02:00", 240, "UTC")

# -- one case per module action ------------------------------------------------------------------


def _install() -> ModulePlan:
    return plan_module(_context(), _desired(), LiveModule())


def _upgrade() -> ModulePlan:
    return plan_module(_context(), _desired("2.0.0"), _live("1.0.0"))


def _reconfigure() -> ModulePlan:
    drifted = dict(_objects("1.0.0")[2], spec={"replicas": 3, "image": "widget:1.0.0"})
    live = _live(objects=[*_objects("1.0.0")[:2], drifted])
    return plan_module(_context(), _desired(), live)


def _unchanged() -> ModulePlan:
    return plan_module(_context(), _desired(), _live())


def _remove_ignore() -> ModulePlan:
    return plan_removal(_live(strategy=Strategy.IGNORE))


def _remove_delete() -> ModulePlan:
    return plan_removal(_live())


def _blocked_downgrade() -> ModulePlan:
    return plan_module(_context(), _desired("1.0.0"), _live("2.0.0"))


def _blocked_unknown_version() -> ModulePlan:
    return plan_module(_context(), _desired(), _live(running_version="latest"))


def _blocked_deletion() -> ModulePlan:
    blocking = (ObjectRef("example.io/v1", "Widget", "apps", "mine"),)
    return plan_removal(_live(blocking=blocking, blocking_total=1))


def _deferred_window() -> ModulePlan:
    return plan_module(_context(), _desired("2.1.0"), _live("1.0.0"))


CASES: dict[ModuleAction, Callable[[], ModulePlan]] = {
    ModuleAction.INSTALL: _install,
    ModuleAction.UPGRADE: _upgrade,
    ModuleAction.RECONFIGURE: _reconfigure,
    ModuleAction.UNCHANGED: _unchanged,
    ModuleAction.REMOVE_IGNORE: _remove_ignore,
    ModuleAction.REMOVE_DELETE: _remove_delete,
    ModuleAction.BLOCKED_DOWNGRADE: _blocked_downgrade,
    ModuleAction.BLOCKED_UNKNOWN_VERSION: _blocked_unknown_version,
    ModuleAction.BLOCKED_DELETION: _blocked_deletion,
    ModuleAction.DEFERRED_WINDOW: _deferred_window,
}


@pytest.mark.parametrize("action", list(ModuleAction))
def test_every_module_action_has_a_case_that_produces_it(action: ModuleAction) -> None:
    assert action in CASES, f"no test case produces {action}: add one to CASES"

    assert CASES[action]().action is action


def _kept_on_upgrade() -> ModulePlan:
    """2.0.0 drops the ConfigMap, which carries the keep mark: kept, not deleted."""
    kept = _body("ConfigMap", "widget-extra", data={"a": "1"})
    kept["metadata"]["annotations"]["reconciler.dev/prune"] = "disabled"
    live = _live(objects=[_objects("1.0.0")[0], kept, _objects("1.0.0")[2]])
    return plan_module(_context(), _desired("2.0.0"), live)


def test_every_object_action_is_produced_by_some_case() -> None:
    cases = [*CASES.values(), _kept_on_upgrade]
    produced = {c.action for case in cases for c in case().changes}
    # a replace is an update the server refused as immutable, marked after planning
    drifted = _reconfigure()
    produced |= {c.action for c in replaced(drifted, [c.ref for c in drifted.changes]).changes}

    assert produced == set(ObjectAction)


# -- install, adoption and the default configuration (L3, L6) ------------------------------------


def test_install_creates_every_object_then_the_default_configuration() -> None:
    entry = _install()

    assert (entry.action, entry.reason, entry.message) == (
        ModuleAction.INSTALL,
        "Install",
        "install widget 1.0.0",
    )
    assert (entry.from_version, entry.to_version) == (None, "1.0.0")
    assert _changes(entry) == [
        (ObjectAction.CREATE, CRD.subject),
        (ObjectAction.CREATE, CONFIG_MAP.subject),
        (ObjectAction.CREATE, OPERATOR.subject),
        (ObjectAction.CREATE, DEFAULT.subject),
    ]
    assert [c.default_configuration for c in entry.changes] == [False, False, False, True]
    assert FieldChange("spec.replicas", None, 1) in entry.changes[2].fields
    assert entry.changes_anything


def test_a_module_found_running_without_an_inventory_is_adopted() -> None:
    found = LiveModule(objects={}, running_version="1.0.0")

    same = plan_module(_context(), _desired("1.0.0"), found)
    older = plan_module(_context(), _desired("2.0.0"), found)

    assert (same.action, same.reason) == (ModuleAction.INSTALL, "Adopted")
    assert same.message == "take over widget 1.0.0 found in the cluster"
    assert (older.action, older.reason) == (ModuleAction.UPGRADE, "Adopted")


def test_adoption_prunes_nothing_without_an_inventory() -> None:
    stray = _body("ConfigMap", "not-in-git")
    found = LiveModule(objects={ObjectRef.of(stray): stray}, running_version="1.0.0")

    entry = plan_module(_context(), _desired(), found)

    assert ObjectAction.DELETE not in {c.action for c in entry.changes}


def test_the_default_configuration_is_created_once() -> None:
    intended = plan_module(_context(), _desired(), _live(default_done=False))
    created = plan_module(_context(), _desired(), _live())
    deleted_by_a_user = plan_module(
        _context(), _desired(), replace(_live(), objects=dict(_live(default_done=False).objects))
    )

    assert _changes(intended) == [(ObjectAction.CREATE, DEFAULT.subject)]
    assert intended.changes[0].default_configuration
    assert created.changes == ()
    assert deleted_by_a_user.changes == ()  # done once: never re-created


def test_a_default_configuration_someone_made_first_is_kept() -> None:
    theirs = {**_default(), "spec": {"size": 99}}
    live = _live(default_done=False)
    live = replace(live, objects={**live.objects, DEFAULT: theirs})

    entry = plan_module(_context(), _desired(), live)

    assert entry.changes == ()


def test_no_default_configuration_with_strategy_ignore() -> None:
    entry = plan_module(_context(), _desired(strategy=Strategy.IGNORE), LiveModule())

    assert DEFAULT.subject not in [s for _, s in _changes(entry)]


# -- upgrades, prune (L4, S1) and the running version (L5) ---------------------------------------


def test_upgrade_updates_creates_and_prunes_in_that_order() -> None:
    entry = _upgrade()

    assert (entry.action, entry.reason, entry.message) == (
        ModuleAction.UPGRADE,
        "Upgrade",
        "upgrade widget 1.0.0 -> 2.0.0",
    )
    assert (entry.from_version, entry.to_version) == ("1.0.0", "2.0.0")
    assert _changes(entry) == [
        (ObjectAction.UPDATE, CRD.subject),
        (ObjectAction.CREATE, SERVICE.subject),
        (ObjectAction.UPDATE, OPERATOR.subject),
        (ObjectAction.DELETE, CONFIG_MAP.subject),
    ]
    operator = entry.changes[2]
    assert FieldChange("spec.image", "widget:1.0.0", "widget:2.0.0") in operator.fields
    assert entry.changes[3].fields == ()


def test_prune_deletes_in_reverse_apply_order() -> None:
    gone = [_body("ServiceAccount", "a"), _body("Role", "b", api="rbac.authorization.k8s.io/v1")]
    live = _live(objects=[*_objects("1.0.0"), *gone])

    entry = plan_module(_context(), _desired(), live)

    assert _changes(entry) == [
        (ObjectAction.DELETE, "Role/widget-system/b"),
        (ObjectAction.DELETE, "ServiceAccount/widget-system/a"),
    ]
    assert (entry.action, entry.reason) == (ModuleAction.RECONFIGURE, "Drift")


def test_prune_leaves_objects_that_are_no_longer_ours() -> None:
    taken = _without_our_labels(_objects("1.0.0")[1])
    other_module = _body("ConfigMap", "widget-extra", module="gadget", data={"a": "1"})
    other_runtime = _body("ConfigMap", "widget-extra", data={"a": "1"})
    other_runtime["metadata"]["labels"][LABEL_RUNTIME] = "elsewhere"

    for body in (taken, other_module, other_runtime):
        live = _live(objects=[_objects("1.0.0")[0], body, _objects("1.0.0")[2]])
        entry = plan_module(_context(), _desired("2.0.0"), live)
        assert (ObjectAction.DELETE, CONFIG_MAP.subject) not in _changes(entry), body


def test_prune_of_an_object_already_gone_is_nothing() -> None:
    live = _live()
    live = replace(live, objects={r: b for r, b in live.objects.items() if r != CONFIG_MAP})

    entry = plan_module(_context(), _desired("2.0.0"), live)

    assert CONFIG_MAP.subject not in [s for _, s in _changes(entry)]


def test_a_runtime_less_inventory_prunes_whatever_runtime_label_is_found() -> None:
    live = _live()
    assert live.inventory is not None
    live = replace(live, inventory=replace(live.inventory, runtime=""))

    entry = plan_module(_context(), _desired("2.0.0"), live)

    assert (ObjectAction.DELETE, CONFIG_MAP.subject) in _changes(entry)


def test_a_lower_version_than_the_running_one_is_never_installed() -> None:
    entry = _blocked_downgrade()

    assert entry.reason == "DowngradeNotSupported"
    assert entry.message == (
        "widget 2.0.0 runs; the resolved version 1.0.0 is lower and is not installed "
        "(no downgrades)"
    )
    assert entry.changes == ()
    assert not entry.changes_anything


def test_an_unreadable_running_version_changes_nothing_and_is_shown_cut() -> None:
    long = "x" * (VERSION_SHOWN + 10)
    live = _live(running_version=long, version_source="label v of Deployment/ns/op")

    entry = plan_module(_context(), _desired("2.0.0"), live)

    assert (entry.action, entry.reason) == (
        ModuleAction.BLOCKED_UNKNOWN_VERSION,
        "UnknownRunningVersion",
    )
    assert entry.changes == ()
    assert f"in label v of Deployment/ns/op is '{'x' * VERSION_SHOWN}...'," in entry.message
    assert long not in entry.message
    assert "2.0.0" in entry.message


def test_a_leading_v_is_the_running_version() -> None:
    entry = plan_module(_context(), _desired("2.0.0"), _live(running_version="v1.0.0"))

    assert entry.action is ModuleAction.UPGRADE


# -- reconfigure and unchanged -------------------------------------------------------------------


def test_drift_updates_only_the_fields_that_differ() -> None:
    entry = _reconfigure()

    assert (entry.reason, entry.message) == ("Drift", "1 object(s) differ from git")
    assert _changes(entry) == [(ObjectAction.UPDATE, OPERATOR.subject)]
    assert entry.changes[0].fields == (FieldChange("spec.replicas", 3, 1),)


def test_fields_set_by_others_are_not_drift() -> None:
    operator = _objects("1.0.0")[2]
    defaulted = {**operator, "spec": {**operator["spec"], "paused": False}, "status": {"x": 1}}
    live = _live(objects=[*_objects("1.0.0")[:2], defaulted])

    assert plan_module(_context(), _desired(), live).action is ModuleAction.UNCHANGED


def test_a_new_strategy_is_a_reconfiguration() -> None:
    live = _live(strategy=Strategy.IGNORE)

    entry = plan_module(_context(), _desired(), live)

    assert (entry.action, entry.reason, entry.message) == (
        ModuleAction.RECONFIGURE,
        "StrategyChanged",
        "strategy Ignore -> CreateAndDelete",
    )
    assert entry.changes == ()
    assert entry.strategy is Strategy.CREATE_AND_DELETE


def test_an_installed_module_as_git_wants_it_is_unchanged() -> None:
    entry = _unchanged()

    assert (entry.reason, entry.message) == ("UpToDate", "widget 1.0.0 is up to date")
    assert entry.changes == ()
    assert not entry.changes_anything


# -- user data on upgrades: kept CRDs and released namespaces (L8) -------------------------------


def test_a_crd_the_new_version_drops_waits_for_its_custom_resources() -> None:
    objects = [o for o in _objects("2.0.0") if o["kind"] != "CustomResourceDefinition"]
    left = _occupants("a", "b")
    live = _live(crd_instances={CRD: left})

    entry = plan_module(_context(), _desired("2.0.0", objects=objects), live)

    assert CRD.subject not in [s for _, s in _changes(entry)]
    assert entry.kept == (CRD,)
    assert entry.notes == (
        "CRD widgets.example.io is kept until its custom resources are gone: "
        "2 object(s), e.g. ConfigMap/widget-system/a, ConfigMap/widget-system/b",
    )


def test_an_object_a_version_drops_that_is_marked_to_be_kept_is_released() -> None:
    entry = _kept_on_upgrade()

    assert (ObjectAction.KEEP, CONFIG_MAP.subject) in _changes(entry)
    kept = next(c for c in entry.changes if c.ref == CONFIG_MAP)
    assert {f.path for f in kept.fields} == {
        f"metadata.labels.{LABEL_MANAGED_BY}",
        f"metadata.labels.{LABEL_RUNTIME}",
        f"metadata.labels.{LABEL_MODULE}",
        f"metadata.annotations.{ANNOTATION_MODULE_VERSION}",
    }
    assert entry.notes == (
        "ConfigMap/widget-system/widget-extra is kept (reconciler.dev/prune: disabled): "
        "released, not deleted",
    )


def test_a_kept_crd_is_released_though_custom_resources_are_left() -> None:
    crd = _crd("1.0.0")
    crd["metadata"]["annotations"]["helm.sh/resource-policy"] = "keep"
    objects = [o for o in _objects("2.0.0") if o["kind"] != "CustomResourceDefinition"]
    live = _live(objects=[crd, *_objects("1.0.0")[1:]], crd_instances={CRD: _occupants("a")})

    entry = plan_module(_context(), _desired("2.0.0", objects=objects), live)

    assert (ObjectAction.KEEP, CRD.subject) in _changes(entry)
    assert entry.kept == ()  # nothing waits for the custom resources


def test_a_kept_default_configuration_is_released_at_removal() -> None:
    default = _default()
    default["metadata"]["annotations"]["reconciler.dev/prune"] = "disabled"
    live = _live()
    live = replace(live, objects={**live.objects, DEFAULT: default})

    entry = plan_removal(live)

    assert _changes(entry)[0] == (ObjectAction.KEEP, DEFAULT.subject)
    assert entry.changes[0].default_configuration


def test_a_dropped_crd_without_custom_resources_is_deleted() -> None:
    objects = [o for o in _objects("2.0.0") if o["kind"] != "CustomResourceDefinition"]

    entry = plan_module(_context(), _desired("2.0.0", objects=objects), _live())

    assert (ObjectAction.DELETE, CRD.subject) in _changes(entry)
    assert entry.kept == ()


def test_a_dropped_namespace_holding_others_objects_is_released_not_deleted() -> None:
    namespace = _body("Namespace", NS, namespace="")
    live = _live(
        objects=[*_objects("1.0.0"), namespace], namespace_users={NS: _occupants("users-data")}
    )

    entry = plan_module(_context(), _desired(), live)

    assert _changes(entry) == [(ObjectAction.UPDATE, NAMESPACE.subject)]
    assert {f.path for f in entry.changes[0].fields} == {
        f"metadata.labels.{LABEL_MANAGED_BY}",
        f"metadata.labels.{LABEL_RUNTIME}",
        f"metadata.labels.{LABEL_MODULE}",
        f"metadata.annotations.{ANNOTATION_MODULE_VERSION}",
    }
    assert all(f.new is None for f in entry.changes[0].fields)
    assert entry.notes == (
        "namespace widget-system is released, not deleted: it holds "
        "1 object(s), e.g. ConfigMap/widget-system/users-data that are not ours",
    )


# -- maintenance windows on upgrades (L10) -------------------------------------------------------


def test_an_upgrade_needing_downtime_waits_without_a_window() -> None:
    entry = _deferred_window()

    assert entry.reason == "WaitingForMaintenanceWindow"
    assert entry.message == (
        "upgrade 1.0.0 -> 2.1.0 requires downtime; it waits for the maintenance window, "
        "and the runtime has none"
    )
    assert entry.changes == ()


def test_an_upgrade_needing_downtime_waits_for_the_next_window() -> None:
    entry = plan_module(_context(window=WEEKEND), _desired("2.1.0"), _live("1.0.0"))

    assert entry.action is ModuleAction.DEFERRED_WINDOW
    assert entry.message.endswith("(next: Sat 2026-11-21 02:00 UTC)")


def test_an_upgrade_needing_downtime_runs_inside_the_window() -> None:
    saturday = datetime(2026, 11, 21, 3, 0, tzinfo=UTC)

    entry = plan_module(Context(RUNTIME, saturday, WEEKEND), _desired("2.1.0"), _live("1.0.0"))

    assert entry.action is ModuleAction.UPGRADE


def test_only_upgrades_wait_for_the_window() -> None:
    install = plan_module(_context(), _desired("2.1.0"), LiveModule())
    unchanged = plan_module(_context(), _desired("2.1.0"), _live("2.1.0"))

    assert install.action is ModuleAction.INSTALL
    assert unchanged.action is ModuleAction.UNCHANGED


# -- removal (L7, L8, L9) ------------------------------------------------------------------------


def test_removal_with_ignore_releases_every_object_of_ours() -> None:
    entry = _remove_ignore()

    assert (entry.reason, entry.message) == (
        "StrategyIgnore",
        "stop managing widget; its objects stay, without our labels",
    )
    assert (entry.from_version, entry.to_version) == ("1.0.0", None)
    assert _changes(entry) == [
        (ObjectAction.UPDATE, CRD.subject),
        (ObjectAction.UPDATE, CONFIG_MAP.subject),
        (ObjectAction.UPDATE, OPERATOR.subject),
        (ObjectAction.UPDATE, DEFAULT.subject),
    ]
    for change in entry.changes:
        assert all(f.new is None for f in change.fields)
        assert len(change.fields) == 4
    assert entry.changes_anything


def test_removal_with_ignore_leaves_objects_that_are_not_ours() -> None:
    live = _live(strategy=Strategy.IGNORE)
    taken = _without_our_labels(live.objects[OPERATOR])
    live = replace(live, objects={**live.objects, OPERATOR: taken})

    entry = plan_removal(live)

    assert OPERATOR.subject not in [s for _, s in _changes(entry)]
    assert len(entry.changes) == 3


def test_removal_deletes_the_default_configuration_first_then_in_reverse_apply_order() -> None:
    entry = _remove_delete()

    assert (entry.reason, entry.message) == ("Removed", "delete widget 1.0.0")
    assert _changes(entry) == [
        (ObjectAction.DELETE, DEFAULT.subject),
        (ObjectAction.DELETE, OPERATOR.subject),
        (ObjectAction.DELETE, CONFIG_MAP.subject),
        (ObjectAction.DELETE, CRD.subject),
    ]
    assert [c.default_configuration for c in entry.changes] == [True, False, False, False]


def test_removal_keeps_a_default_configuration_that_is_not_ours() -> None:
    intended = _live(default_done=False)  # recorded, never created: a user may own that name
    theirs = _without_our_labels(_default())
    intended = replace(intended, objects={**intended.objects, DEFAULT: theirs})

    entry = plan_removal(intended)

    assert DEFAULT.subject not in [s for _, s in _changes(entry)]
    assert len(entry.changes) == 3


def test_removal_waits_for_objects_of_the_module_kinds() -> None:
    blocking = tuple(
        ObjectRef("example.io/v1", "Widget", "apps", f"w{i}") for i in range(BLOCKING_SHOWN + 1)
    )
    live = _live(blocking=blocking, blocking_total=9)

    entry = plan_removal(live)

    assert (entry.action, entry.reason) == (ModuleAction.BLOCKED_DELETION, "WaitingForResources")
    assert entry.message == (
        "deletion of widget waits for 9 object(s) of its kinds: "
        + ", ".join(f"Widget/apps/w{i}" for i in range(BLOCKING_SHOWN))
        + " and 4 more; the operator keeps running until they are gone"
    )
    assert (entry.blocking, entry.blocking_total) == (blocking, 9)
    # only the default configuration goes while it waits (it is one of the module's kinds);
    # the CRD, the operator and everything else are kept until the blockers are gone
    assert _changes(entry) == [(ObjectAction.DELETE, DEFAULT.subject)]
    assert entry.kept == ()  # kept CRDs are an upgrade's: a removal waits as a whole


def test_blocked_removal_names_all_blockers_when_few() -> None:
    entry = _blocked_deletion()

    assert entry.message == (
        "deletion of widget waits for 1 object(s) of its kinds: Widget/apps/mine; "
        "the operator keeps running until they are gone"
    )


def test_a_default_configuration_with_finalizers_is_deleted_and_waited_for() -> None:
    """L13: its operator removes the finalizers, so it keeps running until the CR is gone."""
    held = _default()
    held["metadata"]["finalizers"] = ["widgets.example.io/cleanup"]

    entry = plan_removal(_live(objects=[*_objects("1.0.0"), held], default_done=False))

    assert (entry.action, entry.reason) == (ModuleAction.BLOCKED_DELETION, "WaitingForResources")
    assert _changes(entry) == [(ObjectAction.DELETE, DEFAULT.subject)]
    assert entry.message == (
        f"deletion of widget waits for 1 object(s): {DEFAULT.subject} is being deleted, "
        "waiting for finalizers widgets.example.io/cleanup; "
        "the operator keeps running until they are gone"
    )
    assert entry.held == ((DEFAULT, ("widgets.example.io/cleanup",)),)


def test_a_terminating_default_configuration_is_not_deleted_again_and_still_waited_for() -> None:
    terminating = _default()
    terminating["metadata"]["deletionTimestamp"] = "2026-11-18T12:00:00Z"
    terminating["metadata"]["finalizers"] = ["widgets.example.io/cleanup"]
    live = _live(
        objects=[*_objects("1.0.0"), terminating],
        default_done=False,
        blocking=(DEFAULT,),
        blocking_total=1,
        held={DEFAULT: ("widgets.example.io/cleanup",)},
    )

    entry = plan_removal(live)

    assert entry.action is ModuleAction.BLOCKED_DELETION
    assert entry.changes == ()
    assert "is being deleted, waiting for finalizers widgets.example.io/cleanup" in entry.message


def test_a_removal_whose_objects_are_all_terminating_says_it_finishes_when_they_are_gone() -> None:
    terminating = _body("Namespace", NS, namespace="")
    terminating["metadata"]["deletionTimestamp"] = "2026-11-18T12:00:00Z"
    live = _live(
        objects=[terminating],
        default_done=False,
        blocking=(NAMESPACE,),
        blocking_total=1,
        held={NAMESPACE: ()},
    )

    entry = plan_removal(live)

    assert entry.message == (
        f"deletion of widget waits for 1 object(s): {NAMESPACE.subject} is being deleted; "
        "the removal finishes once they are gone"
    )


def test_removal_releases_a_namespace_holding_others_objects() -> None:
    namespace = _body("Namespace", NS, namespace="")
    live = _live(
        objects=[namespace, *_objects("1.0.0")],
        namespace_users={NS: _occupants(*(f"d{i}" for i in range(7)))},
    )

    entry = plan_removal(live)

    assert _changes(entry)[-2:] == [
        (ObjectAction.UPDATE, NAMESPACE.subject),  # released, in its place of the order
        (ObjectAction.DELETE, CRD.subject),
    ]
    assert {a for a, _ in _changes(entry)[:-2]} == {ObjectAction.DELETE}
    shown = ", ".join(f"ConfigMap/widget-system/d{i}" for i in range(BLOCKING_SHOWN))
    assert entry.notes == (
        f"namespace widget-system is released, not deleted: it holds 7 object(s), e.g. {shown} "
        "that are not ours",
    )


def test_removal_deletes_an_empty_namespace_last() -> None:
    namespace = _body("Namespace", NS, namespace="")

    entry = plan_removal(_live(objects=[namespace, *_objects("1.0.0")]))

    assert _changes(entry)[-2:] == [
        (ObjectAction.DELETE, NAMESPACE.subject),
        (ObjectAction.DELETE, CRD.subject),
    ]
    assert entry.notes == ()


def test_removal_uses_the_strategy_of_the_inventory() -> None:
    ignore = plan_removal(_live(strategy=Strategy.IGNORE))
    delete = plan_removal(_live(strategy=Strategy.CREATE_AND_DELETE))

    assert (ignore.action, ignore.strategy) == (ModuleAction.REMOVE_IGNORE, Strategy.IGNORE)
    assert (delete.action, delete.strategy) == (
        ModuleAction.REMOVE_DELETE,
        Strategy.CREATE_AND_DELETE,
    )


# -- the runtime's plan --------------------------------------------------------------------------


def _gadget_live() -> LiveModule:
    live = _live(objects=[_body("ConfigMap", "gadget-config", module="gadget")], default_done=False)
    assert live.inventory is not None
    inventory = replace(live.inventory, module="gadget", default_configuration=None)
    return replace(live, inventory=inventory)


def test_a_suspended_runtime_gets_an_empty_plan() -> None:
    result = plan(_context(suspended=True), [_desired()], {"widget": LiveModule()})

    assert result == Plan(RUNTIME, (), suspended=True)
    assert not result.has_changes


def test_modules_that_left_git_are_removed_after_the_desired_ones() -> None:
    live = {"gadget": _gadget_live(), "widget": _live(), "stray": LiveModule()}

    result = plan(_context(), [_desired()], live)

    assert [(m.module, m.action) for m in result.modules] == [
        ("widget", ModuleAction.UNCHANGED),
        ("gadget", ModuleAction.REMOVE_DELETE),
    ]
    assert result.has_changes
    assert result.module("gadget") is result.modules[1]
    assert result.module("stray") is None  # no inventory: never ours to remove


def test_a_plan_without_changes_says_so_and_a_deprovision_always_changes() -> None:
    result = plan(_context(), [_desired()], {"widget": _live()})

    assert not result.has_changes
    assert replace(result, deprovision=True).has_changes


def test_a_plan_serialises_to_json() -> None:
    result = plan(_context(), [_desired()], {})

    document = result.to_json()

    assert (document["runtime"], document["hasChanges"], document["deprovision"]) == (
        RUNTIME,
        True,
        False,
    )
    (module,) = document["modules"]
    assert (module["module"], module["action"], module["toVersion"]) == (
        "widget",
        "install",
        "1.0.0",
    )
    assert module["changes"][0]["action"] == "create"
    assert module["changes"][-1]["defaultConfiguration"] is True


# -- orders --------------------------------------------------------------------------------------

DEPLOYMENT = ObjectRef("apps/v1", "Deployment", "ns", "op")
ROLE = ObjectRef("rbac.authorization.k8s.io/v1", "ClusterRole", "", "op")


def test_deletion_is_the_reverse_of_apply_order_with_crds_last() -> None:
    namespace = ObjectRef("v1", "Namespace", "", "ns")

    assert deletion_order([CRD, namespace, ROLE, DEPLOYMENT]) == [DEPLOYMENT, ROLE, namespace, CRD]


def test_custom_resources_are_deleted_before_built_in_kinds() -> None:
    custom = ObjectRef("example.io/v1", "Widget", "ns", "w")

    assert deletion_order([DEPLOYMENT, custom]) == [custom, DEPLOYMENT]


def test_removal_order_puts_dependents_first() -> None:
    dependencies = {"app": ("mesh",), "mesh": ("base",), "tool": ()}

    assert removal_order(["base", "mesh", "app", "tool"], dependencies) == [
        "app",
        "tool",
        "mesh",
        "base",
    ]


def test_removal_order_of_a_cycle_goes_by_name() -> None:
    dependencies = {"x": ("y",), "y": ("x",), "free": ()}

    assert removal_order(["y", "x", "free"], dependencies) == ["free", "x", "y"]


def test_plan_removes_dependents_before_their_dependencies() -> None:
    base = _gadget_live()
    assert base.inventory is not None
    live = {
        "base": replace(base, inventory=replace(base.inventory, module="base")),
        "app": replace(base, inventory=replace(base.inventory, module="app")),
    }

    result = plan(_context(dependencies={"app": ("base",)}), [], live)

    assert [m.module for m in result.modules] == ["app", "base"]


# -- one way to build the planner's context ------------------------------------------------


def test_every_caller_gets_the_runtime_s_window_suspension_and_dependencies() -> None:
    config = repo(ModuleRef("widget"), ModuleRef("gadget"))
    context = Context.of(config, "rt", NOW)
    runtime = config.runtimes["rt"]

    assert context == Context(
        "rt",
        NOW,
        runtime.maintenance_window,
        runtime.suspend,
        {"widget": (), "gadget": ("widget",)},
    )
    left = Context.of(config, "gone", NOW)
    assert (left.window, left.suspended, left.dependencies) == (
        None,
        False,
        context.dependencies,
    )
    assert Context.of(config, "rt", NOW, leaving=True) == replace(context, window=None)
