"""The text of a lifecycle pass's Events (reconciler.core.events) on plain data: the reason
by what was done, the counts, the objects named and those only counted."""

from __future__ import annotations

import pytest

from reconciler.core.events import (
    EVENT_SUBJECTS,
    counts_for_event,
    deletion_blocked_text,
    module_event_text,
)
from reconciler.core.objects import ObjectRef
from reconciler.core.status import ChangeAction, ChangeSetEntry

NS = "widget-system"


def _change(action: ChangeAction, name: str = "c") -> ChangeSetEntry:
    return ChangeSetEntry("widget", ObjectRef("v1", "ConfigMap", NS, name), action)


def test_an_apply_names_its_counts_then_its_objects() -> None:
    changed = [_change(ChangeAction.CREATED, "a"), _change(ChangeAction.CONFIGURED, "b")]
    reason, message = module_event_text("widget", "1.0.0", changed)
    assert reason == "Applied"
    assert message == (
        f"module widget 1.0.0: 1 created, 1 configured: ConfigMap/{NS}/a created, "
        f"ConfigMap/{NS}/b configured"
    )


@pytest.mark.parametrize(
    ("actions", "reason"),
    [
        ((ChangeAction.PRUNED,), "Applied"),
        ((ChangeAction.RELEASED, ChangeAction.PRUNED), "Released"),
        ((ChangeAction.CREATED, ChangeAction.RELEASED, ChangeAction.DELETED), "Deleted"),
    ],
)
def test_the_reason_is_the_strongest_of_what_was_done(
    actions: tuple[ChangeAction, ...], reason: str
) -> None:
    assert module_event_text("widget", None, [_change(a) for a in actions])[0] == reason


def test_an_event_names_the_first_objects_and_counts_the_rest() -> None:
    changed = [_change(ChangeAction.CREATED, f"c{i:02}") for i in range(EVENT_SUBJECTS + 3)]
    _, message = module_event_text("widget", "1.0.0", changed)
    assert f"{EVENT_SUBJECTS + 3} created" in message
    assert f"c{EVENT_SUBJECTS - 1:02} created" in message
    assert f"c{EVENT_SUBJECTS:02}" not in message
    assert message.endswith("and 3 more")


def test_a_module_without_a_version_is_named_alone() -> None:
    _, message = module_event_text("widget", None, [_change(ChangeAction.DELETED)])
    assert message.startswith("module widget: 1 deleted: ")


def test_an_unchanged_object_is_worth_no_event() -> None:
    assert not counts_for_event(_change(ChangeAction.UNCHANGED))
    assert all(
        counts_for_event(_change(a)) for a in ChangeAction if a is not ChangeAction.UNCHANGED
    )


def test_a_blocked_deletion_says_which_module_waits_for_which_kind_and_what_to_do() -> None:
    text = deletion_blocked_text("widget", ObjectRef("example.io/v1", "Widget", NS, "mine"))
    assert text == (
        "module widget is not removed while this Widget exists: delete it, or keep the module"
    )
