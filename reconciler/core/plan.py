"""The planner: desired modules + what the cluster shows -> a Plan (pure).

``plan()`` decides, per module, one action of a closed vocabulary (install, upgrade, reconfigure,
unchanged, remove-ignore, remove-delete, blocked-downgrade, blocked-unknown-version,
blocked-deletion, deferred-window) with a reason code, and the object changes it implies (create,
update with field-level diffs, delete). It applies the lifecycle rules that are decisions rather
than I/O: no downgrade against the running version (L5; a running version that cannot be read
changes nothing either: reason ``UnknownRunningVersion``), adoption (L6), default configuration
created once (L3), prune from the inventory only (L4, S1), strategy from the inventory at
removal (L9), blocking deletion (L8), maintenance windows (L10, judged by
:mod:`reconciler.core.windows`). Plans are frozen data:
printable, serialisable, comparable. Callers: the lifecycle executor, ``reconciler diff``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from reconciler.core.enforce import drifted
from reconciler.core.fielddiff import (
    FieldChange,
    field_diff,
    removed_fields,
    removed_owned_fields,
)
from reconciler.core.inventory import Inventory
from reconciler.core.model import (
    ANNOTATION_MODULE_VERSION,
    FIELD_MANAGER,
    LABEL_MANAGED_BY,
    LABEL_MODULE,
    LABEL_RUNTIME,
    MANAGED_BY_VALUE,
    ConfigRepo,
    MaintenanceWindow,
    Module,
    Strategy,
)
from reconciler.core.objects import Body, ObjectRef, crd_kind
from reconciler.core.render import RenderedObject, deletion_order, removal_order
from reconciler.core.resolve import ResolvedModule
from reconciler.core.serverform import server_form
from reconciler.core.status import Reason
from reconciler.core.versions import parse_running_version, version_key
from reconciler.core.windows import in_window, next_window_text

#: Labels and annotation dropped when a module is released with strategy Ignore (L7).
OUR_MARKS: tuple[tuple[str, ...], ...] = (
    ("metadata", "labels", LABEL_MANAGED_BY),
    ("metadata", "labels", LABEL_RUNTIME),
    ("metadata", "labels", LABEL_MODULE),
    ("metadata", "annotations", ANNOTATION_MODULE_VERSION),
)
#: How many blocking objects a message names.
BLOCKING_SHOWN = 5
#: How many characters of an unreadable running version a message shows.
VERSION_SHOWN = 32


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


@dataclass(frozen=True, slots=True)
class ObjectChange:
    """One object's change, with the fields that change (masked for Secrets)."""

    action: ObjectAction
    ref: ObjectRef
    fields: tuple[FieldChange, ...] = ()
    default_configuration: bool = False

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
    reason: str
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
    reason: str
    message: str
    from_version: str | None = None
    to_version: str | None = None
    strategy: Strategy = Strategy.CREATE_AND_DELETE
    changes: tuple[ObjectChange, ...] = ()
    blocking: tuple[ObjectRef, ...] = ()
    blocking_total: int = 0
    #: Objects the old version had that stay for now (a CRD with custom resources left); they
    #: stay in the inventory and are pruned by a later sync.
    kept: tuple[ObjectRef, ...] = ()
    #: Why objects were kept or released instead of deleted (user data, L8), for people.
    notes: tuple[str, ...] = ()

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

    @classmethod
    def of(
        cls, resolved: ResolvedModule, module: Module, rendered: Sequence[RenderedObject]
    ) -> DesiredModule:
        """Split a module's rendered objects into its manifest and its default configuration."""
        default = next((o for o in rendered if o.default_configuration), None)
        objects = tuple(o for o in rendered if not o.default_configuration)
        return cls(resolved, module, objects, default)

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


