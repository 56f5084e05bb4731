"""The Kubernetes Events of a lifecycle pass, in one place (``spec.kubernetesEvents``).

:class:`EventRecorder` records, where the cluster can (an
:class:`~reconciler.cluster.api.EventSink`) and the settings ask for it: one Event per module
and pass that changed anything, on the module's inventory ConfigMap (as Flux records one per
Kustomization and reconciliation), and a Warning on each object that holds a removal back
(``kubectl describe`` shows it). The texts are pure: :mod:`reconciler.core.events`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

from reconciler.cluster.api import Cluster, EventSink, ObjectEvent
from reconciler.core.enforce import Enforcement
from reconciler.core.events import (
    DELETION_BLOCKED,
    counts_for_event,
    deletion_blocked_text,
    module_event_text,
)
from reconciler.core.inventory import inventory_ref
from reconciler.core.objects import ObjectRef
from reconciler.core.status import ChangeSetEntry


class EventRecorder:
    """Records a pass's Events on a cluster (or nothing, when off or unable)."""

    def __init__(
        self, cluster: Cluster, *, enabled: bool, field_manager: str, system_namespace: str
    ) -> None:
        self.cluster = cluster
        self.enabled = enabled and isinstance(cluster, EventSink)
        self.field_manager = field_manager
        self.system_namespace = system_namespace

    def module_pass(
        self, module: str, version: str | None, changes: Sequence[ChangeSetEntry]
    ) -> None:
        """The Event of ``module``'s pass, on its inventory (``kubectl describe configmap -n
        SYSTEM inventory-MODULE``, or ``kubectl get events -n SYSTEM`` for every module), if
        the pass changed anything."""
        changed = [c for c in changes if counts_for_event(c)]
        if self.enabled and changed:
            ref = inventory_ref(self.system_namespace, module)
            reason, message = module_event_text(module, version, changed)
            self._record(ObjectEvent(ref, reason, message))

    def deletion_blocked(
        self,
        module: str,
        blocking: Sequence[ObjectRef],
        held: Mapping[ObjectRef, tuple[str, ...]],
    ) -> None:
        """A Warning on each object that holds ``module``'s removal back (``held``: those
        being deleted, with the finalizers that hold them)."""
        for ref in blocking:
            text = deletion_blocked_text(module, ref, held.get(ref))
            self._record(ObjectEvent(ref, DELETION_BLOCKED, text, "Warning"))

    def enforcement(self, done: Enforcement) -> None:
        """On the configuration CR: a Warning that enforced fields someone changed in the
        cluster were taken back; Normal when git changed them, or fields were released."""
        kind = "Warning" if done.in_cluster else "Normal"
        reason = "ConfigEnforced" if done.reverted else "ConfigReleased"
        self._record(ObjectEvent(done.ref, reason, done.message, kind))

    def _record(self, event: ObjectEvent) -> None:
        if self.enabled:
            cast(EventSink, self.cluster).record_event(event, component=self.field_manager)
