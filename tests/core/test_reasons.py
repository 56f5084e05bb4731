"""Reason codes are one enum (:class:`reconciler.core.reasons.Reason`), user contract: the
documents commands print carry them as plain text (YAML readers and writers know no enum),
and a stored module status reads its reason back by the enum's value."""

from __future__ import annotations

import yaml

from reconciler.core.plan_values import ModuleAction, PlannedModule
from reconciler.core.status import ModuleState, ModuleStatus, Reason


def test_a_plans_reason_is_printed_as_plain_text() -> None:
    planned = PlannedModule("m", ModuleAction.INSTALL, Reason.INSTALL, None, "1.0.0")

    document = planned.to_json()

    assert type(document["reason"]) is str
    assert yaml.safe_dump(document).count("reason: Install") == 1


def test_a_module_status_reason_is_printed_as_plain_text() -> None:
    status = ModuleStatus("m", ModuleState.PROCESSING, Reason.WAITING_FOR_OPERATOR, "waiting")

    assert "reason: WaitingForOperator" in yaml.safe_dump(status.to_json())


def test_every_reason_is_one_camel_case_word_and_named_once() -> None:
    values = [reason.value for reason in Reason]

    assert len(values) == len(set(values))
    assert all(value.isalnum() and value[0].isupper() for value in values)