def plan(
    context: Context, desired: Sequence[DesiredModule], live: Mapping[str, LiveModule]
) -> Plan:
    """The plan for one runtime; see the module docstring."""
    if context.suspended:
        return Plan(context.runtime, (), suspended=True)
    wanted = {d.name for d in desired}
    entries = [plan_module(context, d, live.get(d.name, LiveModule())) for d in desired]
    removed = [n for n in live if n not in wanted and live[n].inventory]
    entries += [plan_removal(live[n]) for n in removal_order(removed, context.dependencies)]
    return Plan(context.runtime, tuple(entries))


def plan_module(context: Context, desired: DesiredModule, live: LiveModule) -> ModulePlan:
    """One desired module's entry of the plan."""
    version = desired.resolved.version
    running = live.running_version
    base = ModulePlan(
        desired.name, ModuleAction.UNCHANGED, "", "", running, version, desired.strategy
    )
    running_key = parse_running_version(running) if running is not None else None
    if running is not None and running_key is None:
        return replace(
            base,
            action=ModuleAction.BLOCKED_UNKNOWN_VERSION,
            reason=Reason.UNKNOWN_RUNNING_VERSION,
            message=_unknown_version_message(desired, live.version_source, running),
        )
    if running_key is not None and version_key(version) < running_key:
        message = (
            f"{desired.name} {running} runs; the resolved version {version} is lower and "
            "is not installed (no downgrades)"
        )
        return replace(
            base,
            action=ModuleAction.BLOCKED_DOWNGRADE,
            reason=Reason.DOWNGRADE_NOT_SUPPORTED,
            message=message,
        )
    upgrade = running_key is not None and version_key(version) > running_key
    content = desired.module.versions[version]
    if upgrade and content.requires_downtime and not in_window(context.window, context.now):
        message = (
            f"upgrade {running} -> {version} requires downtime; it waits for the "
            f"maintenance window{_next_window_text(context)}"
        )
        return replace(
            base,
            action=ModuleAction.DEFERRED_WINDOW,
            reason=Reason.WAITING_FOR_MAINTENANCE_WINDOW,
            message=message,
        )
    changes = _object_changes(desired, live)
    action, reason, message = _classify(desired, live, running, upgrade, changes)
    kept, notes = _kept_crds(desired, live)
    notes += _released_namespaces([c.ref for c in changes], live)
    return replace(
        base,
        action=action,
        reason=reason,
        message=message,
        changes=changes,
        kept=kept,
        notes=notes,
    )


def _unknown_version_message(desired: DesiredModule, source: str, running: str) -> str:
    shown = running if len(running) <= VERSION_SHOWN else running[:VERSION_SHOWN] + "..."
    return (
        f"{desired.name}: the running version in {source} is {shown!r}, not a semantic "
        f"version; nothing is changed (neither upgrade nor downgrade to {desired.resolved.version}"
        " is known to be safe) until it is fixed or removed"
    )


def _classify(
    desired: DesiredModule,
    live: LiveModule,
    running: str | None,
    upgrade: bool,
    changes: tuple[ObjectChange, ...],
) -> tuple[ModuleAction, str, str]:
    version = desired.resolved.version
    if running is None:
        return ModuleAction.INSTALL, Reason.INSTALL, f"install {desired.name} {version}"
    if live.inventory is None:
        verb = ModuleAction.UPGRADE if upgrade else ModuleAction.INSTALL
        return verb, Reason.ADOPTED, f"take over {desired.name} {running} found in the cluster"
    if upgrade:
        return (
            ModuleAction.UPGRADE,
            Reason.UPGRADE,
            f"upgrade {desired.name} {running} -> {version}",
        )
    if live.inventory.strategy != desired.strategy:
        text = f"strategy {live.inventory.strategy} -> {desired.strategy}"
        return ModuleAction.RECONFIGURE, Reason.STRATEGY_CHANGED, text
    if changes:
        return ModuleAction.RECONFIGURE, Reason.DRIFT, f"{len(changes)} object(s) differ from git"
    return ModuleAction.UNCHANGED, Reason.UP_TO_DATE, f"{desired.name} {version} is up to date"


