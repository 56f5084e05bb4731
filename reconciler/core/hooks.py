"""Helm chart hooks as Helm defines them: phases, order and delete policies (pure).

A chart object annotated ``helm.sh/hook`` is a hook, not an object of the module: it is run in
its phases (``pre-install`` ... ``post-delete``), ordered by ``helm.sh/hook-weight`` (an
integer, 0 when unset), then by kind (Helm's install order, :data:`HELM_INSTALL_ORDER`) and
name, and deleted by its ``helm.sh/hook-delete-policy`` (``before-hook-creation`` when none is
given, as Helm 3 does). ``test`` hooks belong to ``helm test`` and are skipped; the rollback
phases never come (there is no rollback here); ``crd-install`` is Helm 2's and refused (C9).
Callers: the chart checks of ``validate`` (config.templates), ``render``, the plan's hook lines,
the inventory (the delete hooks it keeps), the lifecycle's hook runner (lifecycle.hooks). See
docs/charts.md, Hooks.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from reconciler.core.objects import ObjectRef
from reconciler.core.plan_values import DesiredModule, LiveModule, ModuleAction, ModulePlan, Plan

HOOK_ANNOTATION = "helm.sh/hook"
WEIGHT_ANNOTATION = "helm.sh/hook-weight"
DELETE_POLICY_ANNOTATION = "helm.sh/hook-delete-policy"
#: Put on a hook object we create: the operation (and phase) that ran it, so a pass that finds
#: it knows whether it is this run's (resumed, never created twice) or an earlier one's.
ANNOTATION_HOOK_RUN = "reconciler.dev/hook-run"

PRE_INSTALL, POST_INSTALL = "pre-install", "post-install"
PRE_UPGRADE, POST_UPGRADE = "pre-upgrade", "post-upgrade"
PRE_DELETE, POST_DELETE = "pre-delete", "post-delete"
#: The phases a sync runs, in the order Helm names them.
PHASES = (PRE_INSTALL, POST_INSTALL, PRE_UPGRADE, POST_UPGRADE, PRE_DELETE, POST_DELETE)
#: ``helm test``'s: never part of a sync, skipped and listed.
TEST_PHASES = frozenset({"test", "test-success", "test-failure"})
#: There is no rollback here: hooks of these phases never run (a hook of other phases too runs
#: in those).
ROLLBACK_PHASES = frozenset({"pre-rollback", "post-rollback"})
#: Helm 2's, gone from Helm 3 (CRDs go in ``crds/``): refused by C9.
HELM2_PHASES = frozenset({"crd-install"})

#: Helm's ``InstallOrder`` (pkg/release/util/kind_sorter.go), by which it sorts a phase's hooks
#: of one weight; kinds it does not name come after, by name.
HELM_INSTALL_ORDER = (
    "PriorityClass",
    "Namespace",
    "NetworkPolicy",
    "ResourceQuota",
    "LimitRange",
    "PodSecurityPolicy",
    "PodDisruptionBudget",
    "ServiceAccount",
    "Secret",
    "SecretList",
    "ConfigMap",
    "StorageClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleList",
    "ClusterRoleBinding",
    "ClusterRoleBindingList",
    "Role",
    "RoleList",
    "RoleBinding",
    "RoleBindingList",
    "Service",
    "DaemonSet",
    "Pod",
    "ReplicationController",
    "ReplicaSet",
    "Deployment",
    "HorizontalPodAutoscaler",
    "StatefulSet",
    "Job",
    "CronJob",
    "IngressClass",
    "Ingress",
    "APIService",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
)
_RANK = {kind: rank for rank, kind in enumerate(HELM_INSTALL_ORDER)}

BEFORE_HOOK_CREATION = "before-hook-creation"
HOOK_SUCCEEDED = "hook-succeeded"
HOOK_FAILED = "hook-failed"
DELETE_POLICIES = frozenset({BEFORE_HOOK_CREATION, HOOK_SUCCEEDED, HOOK_FAILED})


@dataclass(frozen=True, slots=True)
class Hook:
    """One hook object of a chart: its body, its phases, weight and delete policies."""

    body: Mapping[str, Any]
    phases: frozenset[str]
    weight: int
    policies: frozenset[str]

    @property
    def ref(self) -> ObjectRef:
        """The hook object's reference."""
        return ObjectRef.of(self.body)

    @property
    def subject(self) -> str:
        """``Kind/namespace/name``."""
        return self.ref.subject

    @property
    def waited_for(self) -> bool:
        """Whether the hook's result is waited for (a Job completes, a Pod succeeds); any
        other kind is done once created, as in Helm."""
        return str(self.body.get("kind")) in ("Job", "Pod")

    def sort_key(self) -> tuple[int, int, str, str]:
        """Weight, then kind (Helm's install order), then name, as Helm orders a phase's
        hooks."""
        kind, ref = str(self.body.get("kind")), self.ref
        rank = _RANK.get(kind, len(HELM_INSTALL_ORDER))
        return (self.weight, rank, kind, f"{ref.name}/{ref.namespace}")


