"""The values of a plan (pure): what the planner decides and what it decides from.

:class:`Plan` holds one :class:`ModulePlan` per module: a :class:`ModuleAction` of a closed
vocabulary with a reason code, and the :class:`ObjectChange` list it implies. The planner
(:mod:`reconciler.core.plan`) reads a :class:`DesiredModule` (what git wants), a
:class:`LiveModule` (what the cluster shows, with its inventory and the :class:`Occupants` of
its namespaces) and a :class:`Context` (the runtime, the time, its maintenance window). All are
frozen: printable, serialisable, comparable. :func:`desired_modules` and
:func:`prepared_module` are the one way a :class:`DesiredModule` is built from a renderer (for a
sync, the fleet diff, the daemon's watches, ``diff --live``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from reconciler.core.fielddiff import FieldChange
from reconciler.core.inventory import Inventory
from reconciler.core.model import ConfigRepo, MaintenanceWindow, Module, Strategy
from reconciler.core.objects import Body, ObjectRef, crd_kind
from reconciler.core.reasons import Reason
from reconciler.core.render import RenderedObject, Renderer
from reconciler.core.resolve import Resolution, ResolvedModule

#: How many blocking objects a message names.
BLOCKING_SHOWN = 5


class ModuleAction(StrEnum):
    """What happens to a module."""

    INSTALL = "install"
    UPGRADE = "upgrade"
    RECONFIGURE = "reconfigure"
    UNCHANGED = "unchanged"
    REMOVE_IGNORE = "remove-ignore"
    REMOVE_DELETE = "remove-delete"
    BLOCKED_DOWNGRADE = "blocked-downgrade"
    BLOCKED_UNKNOWN_VERSION = "blocked-unknown-version"
    BLOCKED_DELETION = "blocked-deletion"
    DEFERRED_WINDOW = "deferred-window"


class ObjectAction(StrEnum):
    """What happens to an object."""

    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"
    #: An update the server refuses as immutable, of an object that opts in to being deleted
    #: and created again (``reconciler.dev/recreate: on-immutable``).
    REPLACE = "replace"
    #: Not deleted though dropped: it carries a keep mark (:data:`~reconciler.core.model.
    #: KEEP_MARKS`), so it is released (our marks removed, the fields) and left in place.
    KEEP = "keep"


@dataclass(frozen=True, slots=True)
class ObjectChange:
    """One object's change, with the fields that change (masked for Secrets)."""

    action: ObjectAction
    ref: ObjectRef
    fields: tuple[FieldChange, ...] = ()
    default_configuration: bool = False
    #: The fields of ``kubectl apply`` (client-side) are taken over before the apply
    #: (:mod:`reconciler.core.takeover`).
    takeover: bool = False

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "action": str(self.action),
            "subject": self.ref.subject,
            "apiVersion": self.ref.api_version,
            "defaultConfiguration": self.default_configuration,
            "fields": [f.to_json() for f in self.fields],
        }


