"""Opt-in health of more than the operator (pure): the objects a module version names in
``healthChecks`` and what their live state says, as kstatus (fluxcd/cli-utils) judges it.

- :func:`judge`: one object's health: ``Current``, ``InProgress`` or ``Failed``, with why.
  Generic rules first (being deleted, ``observedGeneration`` behind ``metadata.generation``,
  ``Reconciling=True``, ``Stalled=True``), then by kind: a Job (``Complete``/``Failed``), a
  Deployment, StatefulSet or DaemonSet (available, or past its progress deadline), a CRD
  (Established, or its names refused), any other object by its ``Ready`` condition (none:
  Current once it exists, as kstatus says of objects without conditions).
- :func:`named_objects`: which objects of a desired module its version's checks name;
  :func:`named_refs`: all of them.
- :func:`overall`: the one judgement of a module's named objects (Failed wins, then
  InProgress).
- :func:`check_matches`: the objects a check names among (group, kind, namespace, name)
  identities; the validator (``config.module_checks``) refuses a check that names none.

The default configuration's status counts only when a check names it (seed decision 1, L2).
Callers: the lifecycle's readiness (``lifecycle.observe``, ``lifecycle.apply``), the
daemon's wake rules (``daemon.watches``), the validator.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from reconciler.core.live import condition_text, stall, workload_available
from reconciler.core.model import HealthCheck
from reconciler.core.objects import Body, ObjectRef, is_established
from reconciler.core.plan_values import DesiredModule

#: An object's identity as a check matches it: group, kind, namespace, name.
Identity = tuple[str, str, str, str]


class Health(StrEnum):
    """kstatus's words for an object's health (``Terminating`` and ``NotFound`` are
    ``InProgress`` here: both are waited for)."""

    CURRENT = "Current"
    IN_PROGRESS = "InProgress"
    FAILED = "Failed"


@dataclass(frozen=True, slots=True)
class Judgement:
    """An object's health and why (empty when Current)."""

    health: Health
    message: str = ""


CURRENT = Judgement(Health.CURRENT)


def judge(body: Mapping[str, Any] | None) -> Judgement:
    """The health of ``body`` (``None``: not found) as kstatus judges it (module docstring)."""
    if body is None:
        return Judgement(Health.IN_PROGRESS, "not found")
    metadata, status = body.get("metadata") or {}, body.get("status") or {}
    if metadata.get("deletionTimestamp"):
        return Judgement(Health.IN_PROGRESS, "being deleted")
    generation, observed = metadata.get("generation"), status.get("observedGeneration")
    if generation is not None and observed is not None and int(observed) != int(generation):
        return Judgement(
            Health.IN_PROGRESS, f"generation {generation}, observed generation {observed}"
        )
    conditions = {str(c.get("type")): c for c in status.get("conditions") or () if c}
    reconciling = conditions.get("Reconciling")
    if reconciling is not None and reconciling.get("status") == "True":
        return Judgement(Health.IN_PROGRESS, condition_text(reconciling))
    stalled = stall(body)
    if stalled is not None:
        return Judgement(Health.FAILED, stalled)
    return _by_kind(str(body.get("kind")), body, conditions)


def _by_kind(kind: str, body: Mapping[str, Any], conditions: Mapping[str, Any]) -> Judgement:
    if kind == "Job":
        return _job(body.get("status") or {}, conditions)
    if kind in ("Deployment", "StatefulSet", "DaemonSet"):
        if workload_available(body):
            return CURRENT
        return Judgement(Health.IN_PROGRESS, f"{kind} is not available yet")
    if kind == "CustomResourceDefinition":
        return CURRENT if is_established(body) else Judgement(Health.IN_PROGRESS, "not Established")
    ready = conditions.get("Ready")
    if ready is None or ready.get("status") == "True":
        return CURRENT
    return Judgement(Health.IN_PROGRESS, condition_text(ready))


def _job(status: Mapping[str, Any], conditions: Mapping[str, Any]) -> Judgement:
    """kstatus's Job: ``Failed=True`` Failed, ``Complete=True`` Current, else in progress."""
    failed = conditions.get("Failed")
    if failed is not None and failed.get("status") == "True":
        return Judgement(Health.FAILED, condition_text(failed))
    complete = conditions.get("Complete")
    if complete is not None and complete.get("status") == "True":
        return CURRENT
    counts = ", ".join(
        f"{word} {int(status.get(word) or 0)}" for word in ("active", "succeeded", "failed")
    )
    return Judgement(Health.IN_PROGRESS, f"Job in progress ({counts})")


def check_matches(check: HealthCheck, identities: Iterable[Identity]) -> list[Identity]:
    """The identities ``check`` names: its kind and name, and its group and namespace when it
    gives them."""
    return [
        (group, kind, namespace, name)
        for group, kind, namespace, name in identities
        if kind == check.kind
        and name == check.name
        and (check.group is None or group == check.group)
        and (check.namespace is None or namespace == check.namespace)
    ]


def named_objects(module: DesiredModule) -> dict[HealthCheck, list[ObjectRef]]:
    """The objects of ``module`` (its manifest and its default configuration) that each
    health check of its resolved version names (an empty list: none, e.g. a chart that no
    longer renders it)."""
    version = module.module.versions.get(module.resolved.version)
    checks = version.health_checks if version is not None else ()
    if not checks:
        return {}
    bodies = [o.body for o in module.objects]
    if module.default_configuration is not None:
        bodies.append(module.default_configuration.body)
    refs = {ref.key: ref for ref in map(ObjectRef.of, bodies)}
    return {check: [refs[key] for key in check_matches(check, refs)] for check in checks}


def named_refs(module: DesiredModule) -> list[ObjectRef]:
    """Every object :func:`named_objects` finds (what the daemon watches besides the
    manifest's kinds: a named default configuration)."""
    return [ref for refs in named_objects(module).values() for ref in refs]


def overall(judged: Sequence[tuple[str, Judgement]]) -> Judgement:
    """One judgement of named objects (``subject``, judgement): Failed when any failed (each
    named), else InProgress when any is (each named), else Current."""
    for health in (Health.FAILED, Health.IN_PROGRESS):
        found = [f"{subject}: {j.message}" for subject, j in judged if j.health is health]
        if found:
            return Judgement(health, "; ".join(found))
    return CURRENT


def health_of(body: Body | None) -> Health:
    """Only the word of :func:`judge` (what a wake compares)."""
    return judge(body).health
