"""Before a module version's first write: its kinds served, its changes dry-run (L14).

:class:`Preflight` asks the cluster what the pure rules of :mod:`reconciler.core.preflight`
need, in two steps:

1. :meth:`~Preflight.check`, before anything of the module version is written (not even the
   inventory's intent): every object's apiVersion and kind served by the cluster (discovery) or
   defined by a CRD of the module or of a module it depends on, else
   :class:`~reconciler.errors.UnservedKindError`; then a server-side dry-run (``dryRun=All``)
   of every change the plan writes that the server can judge now, so a refused change
   (invalid, immutable) fails the module with nothing written. As Flux's ``ApplyAllStaged``
   does, what the server cannot judge before stage 1 (objects of a kind whose CRD this pass
   applies, objects in a Namespace it creates) is dry-run after the CRDs and Namespaces, before
   the rest is written (:meth:`~Preflight.dry_run`). A pass that writes nothing dry-runs
   nothing.
2. :meth:`~Preflight.replaces`, right after planning (``diff`` too): an update of an object
   that opts in to being recreated (``reconciler.dev/recreate: on-immutable``) is dry-run, and
   when the server refuses it as immutable the plan shows it as a replace (``-/+``).

Callers: the lifecycle executor and its installer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from reconciler.core.objects import ObjectRef, crd_kind
from reconciler.core.plan_values import DesiredModule, ModulePlan, ObjectAction, ObjectChange, Plan
from reconciler.core.preflight import (
    RECREATE_ANNOTATION,
    RECREATE_ON_IMMUTABLE,
    defined_versions,
    recreated_on_immutable,
    replaced,
    unserved_message,
    unserved_objects,
    with_dependencies,
)
from reconciler.errors import ImmutableFieldError, InvalidObjectError, UnservedKindError
from reconciler.lifecycle.observe import Observer, namespace_ref

#: What a dry-run checks: what the plan creates or updates (a default configuration's update
#: is a patch of its enforced fields, not an apply).
_DRY_RUN = (ObjectAction.CREATE, ObjectAction.UPDATE)


class Preflight:
    """Checks one pass's module versions before they are written (see the module docstring)."""

    def __init__(self, observer: Observer, *, field_manager: str) -> None:
        self.observer = observer
        self.cluster = observer.cluster
        self.field_manager = field_manager

    def check(
        self,
        entry: ModulePlan,
        module: DesiredModule,
        bodies: Mapping[ObjectRef, Mapping[str, Any]],
        by_name: Mapping[str, DesiredModule],
    ) -> tuple[ObjectChange, ...]:
        """L14 before the first write of ``module``: raises when a kind is not served or the
        server refuses a change; returns the changes left to dry-run after stage 1."""
        if not entry.changes:
            return ()
        defined = defined_versions(with_dependencies(module, by_name))
        unserved = unserved_objects(
            bodies.values(), defined, lambda v, k: self.cluster.kind_info(v, k) is not None
        )
        if unserved:
            raise UnservedKindError(unserved_message(module, unserved, self._served_as(unserved)))
        now, later = self._judged_now(entry, bodies, _applied_crds(entry, bodies))
        self.dry_run(module, bodies, now)
        return later

    def dry_run(
        self,
        module: DesiredModule,
        bodies: Mapping[ObjectRef, Mapping[str, Any]],
        changes: Sequence[ObjectChange],
        *,
        first_written: bool = False,
    ) -> None:
        """A server-side dry-run of each change; a refusal raises, naming the object, what the
        server said and what was written (nothing, or only the module's CRDs and Namespaces
        when ``first_written``)."""
        version = f"{module.name} {module.resolved.version}"
        written = (
            f"nothing of {version} but its CRDs and Namespaces was written"
            if first_written
            else f"nothing of {version} was written"
        )
        for change in changes:
            try:
                self.cluster.apply(
                    bodies[change.ref], field_manager=self.field_manager, force=True, dry_run=True
                )
            except ImmutableFieldError as error:
                message = _immutable_message(version, change.ref, error, written)
                raise ImmutableFieldError(message) from error
            except InvalidObjectError as error:
                message = _refused_message(version, change.ref, error, written)
                raise InvalidObjectError(message) from error

    def replaces(self, the_plan: Plan, desired: Sequence[DesiredModule]) -> Plan:
        """``the_plan`` with the updates the server refuses as immutable marked as replaces,
        for the objects that opt in (each such update dry-run once; nothing else asked)."""
        bodies = {
            ObjectRef.of(o.body): o.body
            for d in desired
            for o in d.objects
            if recreated_on_immutable(o.body, d.module.recreate_on_immutable)
        }
        if not bodies:
            return the_plan
        entries = []
        for entry in the_plan.modules:
            refused = [
                c.ref
                for c in entry.changes
                if c.action is ObjectAction.UPDATE
                and c.ref in bodies
                and self._refused_as_immutable(bodies[c.ref])
            ]
            entries.append(replaced(entry, refused))
        return replace(the_plan, modules=tuple(entries))

    def _refused_as_immutable(self, body: Mapping[str, Any]) -> bool:
        try:
            self.cluster.apply(body, field_manager=self.field_manager, force=True, dry_run=True)
        except ImmutableFieldError:
            return True
        except InvalidObjectError:
            return False  # the preflight of the install reports it
        return False

    def _judged_now(
        self,
        entry: ModulePlan,
        bodies: Mapping[ObjectRef, Mapping[str, Any]],
        applied_crds: set[tuple[str, str]],
    ) -> tuple[list[ObjectChange], tuple[ObjectChange, ...]]:
        """The changes to dry-run: those the server can judge before anything is written, and
        those it can judge only after stage 1 (a kind of a CRD this pass applies, a kind not
        served yet, a missing Namespace). A kind of ``applied_crds`` is not looked up: on a
        real server a kind discovery lacks costs a refresh of discovery."""
        now: list[ObjectChange] = []
        later: list[ObjectChange] = []
        for change in entry.changes:
            if change.action not in _DRY_RUN or change.ref not in bodies:
                continue
            if change.default_configuration and change.action is ObjectAction.UPDATE:
                continue
            judged = (change.ref.group, change.ref.kind) not in applied_crds
            (now if judged and self._judged_before_writes(change.ref) else later).append(change)
        return now, tuple(later)

    def _judged_before_writes(self, ref: ObjectRef) -> bool:
        info = self.cluster.kind_info(ref.api_version, ref.kind)
        if info is None:
            return False
        if not info.namespaced or not ref.namespace:
            return True
        return self.observer.read(namespace_ref(ref.namespace)) is not None

    def _served_as(self, refs: Sequence[ObjectRef]) -> dict[ObjectRef, str]:
        """The apiVersion the cluster serves each kind in, when it serves it at all."""
        found = {}
        for ref in refs:
            info = self.cluster.kinds_in_group(ref.group, ref.kind)
            if info is not None:
                found[ref] = info.api_version
        return found


def _applied_crds(
    entry: ModulePlan, bodies: Mapping[ObjectRef, Mapping[str, Any]]
) -> set[tuple[str, str]]:
    """(group, kind) of the CRDs the plan creates or updates: served only after stage 1."""
    return {
        crd_kind(bodies[c.ref])
        for c in entry.changes
        if c.ref.kind == "CustomResourceDefinition" and c.ref in bodies and c.action in _DRY_RUN
    }


def _immutable_message(version: str, ref: ObjectRef, error: Exception, written: str) -> str:
    return (
        f"{version}: {ref.subject} ({ref.api_version}): the server refuses the change as "
        f"immutable ({error}); {written}: revert the change in git, or annotate the object "
        f"{RECREATE_ANNOTATION}: {RECREATE_ON_IMMUTABLE} to have it replaced"
    )


def _refused_message(version: str, ref: ObjectRef, error: Exception, written: str) -> str:
    return (
        f"{version}: {ref.subject} ({ref.api_version}) refused by the server's dry-run "
        f"({error}); {written}: fix the object in git"
    )
