"""Reasons are typed where they are stored: the state store's edge reads a module's reason back
as its :class:`~reconciler.core.reasons.Reason` member, and a code it does not know (written by
a newer version) as the reason its state stands for."""

from __future__ import annotations

import json

from reconciler.core.reasons import parse_reason
from reconciler.core.status import ModuleState, ModuleStatus, Reason
from reconciler.operations.store.codec import decode_modules, encode_modules


def test_a_stored_reason_is_read_back_as_its_member() -> None:
    stored = (
        ModuleStatus("m", ModuleState.WARNING, Reason.CRD_IN_USE, "kept"),
        ModuleStatus("n", ModuleState.READY, Reason.READY, ""),
    )

    read = decode_modules(encode_modules(stored))

    assert [status.reason for status in read] == [Reason.CRD_IN_USE, Reason.READY]
    assert all(type(status.reason) is Reason for status in read)


def test_a_code_of_a_newer_version_is_read_as_its_states_reason() -> None:
    text = json.dumps([{"module": "m", "state": "Error", "reason": "SomethingNew", "message": ""}])

    (read,) = decode_modules(text)

    assert read.reason is Reason.FAILED
    assert parse_reason("SomethingNew", Reason.READY) is Reason.READY
    assert parse_reason("Stalled", Reason.READY) is Reason.STALLED
