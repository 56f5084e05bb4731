"""What a live object says about a module (pure): readiness, running version, whose it is.

- :func:`workload_available`: a Deployment, StatefulSet or DaemonSet has caught up with its
  spec and is available (L2, an operator's readiness).
- :func:`live_state`: one word for an object's live state, as ``reconciler tree`` shows it.
- :func:`stall`: why an object will not get ready by itself (kstatus's Failed), if it will not;
  :func:`condition_text`: a status condition as one line.
- :func:`running_version`: L5, the version label of the live operator workload;
  :func:`judged_version`: L15, the version L5 compares with (the one last Ready).
- :func:`labelled_ours`: S1, an object carries our labels (for a runtime and module, when
  named): the one spelling of that test.
- :func:`ours_or_generated`: an object a Namespace may hold and still be ours to delete.
- :func:`finalizers_holding` and :func:`held_text`: an object being deleted, and what holds it
  (L13: a removal waits until it is gone).

Callers: the lifecycle's reads and stages (``reconciler.lifecycle``), the planner (S1), the
daemon's watches (what wakes a runtime), ``reconciler tree``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reconciler.core.inventory import NEVER_READY, Inventory
from reconciler.core.model import (
    LABEL_APP_VERSION,
    LABEL_MANAGED_BY,
    LABEL_MODULE,
    LABEL_RUNTIME,
    MANAGED_BY_VALUE,
    Module,
)
from reconciler.core.objects import Body, ObjectRef, is_established
from reconciler.core.versions import parse_running_version

#: The workload kinds whose availability is read from their status.
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet")


def workload_available(body: Mapping[str, Any]) -> bool:
    """A Deployment/StatefulSet/DaemonSet has caught up with its spec and is available."""
    metadata, status = body.get("metadata") or {}, body.get("status") or {}
    if int(status.get("observedGeneration") or 0) < int(metadata.get("generation") or 1):
        return False
    if body.get("kind") == "DaemonSet":
        wanted = int(status.get("desiredNumberScheduled") or 0)
        return wanted > 0 and int(status.get("numberAvailable") or 0) >= wanted
    replicas = (body.get("spec") or {}).get("replicas")
    return int(status.get("availableReplicas") or 0) >= (1 if replicas is None else int(replicas))


def stall(body: Mapping[str, Any]) -> str | None:
    """Why ``body`` will not get ready by itself, as kstatus (fluxcd/cli-utils) judges it
    Failed: a workload whose ``Progressing`` condition is ``False`` with reason
    ``ProgressDeadlineExceeded``, a CRD whose ``NamesAccepted`` is ``False`` (its kind or
    plural taken in the group), any object with ``Stalled=True``; ``None`` otherwise, and for
    a status not of the object's current generation (the controller has not looked yet)."""
    metadata, status = body.get("metadata") or {}, body.get("status") or {}
    observed = status.get("observedGeneration")
    if observed is not None and int(observed) < int(metadata.get("generation") or 1):
        return None
    kind = body.get("kind")
    for condition in status.get("conditions") or ():
        kind_of, state = condition.get("type"), condition.get("status")
        reason = str(condition.get("reason") or "")
        stalled = (
            (kind == "CustomResourceDefinition" and kind_of == "NamesAccepted" and state == "False")
            or (
                kind_of == "Progressing"
                and state == "False"
                and reason == "ProgressDeadlineExceeded"
            )
            or (kind_of == "Stalled" and state == "True")
        )
        if stalled:
            return condition_text(condition)
    return None


def condition_text(condition: Mapping[str, Any]) -> str:
    """``Type=Status (Reason): message`` of a status condition, its message on one line."""
    kind_of, state = condition.get("type"), condition.get("status")
    reason = str(condition.get("reason") or "")
    message = " ".join(str(condition.get("message") or "").split())
    return f"{kind_of}={state} ({reason or 'no reason'}): {message or 'no message'}"


def live_state(body: Mapping[str, Any] | None) -> str:
    """One word for an object's live state, as ``reconciler tree`` shows it: ``Missing``,
    ``Terminating``, ``Established``/``NotEstablished`` (a CRD), ``Available``/``Progressing``
    (a workload), else ``Present``."""
    if body is None:
        return "Missing"
    if (body.get("metadata") or {}).get("deletionTimestamp"):
        return "Terminating"
    kind = body.get("kind")
    if kind == "CustomResourceDefinition":
        return "Established" if is_established(body) else "NotEstablished"
    if kind in WORKLOAD_KINDS:
        return "Available" if workload_available(body) else "Progressing"
    return "Present"


