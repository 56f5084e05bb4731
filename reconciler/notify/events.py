"""Each notification as a Kubernetes Event in the daemon's namespace, on its Deployment
(``kubectl get events -n NAMESPACE``, ``kubectl describe deployment reconciler``): reason the
event's name in CamelCase (``CommitRefused``, ``RolloutWaveStarted``), message its summary,
Warning for a refused commit and a halted rollout. The cluster's Event writer never raises
(:class:`~reconciler.cluster.api.EventSink`). Caller: :mod:`reconciler.notify.delivery`.
"""

from __future__ import annotations

from reconciler.cluster.api import EventSink, ObjectEvent
from reconciler.core.notifications import Notification, NotificationKind
from reconciler.core.objects import ObjectRef
from reconciler.notify.bodies import WARNINGS

#: The Deployment the Events are about (deploy/base/daemon.yaml).
DEPLOYMENT = "reconciler"
#: The Events' reporting component.
COMPONENT = "reconciler"


def event_reason(kind: NotificationKind) -> str:
    """``rollout.wave_started`` -> ``RolloutWaveStarted``."""
    words = kind.value.replace(".", "_").split("_")
    return "".join(word.capitalize() for word in words)


class NotificationEvents:
    """Records notifications as Events of ``namespace`` in ``cluster`` (the daemon's own)."""

    def __init__(self, cluster: EventSink, namespace: str) -> None:
        self.cluster = cluster
        self.namespace = namespace

    def record(self, notification: Notification) -> None:
        """The Event of ``notification``."""
        ref = ObjectRef("apps/v1", "Deployment", self.namespace, DEPLOYMENT)
        kind = "Warning" if notification.kind in WARNINGS else "Normal"
        event = ObjectEvent(ref, event_reason(notification.kind), notification.summary, kind)
        self.cluster.record_event(event, component=COMPONENT)
