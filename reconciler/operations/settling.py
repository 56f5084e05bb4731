"""What an operation waits for that the API server finishes by itself within seconds, and how
long ``reconciler sync`` keeps running it for that without ``--wait`` (pure).

A lifecycle pass never waits for the cluster (seed 004, idea 5): a CRD not Established yet, an
operator not available, an object a removal deleted and the server still shows end the pass's
step as "not yet", and the operation is run again later (the daemon: woken by the event that
satisfies it, or a bounded retry). ``sync`` has no watches: it runs a waiting operation again
itself, and without ``--wait`` only for what the server finishes by itself, as long as a pass
once waited for it: a CRD it applied to be Established (:data:`CRD_WAIT_SECONDS`, so that one
sync still applies a module's custom resources after their CRDs; also a server's 429, as the
storage of a kind just established initializes, at the time it asks), CRDs and Namespaces a
removal deleted to be gone (:data:`TERMINATION_WAIT_SECONDS`). An operator's readiness is not among
them (its Pods take their time: ``--wait`` waits for it). Callers: ``reconciler sync``, the
deprovision's ``Delete_Module_Manifests`` step.
"""

from __future__ import annotations

from reconciler.core.status import ChangeAction, ModuleState, Reason
from reconciler.lifecycle.remove import EMPTIED_FIRST
from reconciler.operations.model import OperationData

#: How long ``sync`` runs an operation again while a CRD it applied is not Established yet.
CRD_WAIT_SECONDS = 30.0
#: How long ``sync`` (and a deprovision) asks again for CRDs and Namespaces a removal deleted
#: that the server still shows (a CRD whose instances go first, a Namespace being emptied).
TERMINATION_WAIT_SECONDS = 10.0


def settle_seconds(data: OperationData) -> float:
    """How long, from its first run, ``sync`` without ``--wait`` keeps running an operation
    whose last run left ``data``: 0 when it waits for nothing the server finishes by itself."""
    if any(m.reason == Reason.WAITING_FOR_CRD for m in data.applied.modules):
        return CRD_WAIT_SECONDS
    if data.failure is not None and data.failure.reason is Reason.THROTTLED:
        return CRD_WAIT_SECONDS  # a 429: a new kind's storage initializing right after its CRD
    if terminating(data):
        return TERMINATION_WAIT_SECONDS
    return 0.0


def terminating(data: OperationData) -> list[str]:
    """The removals still Deleting after their pass deleted CRDs or Namespaces of theirs."""
    emptied = {
        e.module
        for e in data.removals.changes
        if e.action is ChangeAction.DELETED and e.ref.kind in EMPTIED_FIRST
    }
    return [
        m.module
        for m in data.removals.modules
        if m.state is ModuleState.DELETING and m.module in emptied
    ]
