"""Every reason code of a module's or a runtime's state (pure): :class:`Reason`.

A module of its own, so that the planner (and ``diff``) names its reasons without importing
the values of a lifecycle pass (:mod:`reconciler.core.status`, which also exports it).
"""

from __future__ import annotations

from enum import StrEnum


class Reason(StrEnum):
    """Every reason code of a module's or a runtime's state: part of the user's contract
    (``status -o json``, ``/status``, ``diff``, alerts, docs), so named here and nowhere else.
    Stored as their text at the store's edge; compared as members everywhere else."""

    # -- a module's plan (core.plan) -------------------------------------------------------------
    #: Not in the cluster yet: it is installed.
    INSTALL = "Install"
    #: Found in the cluster without our inventory: taken over (L6).
    ADOPTED = "Adopted"
    #: A newer version is resolved: it is upgraded.
    UPGRADE = "Upgrade"
    #: The module's strategy changed: its objects are relabelled.
    STRATEGY_CHANGED = "StrategyChanged"
    #: Objects in the cluster differ from git: they are applied again.
    DRIFT = "Drift"
    #: Back to the version last Ready from an upgrade that did not become Ready (L15).
    ROLLBACK = "Rollback"
    #: Nothing to change.
    UP_TO_DATE = "UpToDate"
    #: The running version cannot be read: nothing is changed.
    UNKNOWN_RUNNING_VERSION = "UnknownRunningVersion"
    #: The resolved version is lower than the running one: nothing is changed (no downgrades).
    DOWNGRADE_NOT_SUPPORTED = "DowngradeNotSupported"
    #: An upgrade that needs downtime waits for the maintenance window (L10).
    WAITING_FOR_MAINTENANCE_WINDOW = "WaitingForMaintenanceWindow"
    #: A removed module of strategy Ignore: its objects stay, without our labels.
    STRATEGY_IGNORE = "StrategyIgnore"
    #: A removal waits for the custom resources users left (L8).
    WAITING_FOR_RESOURCES = "WaitingForResources"
    #: A removed module is deleted.
    REMOVED = "Removed"
    #: Only enforced fields of the default configuration change (``diff --base``).
    CONFIG_CHANGED = "ConfigChanged"

    # -- a module's pass (lifecycle) -------------------------------------------------------------
    #: The module's workloads are ready.
    READY = "Ready"
    #: Applied; the operator's workloads are not ready yet.
    WAITING_FOR_OPERATOR = "WaitingForOperator"
    #: Waits for a module it depends on.
    WAITING_FOR_DEPENDENCY = "WaitingForDependency"
    #: Waits for its CRDs to be established.
    WAITING_FOR_CRD = "WaitingForCRD"
    #: Waits for a Helm hook (a Job) of its install, upgrade or removal to complete.
    WAITING_FOR_HOOK = "WaitingForHook"
    #: A Helm hook of its install, upgrade or removal failed (its Job's condition named).
    HOOK_FAILED = "HookFailed"
    #: A removal waits for the modules that depend on it.
    WAITING_FOR_DEPENDENTS = "WaitingForDependents"
    #: A transient error: the pass is retried.
    RETRYING = "Retrying"
    #: A permanent error.
    FAILED = "Failed"
    #: An object's apiVersion and kind are not served, nor defined by a CRD of the module or
    #: of one it depends on: nothing of the version was written (L14).
    KIND_NOT_SERVED = "KindNotServed"
    #: The server refuses a change of an immutable field (found by a dry-run before any
    #: write); the object does not opt in to being replaced.
    FIELD_IMMUTABLE = "FieldImmutable"
    #: What the module waits for will not get ready by itself (kstatus: Failed): its operator
    #: past its progress deadline, a CRD whose names are not accepted; the message names the
    #: condition, its reason and message. A later pass that finds it recovered clears it.
    STALLED = "Stalled"
    #: A CRD an upgrade dropped is kept while custom resources of it remain (L8): the module
    #: is Ready but warns, naming them.
    CRD_IN_USE = "CRDInUse"

    #: Operator available; an object the version names in ``healthChecks`` is not healthy
    #: yet (a Job running, a custom resource not Ready): the message names it and why.
    WAITING_FOR_HEALTH_CHECKS = "WaitingForHealthChecks"
    #: An object the version names in ``healthChecks`` failed (kstatus: Failed): a Job's
    #: ``Failed=True``, ``Stalled=True``; the message names the condition, its reason and
    #: message. A later pass that finds it healthy clears it.
    HEALTH_CHECK_FAILED = "HealthCheckFailed"

    # -- a runtime -------------------------------------------------------------------------------
    #: Its first operation is under way.
    PROVISIONING = "Provisioning"
    #: An operation is under way and no module reported yet.
    UPDATING = "Updating"
    #: Its deprovisioning is under way.
    DEPROVISIONING = "Deprovisioning"
    #: ``spec.suspend: true`` or ``reconciler suspend``: nothing is changed in its cluster.
    SUSPENDED = "Suspended"
    #: The API server cannot be reached, or failed (network, timeout, 5xx).
    CLUSTER_UNREACHABLE = "ClusterUnreachable"
    #: The API server asked to slow down (429) for longer than a step waits.
    THROTTLED = "Throttled"
    #: No way to the cluster: no kubeconfig, an unknown context, an unreadable snapshot.
    CLUSTER_ACCESS_FAILED = "ClusterAccessFailed"
    #: The credentials may not do what the step needs (401, 403).
    FORBIDDEN = "Forbidden"
    #: The API server refused an object as invalid (422).
    INVALID_OBJECT = "InvalidObject"
    #: A bug: an exception that is not one of the reconciler's errors.
    INTERNAL_ERROR = "InternalError"
    #: The operation ran past its time limit (O4).
    TIMED_OUT = "TimedOut"
    #: Any other permanent failure of a step (its message says which and why).
    STEP_FAILED = "StepFailed"
    #: Any other transient error a step retries on (a conflict, a kind not served yet).
    STEP_RETRYING = "StepRetrying"


def parse_reason(text: object, default: Reason) -> Reason:
    """The reason whose code is ``text``, as the state store keeps it; ``default`` for none, or
    for a code this version does not know (written by a newer one, read by an older one)."""
    try:
        return Reason(str(text))
    except ValueError:
        return default