def _object_changes(desired: DesiredModule, live: LiveModule) -> tuple[ObjectChange, ...]:
    changes: list[ObjectChange] = []
    wanted: set[ObjectRef] = set()
    for rendered in desired.objects:
        ref = ObjectRef.of(rendered.body)
        wanted.add(ref)
        current = live.objects.get(ref)
        if current is None:
            changes.append(ObjectChange(ObjectAction.CREATE, ref, field_diff(rendered.body, None)))
            continue
        answered = server_form(rendered.body)  # what the server rewrites is no drift
        fields = field_diff(answered, current) + removed_owned_fields(
            answered, current, FIELD_MANAGER
        )
        if fields:
            changes.append(ObjectChange(ObjectAction.UPDATE, ref, fields))
    default = _default_configuration_change(desired, live)
    if default is not None:
        changes.append(default)
    changes.extend(_prune(live, wanted))
    return tuple(changes)


def _default_configuration_change(desired: DesiredModule, live: LiveModule) -> ObjectChange | None:
    """L3: created once, only with CreateAndDelete, never re-created or reverted."""
    rendered = desired.default_configuration
    if rendered is None or desired.strategy is not Strategy.CREATE_AND_DELETE:
        return None
    if live.inventory is not None and live.inventory.default_configuration_done:
        return _enforcement_change(rendered, live.inventory, live)
    ref = ObjectRef.of(rendered.body)
    if ref in live.objects:  # someone made it already: keep theirs
        return None
    fields = field_diff(rendered.body, None)
    return ObjectChange(ObjectAction.CREATE, ref, fields, default_configuration=True)


def _enforcement_change(
    rendered: RenderedObject, inventory: Inventory, live: LiveModule
) -> ObjectChange | None:
    """A default configuration created once (L3) changes only by its enforced fields: those
    that drifted are put back (an update of those fields only), and one a user deleted is
    re-created when fields of it are enforced (docs/configuration.md)."""
    ref = inventory.default_configuration
    if ref is None or ref != ObjectRef.of(rendered.body) or rendered.override is None:
        return None
    current = live.objects.get(ref)
    if current is None:
        fields = field_diff(rendered.body, None)
        return ObjectChange(ObjectAction.CREATE, ref, fields, default_configuration=True)
    fields = drifted(rendered.override, current)
    return ObjectChange(ObjectAction.UPDATE, ref, fields, True) if fields else None


def _prune(live: LiveModule, wanted: set[ObjectRef]) -> list[ObjectChange]:
    """L4: what the inventory lists and the new version lacks, in reverse apply order; a CRD
    with custom resources left waits (L8), a Namespace holding others' objects is released."""
    if live.inventory is None:
        return []
    stale = [
        r
        for r in live.inventory.objects
        if r not in wanted
        and _ours(live.objects.get(r), live.inventory)
        and r not in live.crd_instances
    ]
    return [_delete_or_release(r, live) for r in reversed(stale)]


def _delete_or_release(ref: ObjectRef, live: LiveModule) -> ObjectChange:
    """Delete ``ref``, unless it is a Namespace holding objects that are not ours: then only
    our labels are dropped (it is released, never deleted with a user's data in it)."""
    if ref.kind == "Namespace" and ref.name in live.namespace_users:
        return ObjectChange(
            ObjectAction.UPDATE, ref, removed_fields(live.objects[ref], list(OUR_MARKS))
        )
    return ObjectChange(ObjectAction.DELETE, ref)


def _kept_crds(
    desired: DesiredModule, live: LiveModule
) -> tuple[tuple[ObjectRef, ...], tuple[str, ...]]:
    """CRDs the new version drops while custom resources of them are left."""
    if live.inventory is None:
        return (), ()
    wanted = {ObjectRef.of(o.body) for o in desired.objects}
    kept = tuple(
        r
        for r in live.inventory.objects
        if r in live.crd_instances and r not in wanted and r in live.objects
    )
    notes = tuple(
        f"CRD {r.name} is kept until its custom resources are gone: "
        f"{live.crd_instances[r].describe()}"
        for r in kept
    )
    return kept, notes