@dataclass(frozen=True, slots=True)
class PlannedModule:
    """What a plan decided for a module, without the object changes: what an operation records
    of its plan."""

    module: str
    action: ModuleAction
    reason: Reason
    from_version: str | None = None
    to_version: str | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON form: the keys of :meth:`ModulePlan.to_json` (the only spelling of a plan)."""
        return {
            "module": self.module,
            "action": str(self.action),
            "reason": str(self.reason),
            "fromVersion": self.from_version,
            "toVersion": self.to_version,
        }


@dataclass(frozen=True, slots=True)
class ModulePlan:
    """One module's action, why, and its object changes."""

    module: str
    action: ModuleAction
    reason: Reason
    message: str
    from_version: str | None = None
    to_version: str | None = None
    strategy: Strategy = Strategy.CREATE_AND_DELETE
    changes: tuple[ObjectChange, ...] = ()
    blocking: tuple[ObjectRef, ...] = ()
    blocking_total: int = 0
    #: Those of ``blocking`` being deleted (or deleted by this removal) that finalizers hold,
    #: with their finalizers (L13).
    held: tuple[tuple[ObjectRef, tuple[str, ...]], ...] = ()
    #: Objects the old version had that stay for now (a CRD with custom resources left); they
    #: stay in the inventory and are pruned by a later sync.
    kept: tuple[ObjectRef, ...] = ()
    #: Why objects were kept or released instead of deleted (user data, L8), for people.
    notes: tuple[str, ...] = ()
    #: The Helm hooks carrying it out runs, per phase in order (``pre-upgrade: Job/x``;
    #: core.hooks): shown by ``diff``, never objects of the change set.
    hooks: tuple[str, ...] = ()

    @property
    def changes_anything(self) -> bool:
        """Whether carrying it out writes to the cluster."""
        return bool(self.changes) or self.action in (
            ModuleAction.REMOVE_IGNORE,
            ModuleAction.REMOVE_DELETE,
        )

    def summary(self) -> PlannedModule:
        """The entry without its object changes, as an operation records it."""
        return PlannedModule(
            self.module, self.action, self.reason, self.from_version, self.to_version
        )

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        return {
            **self.summary().to_json(),
            "message": self.message,
            "strategy": str(self.strategy),
            "changes": [c.to_json() for c in self.changes],
            "blocking": [r.subject for r in self.blocking],
            "blockingTotal": self.blocking_total,
            "kept": [r.subject for r in self.kept],
            "notes": list(self.notes),
            **({"hooks": list(self.hooks)} if self.hooks else {}),
        }


@dataclass(frozen=True, slots=True)
class Plan:
    """A runtime's plan: one entry per module, installs in dependency order, removals after."""

    runtime: str
    modules: tuple[ModulePlan, ...]
    suspended: bool = False
    #: The runtime left git: every module is removed and the runtime forgotten.
    deprovision: bool = False

    @property
    def has_changes(self) -> bool:
        """Whether carrying the plan out would change the cluster (a deprovision always does)."""
        return self.deprovision or any(m.changes_anything for m in self.modules)

    def module(self, name: str) -> ModulePlan | None:
        """The entry of module ``name``, if any."""
        return next((m for m in self.modules if m.module == name), None)

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "runtime": self.runtime,
            "suspended": self.suspended,
            "deprovision": self.deprovision,
            "hasChanges": self.has_changes,
            "modules": [m.to_json() for m in self.modules],
        }


@dataclass(frozen=True, slots=True)
class DesiredModule:
    """A module the runtime should run: its resolution, its definition and its objects."""

    resolved: ResolvedModule
    module: Module
    objects: tuple[RenderedObject, ...]
    default_configuration: RenderedObject | None = None
    #: The chart's Helm hooks to run (core.hooks), kept apart from its objects: never applied
    #: as objects, never in the inventory.
    hooks: tuple[Mapping[str, Any], ...] = ()

    @classmethod
    def of(
        cls,
        resolved: ResolvedModule,
        module: Module,
        rendered: Sequence[RenderedObject],
        hooks: Sequence[Mapping[str, Any]] = (),
    ) -> DesiredModule:
        """Split a module's rendered objects into its manifest and its default configuration."""
        default = next((o for o in rendered if o.default_configuration), None)
        objects = tuple(o for o in rendered if not o.default_configuration)
        return cls(resolved, module, objects, default, tuple(hooks))

    @property
    def name(self) -> str:
        """The module's name."""
        return self.resolved.name

    @property
    def strategy(self) -> Strategy:
        """The strategy git asks for."""
        return self.resolved.strategy

    def managed_kinds(self) -> tuple[tuple[str, str], ...]:
        """(group, kind) whose instances block deletion: the manifest's CRDs plus
        ``managedResources``."""
        crds = [o.body for o in self.objects if o.body.get("kind") == "CustomResourceDefinition"]
        kinds = {crd_kind(body) for body in crds}
        kinds |= {(m.group, m.kind) for m in self.module.managed_resources}
        return tuple(sorted(kinds))


