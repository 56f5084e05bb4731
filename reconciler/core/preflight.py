"""What can be known before a module version's first write (L14), and the opt-in recreate (pure).

L14: before anything of a module version is written, every object's kind must be served by the
cluster or defined by a CRD of the module or of a module it depends on (transitively), in the
object's version. :func:`defined_versions` collects what those CRDs serve,
:func:`unserved_objects` names the objects that fail, :func:`unserved_message` says so in one
line. The lifecycle (:mod:`reconciler.lifecycle.preflight`) asks the cluster's discovery and
then dry-runs what the plan writes.

The recreate rule: an object annotated ``reconciler.dev/recreate: on-immutable`` in its
manifest (or any object of a module with ``spec.recreateOnImmutable: true``), whose change the
server refuses as immutable, is deleted and created again instead (:data:`RECREATE_ANNOTATION`;
Flux's ``kustomize.toolkit.fluxcd.io/force: enabled`` and Argo CD's ``Replace=true,Force=true``
are the same opt-in). Never a CRD, a Namespace or a PersistentVolumeClaim
(:data:`NEVER_RECREATED`: their deletion takes data along), nor the default configuration:
validation refuses the annotation there. :func:`replaced` marks such a change of a plan as
:attr:`~reconciler.core.plan_values.ObjectAction.REPLACE`. Callers: the lifecycle, the config
validator, the deletion brake.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from reconciler.core.objects import ObjectRef, crd_kind
from reconciler.core.plan_values import DesiredModule, ModulePlan, ObjectAction

#: The annotation that opts an object in to being replaced when a change is refused as
#: immutable, and its one value.
RECREATE_ANNOTATION = "reconciler.dev/recreate"
RECREATE_ON_IMMUTABLE = "on-immutable"
#: Kinds never replaced: their deletion takes every custom resource, every object in the
#: Namespace, or the volume's data along.
NEVER_RECREATED = frozenset({"CustomResourceDefinition", "Namespace", "PersistentVolumeClaim"})
#: How many unserved objects a message names.
UNSERVED_SHOWN = 3

#: (group, kind) -> the versions a CRD of the module (or of a dependency) serves.
Defined = Mapping[tuple[str, str], frozenset[str]]


def asks_recreate(body: Mapping[str, Any]) -> bool:
    """Whether ``body`` carries ``reconciler.dev/recreate: on-immutable`` (whatever its kind)."""
    annotations = (body.get("metadata") or {}).get("annotations") or {}
    return annotations.get(RECREATE_ANNOTATION) == RECREATE_ON_IMMUTABLE


def recreated_on_immutable(body: Mapping[str, Any], module_wide: bool = False) -> bool:
    """Whether ``body`` is replaced when the server refuses its change as immutable: it asks
    for it, or its module does (``module_wide``: ``spec.recreateOnImmutable``), and it is no
    kind of :data:`NEVER_RECREATED`."""
    asked = module_wide or asks_recreate(body)
    return asked and str(body.get("kind") or "") not in NEVER_RECREATED


def with_dependencies(
    module: DesiredModule, by_name: Mapping[str, DesiredModule]
) -> list[DesiredModule]:
    """``module`` and every module it depends on, directly or not, that the runtime runs."""
    found: dict[str, DesiredModule] = {}
    pending = [module]
    while pending:
        current = pending.pop()
        if current.name in found:
            continue
        found[current.name] = current
        pending += [by_name[d] for d in current.module.depends_on if d in by_name]
    return list(found.values())


def defined_versions(modules: Iterable[DesiredModule]) -> dict[tuple[str, str], frozenset[str]]:
    """The kinds the CRDs of ``modules`` define, with the versions each serves."""
    defined: dict[tuple[str, str], frozenset[str]] = {}
    for module in modules:
        for rendered in module.objects:
            body = rendered.body
            if body.get("kind") != "CustomResourceDefinition":
                continue
            versions = (body.get("spec") or {}).get("versions") or []
            served = frozenset(str(v.get("name")) for v in versions if v.get("served", True))
            key = crd_kind(body)
            defined[key] = defined.get(key, frozenset()) | served
    return defined


def unserved_objects(
    bodies: Iterable[Mapping[str, Any]],
    defined: Defined,
    served: Callable[[str, str], bool],
) -> list[ObjectRef]:
    """The objects of ``bodies`` whose kind no CRD of ``defined`` serves in their version (a
    CRD shipped decides: it is what will be served) and the cluster does not serve
    (``served(api_version, kind)``, asked once per apiVersion and kind)."""
    answers: dict[tuple[str, str], bool] = {}
    unserved = []
    for body in bodies:
        ref = ObjectRef.of(body)
        version = ref.api_version.rpartition("/")[2]
        key = (ref.api_version, ref.kind)
        if (ref.group, ref.kind) in defined:
            ok = version in defined[(ref.group, ref.kind)]
        else:
            if key not in answers:
                answers[key] = served(ref.api_version, ref.kind)
            ok = answers[key]
        if not ok:
            unserved.append(ref)
    return unserved


def unserved_message(
    module: DesiredModule, unserved: Sequence[ObjectRef], alternatives: Mapping[ObjectRef, str]
) -> str:
    """One line: which objects' apiVersion and kind are not served, that nothing was written,
    and what to do (``alternatives``: the apiVersion the cluster serves the kind in, if any)."""
    shown = "; ".join(
        _unserved_one(ref, alternatives.get(ref)) for ref in unserved[:UNSERVED_SHOWN]
    )
    more = f" and {len(unserved) - UNSERVED_SHOWN} more" if len(unserved) > UNSERVED_SHOWN else ""
    return (
        f"{module.name} {module.resolved.version}: {shown}{more}: not served by the cluster, "
        f"and no CRD of {module.name} or of a module it depends on defines it; nothing of "
        f"{module.name} {module.resolved.version} was written (L14)"
    )


def _unserved_one(ref: ObjectRef, alternative: str | None) -> str:
    what = f"{ref.subject} is {ref.api_version} {ref.kind}"
    if alternative and alternative != ref.api_version:
        return f"{what} (ship it as {alternative}, which the cluster serves)"
    return f"{what} (ship its CRD in the module or in one it depends on)"


def replaced(entry: ModulePlan, refs: Iterable[ObjectRef]) -> ModulePlan:
    """``entry`` with the updates of ``refs`` marked as replacements (deleted, then created)."""
    chosen = set(refs)
    if not chosen:
        return entry
    changes = tuple(
        replace(c, action=ObjectAction.REPLACE)
        if c.ref in chosen and c.action is ObjectAction.UPDATE
        else c
        for c in entry.changes
    )
    return replace(entry, changes=changes)
