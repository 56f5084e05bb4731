"""On a real API server (the daemon's own cluster, reached as ``reconciler daemon`` does: the
local kubeconfig when not in a pod): an endpoint's token comes from a labelled Secret and an
unlabelled one is refused; each notification is an Event on the daemon's Deployment, and the
same one again counts the Event up instead of making another."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from kubernetes.config import kube_config

from reconciler.cluster.kube import KubeCluster, connect_home
from reconciler.core.endpoints import Endpoint, EndpointType, NotificationSettings, SecretRef
from reconciler.core.notifications import Notification, NotificationKind
from reconciler.core.objects import ObjectRef
from reconciler.notify.delivery import Delivery
from reconciler.notify.events import NotificationEvents
from reconciler.notify.home import HomeCluster
from reconciler.notify.secrets import SECRET_LABEL, SecretReader, TokenHosts, secrets_of
from tests.support.kube_control_plane import ControlPlane
from tests.support.receiver import Receiver, loopback_transport


@pytest.fixture
def home(
    kube_control_plane: ControlPlane, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[KubeCluster, str]]:
    # the client reads $KUBECONFIG once, at import: set where it keeps it
    monkeypatch.setattr(
        kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(kube_control_plane.kubeconfig)
    )
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)  # not in a pod
    cluster = connect_home()
    namespace = f"notify-{uuid.uuid4().hex[:6]}"
    cluster.apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        field_manager="test",
    )
    yield cluster, namespace
    cluster.delete(ObjectRef("v1", "Namespace", "", namespace))


def _secret(cluster: KubeCluster, namespace: str, name: str, labels: dict[str, str]) -> None:
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "data": {"token": base64.b64encode(b"t0k3n-from-secret").decode()},
        },
        field_manager="test",
    )


def test_tokens_from_labelled_secrets_and_events_on_the_real_server(
    home: tuple[KubeCluster, str], receiver: Receiver
) -> None:
    cluster, namespace = home
    _secret(cluster, namespace, "hook-token", {SECRET_LABEL: "true"})
    _secret(cluster, namespace, "kubeconfig-like", {})
    reached = HomeCluster(connect_home)
    endpoints = (
        Endpoint(
            "good",
            EndpointType.WEBHOOK,
            receiver.url + "/good",
            token_from=SecretRef(secret="hook-token", key="token"),
        ),
        Endpoint(
            "unlabelled",
            EndpointType.WEBHOOK,
            receiver.url + "/bad",
            token_from=SecretRef(secret="kubeconfig-like", key="token"),
        ),
    )
    settings = NotificationSettings(endpoints, kubernetes_events=True)
    delivery = Delivery(
        lambda: settings,
        SecretReader(fetch_secret=secrets_of(reached, namespace)),
        events=NotificationEvents(reached, namespace),
        token_hosts=TokenHosts((receiver.host,)),
        transport=loopback_transport(),
    )
    refused = Notification(
        NotificationKind.COMMIT_REFUSED, "c" * 40, "commit cccccccccccc refused", datetime.now(UTC)
    )

    delivery.notify(refused)
    delivery.notify(refused)
    delivery.drain()
    delivery.close()

    assert [(r.path, r.headers["Authorization"]) for r in receiver.accepted] == [
        ("/good", "Bearer t0k3n-from-secret")
    ] * 2
    assert receiver.tries.count("/bad") == 0  # refused before any request
    events = cluster.list_objects("v1", "Event", namespace=namespace)
    assert [(e["reason"], e["type"], e["count"]) for e in events] == [
        ("CommitRefused", "Warning", 2)
    ]
    assert events[0]["involvedObject"]["kind"] == "Deployment"
    assert events[0]["involvedObject"]["name"] == "reconciler"