def desired_modules(
    repo: ConfigRepo, resolution: Resolution, renderer: Renderer, modules: Collection[str] = ()
) -> list[DesiredModule]:
    """The runtime's modules (``modules`` narrows) as a sync applies them, in dependency
    order: rendered for the runtime (its label, the configuration its channel and entry
    enforce) by ``renderer`` (of ``repo``), with the hooks of their charts."""
    rendered = renderer.render(resolution, modules)
    runtime = resolution.runtime.name
    return [
        DesiredModule.of(
            resolved,
            repo.modules[resolved.name],
            [o for o in rendered if o.module == resolved.name],
            renderer.hooks(resolved, runtime),
        )
        for resolved in resolution.modules
        if not modules or resolved.name in modules
    ]


def prepared_module(
    renderer: Renderer, resolved: ResolvedModule, runtime: str, *, hooks: bool = True
) -> DesiredModule:
    """``resolved`` as its version ships it for ``runtime`` (before the runtime's label and
    the configuration it enforces: what the fleet diff compares), with its chart's hooks
    unless ``hooks`` is false."""
    prepared = renderer.prepare(resolved, runtime)
    found = renderer.hooks(resolved, runtime) if hooks else ()
    return DesiredModule.of(resolved, renderer.repo.modules[resolved.name], prepared, found)


@dataclass(frozen=True, slots=True)
class Occupants:
    """Objects found where a deletion would take them along: a count and the first few."""

    total: int
    first: tuple[ObjectRef, ...] = ()

    def describe(self) -> str:
        """``3 object(s), e.g. ConfigMap/ns/a, ...``."""
        shown = ", ".join(r.subject for r in self.first[:BLOCKING_SHOWN])
        return f"{self.total} object(s), e.g. {shown}"


@dataclass(frozen=True, slots=True)
class LiveModule:
    """What the cluster shows for one module: inventory, objects, running version, blockers."""

    inventory: Inventory | None = None
    objects: Mapping[ObjectRef, Body] = field(default_factory=dict)
    running_version: str | None = None
    blocking: tuple[ObjectRef, ...] = ()
    blocking_total: int = 0
    #: Those of ``blocking`` that are being deleted (Terminating), with the finalizers that
    #: hold them (L13: a removal waits until they are gone).
    held: Mapping[ObjectRef, tuple[str, ...]] = field(default_factory=dict)
    inventory_stored: bool = True
    #: Objects that are not ours inside each Namespace the module would delete (L8: a
    #: Namespace is deleted only when it holds nothing but our objects).
    namespace_users: Mapping[str, Occupants] = field(default_factory=dict)
    #: Custom resources left of each CRD an upgrade drops (it waits until none is left).
    crd_instances: Mapping[ObjectRef, Occupants] = field(default_factory=dict)
    #: Where ``running_version`` was read, for messages (e.g. the label of the operator).
    version_source: str = "the inventory"


@dataclass(frozen=True, slots=True)
class Context:
    """Facts the planner needs besides the modules: the runtime and the time."""

    runtime: str
    now: datetime
    window: MaintenanceWindow | None = None
    suspended: bool = False
    dependencies: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, repo: ConfigRepo, runtime: str, now: datetime, *, leaving: bool = False) -> Context:
        """The context of ``runtime`` in ``repo`` at ``now``: its maintenance window and
        suspension (none for a runtime that left git, or is ``leaving`` it: a deprovision) and
        every module's dependencies. The one way every caller builds it."""
        found = None if leaving else repo.runtimes.get(runtime)
        dependencies = {name: m.depends_on for name, m in repo.modules.items()}
        if found is None:
            return cls(runtime, now, dependencies=dependencies)
        return cls(runtime, now, found.maintenance_window, found.suspend, dependencies)
