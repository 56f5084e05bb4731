"""A Secret written with ``stringData``, on the in-memory cluster and on the real API server: the
server stores it merged into ``data``, base64-encoded (``stringData`` wins a key in both), and
answers no ``stringData``; applying it again changes nothing. Through whole syncs: a module's
Secret written so is no drift, and is not applied again by the next sync; no value is printed."""

from __future__ import annotations

import base64
from typing import Any

from reconciler.cli.report import plan_text
from reconciler.core.objects import ObjectRef
from reconciler.core.status import ChangeAction
from tests.support.contract_modules import WidgetFleet
from tests.support.contract_targets import MANAGER, Target, apply_namespace

PASSWORD = "pa55-w0rd-never-shown"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _secret(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "credentials", "namespace": namespace},
        "type": "Opaque",
        "data": {"user": _b64("admin"), "password": _b64("overwritten")},
        "stringData": {"password": PASSWORD, "url": "https://db.example"},
    }


def test_string_data_is_stored_in_data_and_a_second_apply_changes_nothing(
    target: Target,
) -> None:
    namespace = apply_namespace(target, "secret")
    first = target.cluster.apply(_secret(namespace), field_manager=MANAGER)

    assert "stringData" not in first
    assert first["data"] == {
        "user": _b64("admin"),
        "password": _b64(PASSWORD),
        "url": _b64("https://db.example"),
    }
    again = target.cluster.apply(_secret(namespace), field_manager=MANAGER)
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]


def test_a_modules_secret_written_with_string_data_is_no_drift(fleet: WidgetFleet) -> None:
    secret = _secret(fleet.namespace)
    ref = ObjectRef.of(secret)
    installed = fleet.sync("1.0.0", [secret])
    assert [c.action for c in installed.outcome.changes if c.ref == ref] == [ChangeAction.CREATED]

    again = fleet.sync("1.0.0", [secret])

    assert not again.plan.has_changes, plan_text(again.plan)
    assert [c.action for c in again.outcome.changes if c.ref == ref] == [ChangeAction.UNCHANGED]
    changed = fleet.sync("1.0.0", [{**secret, "stringData": {"password": "xyzzy-changed"}}])
    text = plan_text(changed.plan)
    assert f"~ {ref.subject}" in text
    assert PASSWORD not in text
    assert _b64(PASSWORD) not in text
    assert "xyzzy" not in text


def test_a_key_dropped_from_string_data_stays_in_data(target: Target) -> None:
    """The server owns ``stringData`` keys for the manager, never ``data`` ones: a key a later
    apply leaves out of ``stringData`` stays (the in-memory cluster the same)."""
    namespace = apply_namespace(target, "secret")
    first = _secret(namespace)
    target.cluster.apply(first, field_manager=MANAGER)

    answered = target.cluster.apply(
        {**first, "stringData": {"password": PASSWORD}}, field_manager=MANAGER
    )

    assert sorted(answered["data"]) == ["password", "url", "user"]
    (entry,) = answered["metadata"]["managedFields"]
    assert entry["fieldsV1"]["f:stringData"] == {"f:password": {}}
