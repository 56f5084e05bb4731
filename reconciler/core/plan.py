"""The planner: desired modules + what the cluster shows -> a Plan (pure).

``plan()`` decides, per module, one action of a closed vocabulary (install, upgrade, reconfigure,
unchanged, remove-ignore, remove-delete, blocked-downgrade, blocked-unknown-version,
blocked-deletion, deferred-window) with a reason code, and the object changes it implies (create,
update with field-level diffs, delete, keep). It applies the lifecycle rules that are decisions
rather than I/O: no downgrade against the running version (L5; a running version that cannot be
read changes nothing either: reason ``UnknownRunningVersion``), the version last Ready as the
running one, so that a failed upgrade rolls back (L15, reason ``Rollback``), adoption (L6),
default configuration created once (L3), prune from the inventory only (L4, S1; an object
carrying a keep mark, ``reconciler.dev/prune: disabled`` or ``helm.sh/resource-policy: keep``,
is released instead of deleted: ``keep``), identity by group, kind, namespace and name with
objects handed over between modules (L12), strategy from the inventory at removal (L9),
blocking deletion (L8, L13), maintenance windows (L10, judged by :mod:`reconciler.core.windows`).
Plans are frozen data (:mod:`reconciler.core.plan_values`): printable, serialisable,
comparable. Callers: the lifecycle executor, ``reconciler diff``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from reconciler.core.enforce import drifted
from reconciler.core.fielddiff import (
    field_diff,
    removed_fields,
    removed_owned_fields,
)
from reconciler.core.inventory import Inventory
from reconciler.core.live import finalizers_holding, held_text, labelled_ours
from reconciler.core.model import (
    ANNOTATION_MODULE_VERSION,
    FIELD_MANAGER,
    LABEL_MANAGED_BY,
    LABEL_MODULE,
    LABEL_RUNTIME,
    Strategy,
    keep_mark,
)
from reconciler.core.objects import Body, ObjectRef
from reconciler.core.plan_values import (
    BLOCKING_SHOWN,
    Context,
    DesiredModule,
    LiveModule,
    ModuleAction,
    ModulePlan,
    ObjectAction,
    ObjectChange,
    Plan,
)
from reconciler.core.reasons import Reason
from reconciler.core.render import RenderedObject, deletion_order, removal_order
from reconciler.core.serverform import server_form
from reconciler.core.takeover import takeover_fields
from reconciler.core.versions import parse_running_version, version_key

#: Labels and annotation dropped when a module is released with strategy Ignore (L7).
OUR_MARKS: tuple[tuple[str, ...], ...] = (
    ("metadata", "labels", LABEL_MANAGED_BY),
    ("metadata", "labels", LABEL_RUNTIME),
    ("metadata", "labels", LABEL_MODULE),
    ("metadata", "annotations", ANNOTATION_MODULE_VERSION),
)
#: How many characters of an unreadable running version a message shows.
VERSION_SHOWN = 32


def plan(
    context: Context, desired: Sequence[DesiredModule], live: Mapping[str, LiveModule]
) -> Plan:
    """The plan for one runtime; see the module docstring."""
    if context.suspended:
        return Plan(context.runtime, (), suspended=True)
    wanted = {d.name for d in desired}
    shipped = shipped_by(desired)
    entries = [
        plan_module(context, d, live.get(d.name, LiveModule()), shipped=shipped) for d in desired
    ]
    removed = [n for n in live if n not in wanted and live[n].inventory]
    entries += [
        plan_removal(live[n], shipped=shipped) for n in removal_order(removed, context.dependencies)
    ]
    return Plan(context.runtime, tuple(entries))


def shipped_by(desired: Sequence[DesiredModule]) -> dict[ObjectRef, str]:
    """Which desired module ships each object of a runtime (L12: one that moved from a module to
    another is handed over, never pruned by the one it left)."""
    return {ObjectRef.of(o.body): d.name for d in desired for o in d.objects}


def plan_module(
    context: Context,
    desired: DesiredModule,
    live: LiveModule,
    *,
    shipped: Mapping[ObjectRef, str] | None = None,
) -> ModulePlan:
    """One desired module's entry of the plan; ``shipped``: what each desired module of the
    runtime ships (:func:`shipped_by`), so that an object moved to another is handed over."""
    version = desired.resolved.version
    running = live.running_version
    base = ModulePlan(
        desired.name,
        ModuleAction.UNCHANGED,
        Reason.UP_TO_DATE,
        "",
        running,
        version,
        desired.strategy,
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
            f"{desired.name} {running} runs{_failed_note(live, running)}; the resolved "
            f"version {version} is lower and is not installed (no downgrades)"
        )
        return replace(
            base,
            action=ModuleAction.BLOCKED_DOWNGRADE,
            reason=Reason.DOWNGRADE_NOT_SUPPORTED,
            message=message,
        )
    upgrade = running_key is not None and version_key(version) > running_key
    content = desired.module.versions[version]
    if (
        upgrade
        and content.requires_downtime
        and not _begun(live, version, running)
        and not _in_window(context)
    ):
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
    handed = _handed_over(live, desired.name, shipped or {})
    changes = _object_changes(desired, live, handed)
    action, reason, message = _classify(desired, live, running, upgrade, changes)
    kept, notes = _kept_crds(desired, live)
    notes += handover_notes(handed)
    notes += _released_namespaces([c.ref for c in changes], live) + _kept_notes(changes, live)
    return replace(
        base,
        action=action,
        reason=reason,
        message=message,
        changes=changes,
        kept=kept,
        notes=notes,
    )


def _begun(live: LiveModule, version: str, running: str | None) -> bool:
    """Whether an upgrade to ``version`` was begun already (L15: applied, not Ready yet, or
    failed half-way): it is carried on, even outside the maintenance window (a module is not
    left half-upgraded until the next one)."""
    return live.inventory is not None and live.inventory.version == version != running


def _failed_note(live: LiveModule, running: str | None) -> str:
    """`` (the upgrade to 2.0.0 did not become Ready)`` while one is under way or failed."""
    inventory = live.inventory
    if inventory is None or not inventory.upgrading or inventory.ready_version != running:
        return ""
    return f" (the upgrade to {inventory.version} did not become Ready)"


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
) -> tuple[ModuleAction, Reason, str]:
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
    if live.inventory.upgrading and live.inventory.ready_version == version:
        text = (
            f"roll {desired.name} back to {version}, the version it last became Ready at "
            f"(the upgrade to {live.inventory.version} did not become Ready): every object as "
            f"{version} ships it, those only {live.inventory.version} has pruned"
        )
        return ModuleAction.RECONFIGURE, Reason.ROLLBACK, text
    if live.inventory.strategy != desired.strategy:
        text = f"strategy {live.inventory.strategy} -> {desired.strategy}"
        return ModuleAction.RECONFIGURE, Reason.STRATEGY_CHANGED, text
    if changes:
        return ModuleAction.RECONFIGURE, Reason.DRIFT, f"{len(changes)} object(s) differ from git"
    return ModuleAction.UNCHANGED, Reason.UP_TO_DATE, f"{desired.name} {version} is up to date"


def _object_changes(
    desired: DesiredModule, live: LiveModule, handed: Mapping[ObjectRef, str]
) -> tuple[ObjectChange, ...]:
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
        takeover = takeover_fields(current, FIELD_MANAGER)  # kubectl's fields become ours
        if fields or takeover:
            changes.append(
                ObjectChange(ObjectAction.UPDATE, ref, fields + takeover, takeover=bool(takeover))
            )
    default = _default_configuration_change(desired, live)
    if default is not None:
        changes.append(default)
    changes.extend(_prune(live, wanted | handed.keys()))
    return tuple(changes)


def _handed_over(
    live: LiveModule, module: str, shipped: Mapping[ObjectRef, str]
) -> dict[ObjectRef, str]:
    """L12: the objects ``module``'s inventory lists that another desired module ships now
    (moved in one commit): the receiver takes them over in place, whatever order the two are
    processed in, so the giver neither prunes nor releases them, by the module receiving each."""
    recorded = live.inventory.objects if live.inventory else ()
    return {r: shipped[r] for r in recorded if shipped.get(r, module) != module}


def handover_notes(handed: Mapping[ObjectRef, str]) -> tuple[str, ...]:
    """What a plan says of the objects it hands over (object -> the module receiving it)."""
    return tuple(f"{r.subject} is handed over to module {m}" for r, m in handed.items())


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
    with custom resources left waits (L8), a Namespace holding others' objects is released, an
    object marked to be kept is released too (:func:`_delete_or_release`)."""
    if live.inventory is None:
        return []
    stale = [
        r
        for r in live.inventory.objects
        if r not in wanted
        and _ours(live.objects.get(r), live.inventory)
        and (r not in live.crd_instances or keep_mark(live.objects.get(r)) is not None)
    ]
    return [_delete_or_release(r, live) for r in reversed(stale)]


