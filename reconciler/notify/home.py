"""The daemon's own cluster, for its notifications: where the endpoints' Secrets are read and
each notification is recorded as an Event. Connected at first use, so that a daemon that reads
no Secret and records no Event never needs one (a laptop without a kubeconfig); a connection
that fails is tried again at the next use, and an Event that cannot be recorded is logged, never
raised (Events are a courtesy, the endpoints the contract).

Callers: the daemon's command (``reconciler.cli.notifying``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from reconciler.cluster.api import Cluster, EventSink, ObjectEvent
from reconciler.core.objects import Body, ObjectRef
from reconciler.errors import ReconcilerError

log = logging.getLogger("reconciler.notify")


class HomeCluster:
    """Reads objects and records Events in the cluster ``connect`` reaches, connected once."""

    def __init__(self, connect: Callable[[], Cluster]) -> None:
        self._connect = connect
        self._cluster: Cluster | None = None
        self._lock = threading.Lock()

    def cluster(self) -> Cluster:
        """The cluster, connected now if it was not (its errors raised)."""
        with self._lock:
            if self._cluster is None:
                self._cluster = self._connect()
            return self._cluster

    def get(self, ref: ObjectRef) -> Body | None:
        """See :meth:`reconciler.cluster.api.Cluster.get`."""
        return self.cluster().get(ref)

    def record_event(self, event: ObjectEvent, *, component: str) -> None:
        """See :meth:`reconciler.cluster.api.EventSink.record_event`: never raises."""
        try:
            cluster = self.cluster()
        except ReconcilerError as error:
            log.info("no Event for %s: %s", event.reason, error)
            return
        if isinstance(cluster, EventSink):
            cluster.record_event(event, component=component)
