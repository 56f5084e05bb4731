"""The inventories a lifecycle pass writes (reconciler.core.intent) on plain data: the intent
written before any object, the L3 bookkeeping of the default configuration, the final
inventory, and one rebuilt from our labels when it was deleted."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from reconciler.core.intent import (
    default_configuration_intent,
    final_inventory,
    inventory_intent,
    rebuilt_inventory,
    recorded_refs,
)
from reconciler.core.inventory import Inventory
from reconciler.core.model import (
    ANNOTATION_MODULE_VERSION,
    LABEL_MANAGED_BY,
    LABEL_MODULE,
    LABEL_RUNTIME,
    MANAGED_BY_VALUE,
    Module,
    Strategy,
)
from reconciler.core.objects import Body, ObjectRef
from reconciler.core.plan_values import DesiredModule
from reconciler.core.render import RenderedObject
from reconciler.core.resolve import Inclusion, ResolvedModule, VersionSource

RT, NS = "rt", "widget-system"
WIDGET = Module("widget", NS, "Deployment", "widget-operator", {})


def _body(kind: str, name: str, *, module: str = "widget", ours: bool = True) -> dict[str, Any]:
    labels = {LABEL_MANAGED_BY: MANAGED_BY_VALUE, LABEL_RUNTIME: RT, LABEL_MODULE: module}
    metadata: dict[str, Any] = {"name": name, "namespace": NS}
    if ours:
        metadata |= {"labels": labels, "annotations": {ANNOTATION_MODULE_VERSION: "2.0.0"}}
    api = "example.io/v1" if kind == "Widget" else "v1"
    return {"apiVersion": api, "kind": kind, "metadata": metadata}


CONFIG = _body("ConfigMap", "widget-config")
SERVICE = _body("Service", "widget-metrics")
DEFAULT = _body("Widget", "default")
CONFIG_REF, SERVICE_REF, DEFAULT_REF = (ObjectRef.of(b) for b in (CONFIG, SERVICE, DEFAULT))
OLD_REF = ObjectRef("v1", "Secret", NS, "widget-old")


def _desired(
    *, strategy: Strategy = Strategy.CREATE_AND_DELETE, default: bool = True
) -> DesiredModule:
    resolved = ResolvedModule(
        "widget", "2.0.0", VersionSource.RUNTIME_CHANNEL, "regular", Inclusion.LISTED, strategy
    )
    objects = tuple(RenderedObject("widget", "2.0.0", b) for b in (CONFIG, SERVICE))
    configuration = RenderedObject("widget", "2.0.0", DEFAULT, True) if default else None
    return DesiredModule(resolved, WIDGET, objects, configuration)


def _inventory(
    objects: tuple[ObjectRef, ...] = (CONFIG_REF, OLD_REF),
    default: ObjectRef | None = None,
    done: bool = False,
    commit: str = "c1",
) -> Inventory:
    return Inventory(RT, "widget", "1.0.0", Strategy.CREATE_AND_DELETE, objects, (), default,
                     done, commit)  # fmt: skip


def _live(*bodies: Mapping[str, Any]) -> dict[ObjectRef, Body]:
    return {ObjectRef.of(b): dict(b) for b in bodies}


def test_the_recorded_objects_end_with_the_default_configuration_once() -> None:
    assert recorded_refs(_inventory()) == [CONFIG_REF, OLD_REF]
    assert recorded_refs(_inventory(default=DEFAULT_REF)) == [CONFIG_REF, OLD_REF, DEFAULT_REF]
    listed = _inventory(objects=(CONFIG_REF, DEFAULT_REF), default=DEFAULT_REF)
    assert recorded_refs(listed) == [CONFIG_REF, DEFAULT_REF]


def test_a_first_install_intends_its_objects_and_its_default_configuration() -> None:
    intent = inventory_intent(RT, _desired(), None, "c2", {})
    assert intent.objects == (CONFIG_REF, SERVICE_REF)
    assert intent.version == "2.0.0"
    assert (intent.default_configuration, intent.default_configuration_done) == (DEFAULT_REF, False)
    assert intent.commit == "c2"


def test_an_upgrade_keeps_the_old_objects_in_the_intent_until_they_are_pruned() -> None:
    intent = inventory_intent(RT, _desired(default=False), _inventory(), "c2", {})
    assert intent.objects == (CONFIG_REF, SERVICE_REF, OLD_REF)
    assert intent.commit == "c2"


def test_an_intent_that_changes_nothing_keeps_the_commit_that_wrote_it() -> None:
    current = inventory_intent(RT, _desired(default=False), None, "c1", {})
    assert inventory_intent(RT, _desired(default=False), current, "c9", {}) == current


def test_a_changed_intent_without_a_commit_keeps_the_old_one() -> None:
    intent = inventory_intent(RT, _desired(default=False), _inventory(), "", {})
    assert intent.commit == "c1"


#: (current: reference, done; the object: absent, ours or a user's) -> (reference, done).
_L3 = [
    ((None, False), None, (DEFAULT_REF, False)),  # nothing yet: intended
    ((None, False), DEFAULT, (DEFAULT_REF, True)),  # ours, recorded by an older reconciler
    ((None, False), _body("Widget", "default", ours=False), (None, True)),  # a user's: theirs
    ((DEFAULT_REF, False), None, (DEFAULT_REF, False)),  # intended, absent: create it
    ((DEFAULT_REF, False), DEFAULT, (DEFAULT_REF, False)),  # intended, ours: final marks it done
    ((DEFAULT_REF, False), _body("Widget", "default", ours=False), (None, True)),  # user's
    ((DEFAULT_REF, True), None, (DEFAULT_REF, True)),  # done, deleted by a user: never again
    ((None, True), _body("Widget", "default", ours=False), (None, True)),  # a user's stays so
]


@pytest.mark.parametrize(("current", "found", "expected"), _L3)
def test_the_default_configuration_is_intended_before_it_is_created_and_only_once(
    current: tuple[ObjectRef | None, bool],
    found: Mapping[str, Any] | None,
    expected: tuple[ObjectRef | None, bool],
) -> None:
    inventory = _inventory(default=current[0], done=current[1])
    objects = _live(found) if found is not None else {}
    assert default_configuration_intent(RT, _desired(), inventory, objects) == expected


def test_without_create_and_delete_or_a_default_configuration_the_record_stays() -> None:
    inventory = _inventory(default=None, done=False)
    ignore = _desired(strategy=Strategy.IGNORE)
    assert default_configuration_intent(RT, ignore, inventory, {}) == (None, False)
    assert default_configuration_intent(RT, _desired(default=False), None, {}) == (None, False)


def test_the_final_inventory_lists_the_new_objects_and_those_kept_and_marks_the_default_done() -> (
    None
):
    intent = inventory_intent(RT, _desired(), _inventory(), "c2", {})
    final = final_inventory(intent, _desired(), (OLD_REF,))
    assert final.objects == (CONFIG_REF, SERVICE_REF, OLD_REF)
    assert final.default_configuration_done
    assert final_inventory(intent, _desired()).objects == (CONFIG_REF, SERVICE_REF)


def test_a_final_inventory_without_a_default_configuration_does_not_mark_one_done() -> None:
    intent = inventory_intent(RT, _desired(default=False), None, "c2", {})
    assert not final_inventory(intent, _desired(default=False)).default_configuration_done


def test_a_deleted_inventory_is_rebuilt_from_our_labels_with_the_annotated_version() -> None:
    rebuilt = rebuilt_inventory(RT, _desired(), _live(CONFIG, SERVICE, DEFAULT), "1.5")
    assert rebuilt is not None
    assert rebuilt.objects == (CONFIG_REF, SERVICE_REF)
    assert rebuilt.version == "2.0.0"
    assert (rebuilt.default_configuration, rebuilt.default_configuration_done) == (
        DEFAULT_REF,
        True,
    )


def test_a_rebuilt_inventory_takes_the_running_version_without_the_annotation() -> None:
    bare = _body("ConfigMap", "widget-config")
    del bare["metadata"]["annotations"]
    rebuilt = rebuilt_inventory(RT, _desired(), _live(bare), "1.5")
    assert rebuilt is not None
    assert rebuilt.version == "1.5"
    assert rebuilt.default_configuration is None


def test_nothing_is_rebuilt_from_unlabelled_objects_or_another_modules_labels() -> None:
    unlabelled = _body("ConfigMap", "widget-config", ours=False)
    copied = _body("Service", "widget-metrics", module="gadget")
    assert rebuilt_inventory(RT, _desired(), _live(unlabelled, copied), "1.0") is None
    assert rebuilt_inventory(RT, _desired(), {}, "1.0") is None