def _delete_or_release(ref: ObjectRef, live: LiveModule) -> ObjectChange:
    """Delete ``ref``, unless it carries a keep mark (``reconciler.dev/prune: disabled``,
    ``helm.sh/resource-policy: keep``) or is a Namespace holding objects that are not ours:
    then only our marks are dropped (it is released, and left in place)."""
    body = live.objects.get(ref)
    if body is not None and keep_mark(body) is not None:
        return ObjectChange(ObjectAction.KEEP, ref, removed_fields(body, list(OUR_MARKS)))
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
        if r in live.crd_instances
        and r not in wanted
        and r in live.objects
        and keep_mark(live.objects[r]) is None
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


def _kept_notes(changes: Sequence[ObjectChange], live: LiveModule) -> tuple[str, ...]:
    return tuple(
        f"{c.ref.subject} is kept ({keep_mark(live.objects.get(c.ref))}): released, not deleted"
        for c in changes
        if c.action is ObjectAction.KEEP
    )


def _ours(body: Body | None, inventory: Inventory) -> bool:
    """S1: only objects that still carry our labels, of this runtime and module, are ever
    deleted or released (absent ones need nothing). A runtime-less inventory is the fleet
    diff's assumption of what a base revision runs on any runtime."""
    return labelled_ours(body, inventory.runtime or None, inventory.module)