def _released_namespaces(refs: Sequence[ObjectRef], live: LiveModule) -> tuple[str, ...]:
    return tuple(
        f"namespace {r.name} is released, not deleted: it holds "
        f"{live.namespace_users[r.name].describe()} that are not ours"
        for r in refs
        if r.kind == "Namespace" and r.name in live.namespace_users
    )


def _ours(body: Body | None, inventory: Inventory) -> bool:
    """S1: only objects that still carry our labels, of this runtime and module, are ever
    deleted or released (absent ones need nothing; a copied label on another object does not
    count, nor an object another module took over). A runtime-less inventory is the fleet
    diff's assumption of what a base revision runs on any runtime."""
    if body is None:
        return False
    labels = (body.get("metadata") or {}).get("labels") or {}
    return bool(
        labels.get(LABEL_MANAGED_BY) == MANAGED_BY_VALUE
        and labels.get(LABEL_MODULE) == inventory.module
        and (not inventory.runtime or labels.get(LABEL_RUNTIME) == inventory.runtime)
    )


def plan_removal(live: LiveModule) -> ModulePlan:
    """The entry of a module that left git, by the strategy in its inventory (L9)."""
    inventory = live.inventory
    assert inventory is not None
    base = ModulePlan(
        inventory.module,
        ModuleAction.UNCHANGED,
        "",
        "",
        inventory.version,
        None,
        inventory.strategy,
    )
    if inventory.strategy is Strategy.IGNORE:
        released = list(inventory.objects)
        if inventory.default_configuration is not None:
            released.append(inventory.default_configuration)
        changes = tuple(
            ObjectChange(
                ObjectAction.UPDATE, ref, removed_fields(live.objects[ref], list(OUR_MARKS))
            )
            for ref in released
            if _ours(live.objects.get(ref), inventory)
        )
        message = f"stop managing {inventory.module}; its objects stay, without our labels"
        return replace(
            base,
            action=ModuleAction.REMOVE_IGNORE,
            reason=Reason.STRATEGY_IGNORE,
            message=message,
            changes=changes,
        )
    default = _created_default(inventory, live)
    if live.blocking_total:
        return replace(
            base,
            action=ModuleAction.BLOCKED_DELETION,
            reason=Reason.WAITING_FOR_RESOURCES,
            message=_blocking_message(inventory.module, live),
            changes=default,
            blocking=live.blocking,
            blocking_total=live.blocking_total,
        )
    deletions = tuple(
        _delete_or_release(ref, live)
        for ref in deletion_order(inventory.objects)
        if _ours(live.objects.get(ref), inventory)
    )
    message = f"delete {inventory.module} {inventory.version}"
    return replace(
        base,
        action=ModuleAction.REMOVE_DELETE,
        reason=Reason.REMOVED,
        message=message,
        changes=default + deletions,
        notes=_released_namespaces([c.ref for c in deletions], live),
    )


def _created_default(inventory: Inventory, live: LiveModule) -> tuple[ObjectChange, ...]:
    ref = inventory.default_configuration
    if ref is None or not _ours(live.objects.get(ref), inventory):  # intended: maybe a user's
        return ()
    return (ObjectChange(ObjectAction.DELETE, ref, default_configuration=True),)


def _blocking_message(module: str, live: LiveModule) -> str:
    shown = ", ".join(r.subject for r in live.blocking[:BLOCKING_SHOWN])
    more = live.blocking_total - min(len(live.blocking), BLOCKING_SHOWN)
    tail = f" and {more} more" if more > 0 else ""
    return (
        f"deletion of {module} waits for {live.blocking_total} object(s) of its kinds: "
        f"{shown}{tail}; the operator keeps running until they are gone"
    )


def _next_window_text(context: Context) -> str:
    if context.window is None:
        return ", and the runtime has none"
    return f" (next: {next_window_text(context.window, context.now)})"