def _annotations(body: Mapping[str, Any]) -> Mapping[str, Any]:
    return (body.get("metadata") or {}).get("annotations") or {}


def _listed(text: object) -> frozenset[str]:
    return frozenset(part.strip() for part in str(text or "").split(",") if part.strip())


def hook_of(body: Mapping[str, Any]) -> Hook:
    """``body`` read as a hook (a weight that is no integer counts as 0: see
    :func:`hook_problems`)."""
    annotations = _annotations(body)
    try:
        weight = int(str(annotations.get(WEIGHT_ANNOTATION, "0")).strip() or "0")
    except ValueError:
        weight = 0
    policies = _listed(annotations.get(DELETE_POLICY_ANNOTATION)) or frozenset(
        {BEFORE_HOOK_CREATION}
    )
    return Hook(body, _listed(annotations.get(HOOK_ANNOTATION)), weight, policies)


def hook_problems(body: Mapping[str, Any]) -> list[str]:
    """Why ``body``'s hook cannot be run as Helm would run it (C9): a Helm 2 or unknown phase,
    a weight that is no integer, an unknown delete policy."""
    hook = hook_of(body)
    annotations = _annotations(body)
    problems = []
    for phase in sorted(hook.phases & HELM2_PHASES):
        problems.append(f"'{phase}' is a Helm 2 hook (Helm 3 installs CRDs from crds/)")
    known = set(PHASES) | TEST_PHASES | ROLLBACK_PHASES | HELM2_PHASES
    for phase in sorted(hook.phases - known):
        problems.append(f"'{phase}' is no Helm hook")
    try:
        int(str(annotations.get(WEIGHT_ANNOTATION, "0")).strip() or "0")
    except ValueError:
        problems.append(f"{WEIGHT_ANNOTATION} '{annotations.get(WEIGHT_ANNOTATION)}' is no integer")
    for policy in sorted(_listed(annotations.get(DELETE_POLICY_ANNOTATION)) - DELETE_POLICIES):
        problems.append(f"{DELETE_POLICY_ANNOTATION} '{policy}' is unknown")
    return problems


def phase_hooks(bodies: Iterable[Mapping[str, Any]], phase: str) -> list[Hook]:
    """The hooks of ``phase`` among ``bodies``, in the order they run."""
    hooks = [hook_of(body) for body in bodies]
    return sorted((h for h in hooks if phase in h.phases), key=Hook.sort_key)