def plan_removal(live: LiveModule, *, shipped: Mapping[ObjectRef, str] | None = None) -> ModulePlan:
    """The entry of a module that left git, by the strategy in its inventory (L9); what a
    desired module ships now (``shipped``) is handed over to it (L12), neither deleted nor
    released."""
    inventory = live.inventory
    assert inventory is not None
    handed = _handed_over(live, inventory.module, shipped or {})
    base = ModulePlan(
        inventory.module,
        ModuleAction.UNCHANGED,
        Reason.UP_TO_DATE,
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
            if _ours(live.objects.get(ref), inventory) and ref not in handed
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
    blocking, total, held = _held_back(inventory, live)
    if total:
        return replace(
            base,
            action=ModuleAction.BLOCKED_DELETION,
            reason=Reason.WAITING_FOR_RESOURCES,
            message=blocking_message(
                inventory.module,
                blocking,
                total,
                held,
                running=any(r in live.objects and r not in held for r in inventory.objects),
            ),
            changes=default,
            notes=_kept_notes(default, live),
            blocking=blocking,
            blocking_total=total,
            held=tuple(held.items()),
        )
    deletions = tuple(
        _delete_or_release(ref, live)
        for ref in deletion_order(inventory.objects)
        if _ours(live.objects.get(ref), inventory) and ref not in handed
    )
    message = f"delete {inventory.module} {inventory.version}"
    return replace(
        base,
        action=ModuleAction.REMOVE_DELETE,
        reason=Reason.REMOVED,
        message=message,
        changes=default + deletions,
        notes=_released_namespaces([c.ref for c in deletions], live)
        + _kept_notes(default + deletions, live)
        + handover_notes(handed),
    )


def _created_default(inventory: Inventory, live: LiveModule) -> tuple[ObjectChange, ...]:
    ref = inventory.default_configuration
    body = live.objects.get(ref) if ref is not None else None
    if ref is None or not _ours(body, inventory):  # intended: maybe a user's
        return ()
    if body is not None and finalizers_holding(body) is not None:  # deleted already
        return ()
    return (replace(_delete_or_release(ref, live), default_configuration=True),)


def _held_back(
    inventory: Inventory, live: LiveModule
) -> tuple[tuple[ObjectRef, ...], int, dict[ObjectRef, tuple[str, ...]]]:
    """What holds a removal back (L8, L13): the instances and objects the cluster shows (users'
    resources, what is being deleted), and the default configuration when finalizers will hold
    its deletion: the operator that removes them keeps running until it is gone."""
    blocking, total, held = live.blocking, live.blocking_total, dict(live.held)
    ref = inventory.default_configuration
    body = live.objects.get(ref) if ref is not None else None
    if ref is None or body is None or ref in blocking or not _ours(body, inventory):
        return blocking, total, held
    finalizers = tuple(str(f) for f in body["metadata"].get("finalizers") or ())
    if not finalizers:
        return blocking, total, held
    held[ref] = finalizers
    return (ref, *blocking), total + 1, held


def blocking_message(
    module: str,
    blocking: Sequence[ObjectRef],
    total: int,
    held: Mapping[ObjectRef, tuple[str, ...]],
    *,
    running: bool,
) -> str:
    """Why ``module``'s removal waits (L8, L13): the first of the ``total`` objects that hold it,
    those being deleted with the finalizers that hold them; ``running``: its operator is still
    there (it keeps running until they are gone)."""
    shown = ", ".join(
        held_text(r, held[r]) if r in held else r.subject for r in blocking[:BLOCKING_SHOWN]
    )
    more = total - min(len(blocking), BLOCKING_SHOWN)
    tail = f" and {more} more" if more > 0 else ""
    scope = "" if held else " of its kinds"
    after = (
        "the operator keeps running until they are gone"
        if running
        else "the removal finishes once they are gone"
    )
    return f"deletion of {module} waits for {total} object(s){scope}: {shown}{tail}; {after}"


def _in_window(context: Context) -> bool:
    """Whether the runtime's maintenance window is open (:mod:`reconciler.core.windows`, and
    zoneinfo with it, is imported only for a version that requires downtime)."""
    from reconciler.core.windows import in_window

    return in_window(context.window, context.now)


def _next_window_text(context: Context) -> str:
    if context.window is None:
        return ", and the runtime has none"
    from reconciler.core.windows import next_window_text

    return f" (next: {next_window_text(context.window, context.now)})"
