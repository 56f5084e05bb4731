"""Endpoint secrets from a Secret of the daemon's namespace (only one labelled for
notifications: a commit cannot send a runtime's kubeconfig anywhere), from files in the
secrets folder (no path out of it), and each notification as a Kubernetes Event on the
daemon's Deployment (Warning for bad news)."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from pathlib import Path

import pytest

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.endpoints import NotificationSettings, SecretRef
from reconciler.core.notifications import Notification, NotificationKind
from reconciler.errors import AccessError
from reconciler.notify.delivery import Delivery
from reconciler.notify.events import NotificationEvents
from reconciler.notify.secrets import SECRET_LABEL, SecretReader, secrets_of
from tests.support.receiver import loopback_transport

NS = "reconciler-system"


def _cluster_with_secrets() -> InMemoryCluster:
    cluster = InMemoryCluster()
    cluster.apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}, field_manager="t"
    )
    for name, labels in (("chat", {SECRET_LABEL: "true"}), ("prod-kubeconfig", {})):
        cluster.apply(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": name, "namespace": NS, "labels": labels},
                "data": {"value": base64.b64encode(b"s3cret\n").decode()},
            },
            field_manager="t",
        )
    return cluster


def test_a_labelled_secret_is_read_and_any_other_refused() -> None:
    reader = SecretReader(fetch_secret=secrets_of(_cluster_with_secrets(), NS))

    assert reader.read_value(SecretRef(secret="chat", key="value")) == "s3cret"
    with pytest.raises(AccessError) as unlabelled:
        reader.read_value(SecretRef(secret="prod-kubeconfig", key="value"))
    assert str(unlabelled.value) == (
        f'Secret {NS}/prod-kubeconfig: lacks the label {SECRET_LABEL}: "true" that lets '
        "notifications read it"
    )
    with pytest.raises(AccessError, match="has no key 'other'"):
        reader.read_value(SecretRef(secret="chat", key="other"))
    with pytest.raises(AccessError, match="not found"):
        reader.read_value(SecretRef(secret="absent", key="value"))


def test_files_are_read_from_the_secrets_folder_only(tmp_path: Path) -> None:
    folder = tmp_path / "secrets"
    folder.mkdir()
    (folder / "token").write_text("abc\n")
    (tmp_path / "outside").write_text("no")

    reader = SecretReader(folder)

    assert reader.read_value(SecretRef(file="token")) == "abc"
    with pytest.raises(AccessError, match="no such file"):
        reader.read_value(SecretRef(file="../outside"))
    with pytest.raises(AccessError, match="no --notification-secrets-dir"):
        SecretReader().read_value(SecretRef(file="token"))


def test_each_notification_is_an_event_on_the_daemons_deployment() -> None:
    cluster = InMemoryCluster()
    settings = NotificationSettings(kubernetes_events=True)
    delivery = Delivery(
        lambda: settings,
        SecretReader(),
        events=NotificationEvents(cluster, NS),
        transport=loopback_transport(),
    )
    at = datetime(2026, 11, 27, tzinfo=UTC)

    delivery.notify(Notification(NotificationKind.COMMIT_REFUSED, "a" * 40, "commit refused", at))
    delivery.notify(Notification(NotificationKind.WAVE_STARTED, "a" * 40, "wave 1 started", at))
    delivery.drain()
    delivery.close()

    events = sorted(cluster.events.values(), key=lambda e: e["reason"])
    assert [(e["reason"], e["type"], e["message"]) for e in events] == [
        ("CommitRefused", "Warning", "commit refused"),
        ("RolloutWaveStarted", "Normal", "wave 1 started"),
    ]
    assert {e["metadata"]["namespace"] for e in events} == {NS}
    assert events[0]["involvedObject"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "reconciler",
        "namespace": NS,
    }