def runnable(bodies: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The hooks that run in some phase of a sync (test-only and rollback-only hooks aside)."""
    return [b for b in bodies if hook_of(b).phases & set(PHASES)]


def phases_text(bodies: Sequence[Mapping[str, Any]]) -> list[str]:
    """``pre-install: Job/x, ConfigMap/y`` per phase that has hooks, in phase order; then the
    hooks never run (``helm test``'s, rollback's)."""
    lines = []
    for phase in PHASES:
        hooks = phase_hooks(bodies, phase)
        if hooks:
            lines.append(f"{phase}: {', '.join(_short(h) for h in hooks)}")
    never = sorted(_short(hook_of(b)) for b in bodies if not hook_of(b).phases & set(PHASES))
    if never:
        lines.append(f"never run (test or rollback hooks): {', '.join(never)}")
    return lines


def delete_hooks_text(bodies: Iterable[Mapping[str, Any]]) -> str:
    """The ``pre-delete``/``post-delete`` hooks of ``bodies`` as the inventory keeps them
    (canonical JSON; empty when none): what the module's removal runs."""
    kept = [b for b in bodies if hook_of(b).phases & {PRE_DELETE, POST_DELETE}]
    return json.dumps(kept, sort_keys=True, separators=(",", ":")) if kept else ""


def delete_hooks_of(text: str) -> list[Mapping[str, Any]]:
    """The hooks :func:`delete_hooks_text` kept."""
    found = json.loads(text) if text else []
    return [b for b in found if isinstance(b, Mapping)]


#: The phases of each kind of run, in order.
RUN_PHASES = {
    "install": (PRE_INSTALL, POST_INSTALL),
    "upgrade": (PRE_UPGRADE, POST_UPGRADE),
    "delete": (PRE_DELETE, POST_DELETE),
}


def run_kind(entry: ModulePlan) -> str | None:
    """The hooks a plan entry runs: ``install`` or ``upgrade`` when it changes anything (a new
    version, new values, a changed render), as ``helm install``/``helm upgrade`` would;
    ``delete`` for a removal that deletes."""
    if entry.action is ModuleAction.REMOVE_DELETE:
        return "delete"
    if not entry.changes_anything:
        return None
    if entry.action is ModuleAction.INSTALL:
        return "install"
    if entry.action in (ModuleAction.UPGRADE, ModuleAction.RECONFIGURE):
        return "upgrade"
    return None


def plan_hooks(
    plan: Plan, desired: Sequence[DesiredModule], live: Mapping[str, LiveModule]
) -> Plan:
    """``plan`` with, on each entry, the hooks carrying it out runs, per phase (``diff``)."""
    hooks = {d.name: d.hooks for d in desired}
    entries = []
    for entry in plan.modules:
        bodies: Sequence[Mapping[str, Any]] = hooks.get(entry.module, ())
        inventory = live[entry.module].inventory if entry.module in live else None
        if run_kind(entry) == "delete" and inventory is not None:
            bodies = delete_hooks_of(inventory.delete_hooks)
        entries.append(entry_hooks(entry, bodies))
    return replace(plan, modules=tuple(entries))


def entry_hooks(entry: ModulePlan, bodies: Sequence[Mapping[str, Any]]) -> ModulePlan:
    """``entry`` with the hooks of ``bodies`` that carrying it out runs (``pre-upgrade: Job/x``
    per phase, in order; ``diff``, ``diff --base``)."""
    kind = run_kind(entry)
    lines = []
    for phase in RUN_PHASES[kind] if kind else ():
        ordered = phase_hooks(bodies, phase)
        if ordered:
            lines.append(f"{phase}: {', '.join(_short(h) for h in ordered)}")
    return replace(entry, hooks=tuple(lines)) if lines else entry


def _short(hook: Hook) -> str:
    return f"{hook.body.get('kind')}/{(hook.body.get('metadata') or {}).get('name')}"


def job_result(body: Mapping[str, Any]) -> tuple[bool | None, str]:
    """A live hook's result: ``(True, "")`` done, ``(False, why)`` failed, ``(None, "")`` still
    running. A Job by its ``Complete``/``Failed`` condition, a Pod by its phase; any other kind
    is done once it exists."""
    kind, status = body.get("kind"), body.get("status") or {}
    if kind == "Pod":
        phase = status.get("phase")
        if phase == "Succeeded":
            return True, ""
        if phase == "Failed":
            return False, f"Pod phase Failed: {status.get('message') or status.get('reason') or ''}"
        return None, ""
    if kind != "Job":
        return True, ""
    for condition in status.get("conditions") or ():
        if condition.get("status") != "True":
            continue
        if condition.get("type") == "Complete":
            return True, ""
        if condition.get("type") == "Failed":
            reason = condition.get("reason") or "Failed"
            return False, f"Failed=True ({reason}): {condition.get('message') or ''}".rstrip(": ")
    return None, ""