def running_version(module: Module, objects: Mapping[ObjectRef, Body]) -> tuple[str | None, str]:
    """L5: the version label of the live operator workload, as found (the planner parses it),
    and where it was read; ``None`` when there is no such object or label."""
    for ref, body in objects.items():
        if ref.kind == module.operator_kind and ref.name == module.operator_name:
            metadata = body.get("metadata")
            labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
            if not isinstance(labels, Mapping) or LABEL_APP_VERSION not in labels:
                return None, ""
            source = f"label {LABEL_APP_VERSION} of {ref.subject}"
            return str(labels[LABEL_APP_VERSION]), source
    return None, ""


def judged_version(
    inventory: Inventory | None, label: str | None, source: str
) -> tuple[str | None, str]:
    """L5 with L15: the running version a resolved version is compared with, and where it was
    read (``label``: the operator's version label, read at ``source``).

    Without an inventory, the label (a module installed by hand, L6). With one written before
    L15 (no Ready version recorded), the label, else the inventory's version, as always. A
    label that names neither the inventory's version nor the one last Ready was set by someone
    else: it says what runs. Otherwise the version the module last became Ready at, so that a
    failed upgrade (which relabelled the operator) can be rolled back; ``None`` when it never
    became Ready (a first install under way)."""
    if inventory is None:
        return label, source
    ready = inventory.ready_version
    if ready is None:
        if label is not None:
            return label, source
        return inventory.version, f"inventory {inventory.module}"
    if label is not None and not _names(label, (inventory.version, ready)):
        return label, source
    if ready == NEVER_READY:
        return None, ""
    if ready == inventory.version:
        return ready, f"inventory {inventory.module}"
    return ready, f"inventory {inventory.module} (the version it last became Ready at)"


def _names(label: str, versions: tuple[str, ...]) -> bool:
    """Whether a version label names one of ``versions`` (``v1.2.0`` names 1.2.0)."""
    parsed = parse_running_version(label)
    return parsed is not None and any(parsed == parse_running_version(v) for v in versions)


def labelled_ours(
    body: Mapping[str, Any] | None, runtime: str | None = None, module: str | None = None
) -> bool:
    """S1: whether ``body`` exists and carries our labels: ``managed-by`` ours and, when they
    are named, ``runtime``'s and ``module``'s (``None``: any runtime, any module; a copied
    label on another object does not count, nor an object another module took over). The
    one spelling of the test: the planner's deletes and releases, the lifecycle's reads, the
    daemon's watches."""
    labels = ((body or {}).get("metadata") or {}).get("labels") or {}
    return (
        labels.get(LABEL_MANAGED_BY) == MANAGED_BY_VALUE
        and (runtime is None or labels.get(LABEL_RUNTIME) == runtime)
        and (module is None or labels.get(LABEL_MODULE) == module)
    )


#: What Kubernetes creates in every Namespace (kube-controller-manager's service account and
#: root CA publisher; the service CA ConfigMap as OpenShift's, and MicroShift's, creates it).
GENERATED = frozenset(
    {
        ("ServiceAccount", "default"),
        ("ConfigMap", "kube-root-ca.crt"),
        ("ConfigMap", "openshift-service-ca.crt"),
    }
)


def ours_or_generated(body: Mapping[str, Any]) -> bool:
    """Objects a Namespace may hold and still be ours to delete: ours, owned by another object
    (garbage-collected with it), or made by Kubernetes in every Namespace."""
    metadata = body.get("metadata") or {}
    if labelled_ours(body) or metadata.get("ownerReferences"):
        return True
    return (str(body.get("kind")), str(metadata.get("name"))) in GENERATED


def finalizers_holding(body: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The finalizers of an object being deleted (``deletionTimestamp`` set: Terminating), which
    keep it until whoever put them there removes them; ``None`` when it is not being deleted
    (an empty tuple: it waits for its content or its controller, e.g. a Namespace)."""
    metadata = body.get("metadata") or {}
    if not metadata.get("deletionTimestamp"):
        return None
    return tuple(str(f) for f in metadata.get("finalizers") or ())


def held_text(ref: ObjectRef, finalizers: Sequence[str]) -> str:
    """``Gadget/ns/default is being deleted, waiting for finalizers gadgets.g/cleanup``."""
    if not finalizers:
        return f"{ref.subject} is being deleted"
    return f"{ref.subject} is being deleted, waiting for finalizers {', '.join(finalizers)}"
