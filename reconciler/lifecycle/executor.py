"""Module lifecycle on one runtime: observe the cluster, plan, carry the plan out (L1-L11).

:class:`Lifecycle` works through the :class:`~reconciler.cluster.api.Cluster` interface only.
``observe`` reads inventories, the desired and recorded objects, the running versions and, for
modules being removed, the instances that block their deletion; a failing read raises before
anything is changed (S2). The pure :func:`reconciler.core.plan.plan` decides; ``execute`` applies
with
server-side apply (one field manager, force), CRDs and Namespaces first and Established before
the rest, modules after their dependencies are Ready, the inventory written before objects so a
crash never loses track of them, prune and deletion in reverse order with CRDs last, and only of
objects the inventory lists and that carry our label (S1). A failure in one module is that
module's Error state, its error kept with its type and retry delay; the others go on. The
result of a pass (:class:`~reconciler.core.status.PassResult`) has each module's status and what
was done to each object (created, configured, unchanged, pruned, deleted, released). Callers:
``reconciler sync`` and ``diff``, the operations steps.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, cast

from reconciler.cluster.api import Cluster, EventSink, ObjectEvent, Settling
from reconciler.core.inventory import (
    LABEL_INVENTORY,
    Inventory,
    inventory_from_configmap,
    inventory_ref,
)
from reconciler.core.model import (
    ANNOTATION_MODULE_VERSION,
    FIELD_MANAGER,
    LABEL_APP_VERSION,
    LABEL_MANAGED_BY,
    LABEL_MODULE,
    LABEL_RUNTIME,
    MANAGED_BY_VALUE,
    ConfigRepo,
    Module,
    Strategy,
)
from reconciler.core.objects import Body, ObjectRef, crd_kind, is_established
from reconciler.core.plan import (
    OUR_MARKS,
    Context,
    DesiredModule,
    LiveModule,
    ModuleAction,
    ModulePlan,
    ObjectAction,
    ObjectChange,
    Occupants,
    Plan,
    plan,
)
from reconciler.core.render import Renderer
from reconciler.core.resolve import Resolution, resolve_runtime
from reconciler.core.status import ChangeAction, ChangeSetEntry, ModuleError, PassResult, Reason
from reconciler.core.status import ModuleState as ModuleState
from reconciler.core.status import ModuleStatus as ModuleStatus
from reconciler.core.windows import in_window
from reconciler.errors import PermanentError, ReconcilerError, UnknownKindError
from reconciler.lifecycle.observe import LiveView, Planned, kind_key

BLOCKING_KEPT = 20
#: The time put in a plan's facts to compare them without it.
_NO_TIME = datetime.min.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class SyncResult:
    """What one sync of a runtime planned, and what carrying it out did (``outcome``)."""

    runtime: str
    plan: Plan
    outcome: PassResult = field(default_factory=PassResult)
    dry_run: bool = False

    @property
    def modules(self) -> tuple[ModuleStatus, ...]:
        """Each module's status after the pass."""
        return self.outcome.modules

    @property
    def state(self) -> ModuleState:
        """The runtime's state: its worst module's (Ready when it has none)."""
        return self.outcome.state


def desired_modules(
    repo: ConfigRepo, resolution: Resolution, renderer: Renderer
) -> list[DesiredModule]:
    """The runtime's modules with their rendered objects, in dependency order."""
    rendered = renderer.render(resolution)
    return [
        DesiredModule.of(
            resolved,
            repo.modules[resolved.name],
            [o for o in rendered if o.module == resolved.name],
        )
        for resolved in resolution.modules
    ]


class Lifecycle:
    """Observe, plan and carry out module changes on one cluster."""

    def __init__(
        self,
        cluster: Cluster,
        *,
        system_namespace: str,
        field_manager: str = FIELD_MANAGER,
        commit: str = "",
        view: LiveView | None = None,
        events: bool = True,
    ) -> None:
        self.cluster = cluster
        #: Record a Kubernetes Event on each object changed, and on each object that blocks a
        #: removal (``spec.kubernetesEvents`` of the settings), where the cluster can.
        self.events = events and isinstance(cluster, EventSink)
        self.system_namespace = system_namespace
        self.field_manager = field_manager
        self.commit = commit
        #: What this pass has listed, read and written (shared by the stages of one run).
        self.view = view if view is not None else LiveView()
        self._namespaces: set[str] = set()
        self._changes: list[ChangeSetEntry] = []
        #: Modules whose install's first stage ran ahead of the others (see ``_prepare_all``).
        self._prepared: dict[str, _Prepared] = {}

    # -- the whole sync ------------------------------------------------------------------------

    def sync(
        self,
        context: Context,
        desired: Sequence[DesiredModule],
        *,
        dry_run: bool = False,
        part: str = "all",
    ) -> SyncResult:
        """Observe, plan and (unless ``dry_run``) carry the plan out; ``part`` "desired" or
        "removals" carries out only the modules git wants, or only those it dropped."""
        live, the_plan = self._observed_plan(context, desired)
        if part != "all":
            wanted = {d.name for d in desired}
            kept = tuple(m for m in the_plan.modules if (m.module in wanted) == (part == "desired"))
            the_plan = replace(the_plan, modules=kept)
        if dry_run or the_plan.suspended:
            return SyncResult(context.runtime, the_plan, dry_run=dry_run)
        outcome = self.execute(context.runtime, the_plan, desired, live, context.dependencies)
        return SyncResult(context.runtime, the_plan, outcome)

    def _observed_plan(
        self, context: Context, desired: Sequence[DesiredModule]
    ) -> tuple[dict[str, LiveModule], Plan]:
        """Observe and plan; or, when nothing the view holds changed since the last time, for
        the same desired modules and the same facts (the time aside, but whether the runtime's
        maintenance window is open), the last observation and plan again."""
        key = (replace(context, now=_NO_TIME), in_window(context.window, context.now))
        known = self.view.planned
        if known is not None and known.answers(self.view.generation, desired, key):
            return known.live, known.plan
        live = self.observe(context.runtime, desired)
        the_plan = plan(context, desired, live)
        self.view.planned = Planned(self.view.generation, desired, key, live, the_plan)
        return live, the_plan

    # -- observation ---------------------------------------------------------------------------

    def observe(self, runtime: str, desired: Sequence[DesiredModule]) -> dict[str, LiveModule]:
        """What the cluster shows for every desired or recorded module; raises on a failed read."""
        inventories = self.read_inventories(runtime)
        live: dict[str, LiveModule] = {}
        for module in desired:
            live[module.name] = self._observe_desired(runtime, module, inventories.get(module.name))
        for name, inventory in inventories.items():
            if name not in live:
                live[name] = self._observe_removed(inventory)
        return live

    def read_inventories(self, runtime: str, *, fresh: bool = False) -> dict[str, Inventory]:
        """Every inventory of ``runtime`` in the system namespace (listed once per pass, or
        again when ``fresh``)."""
        inventories = self.view.inventories
        if inventories is None or fresh:
            inventories = self._list_inventories(runtime)
            self.view.record_inventories(inventories)
        return dict(inventories)

    def inventory_tree(self, runtime: str) -> list[tuple[Inventory, dict[ObjectRef, Body | None]]]:
        """Each recorded module (by name) with the live body of every object its inventory
        lists, the default configuration included (``None``: missing). One list per kind."""
        inventories = [inv for _, inv in sorted(self.read_inventories(runtime).items())]
        found = self._get_all(runtime, [r for inv in inventories for r in _recorded_refs(inv)])
        return [(inv, {r: found.get(r) for r in _recorded_refs(inv)}) for inv in inventories]

    def _list_inventories(self, runtime: str) -> dict[str, Inventory]:
        labels = {LABEL_INVENTORY: "true", LABEL_RUNTIME: runtime}
        found = self.cluster.list_objects(
            "v1", "ConfigMap", namespace=self.system_namespace, labels=labels
        )
        inventories = {}
        for body in found:
            try:
                inventory = inventory_from_configmap(body)
            except ValueError as error:
                raise PermanentError(str(error)) from error
            inventories[inventory.module] = inventory
        return inventories

    def _observe_desired(
        self, runtime: str, module: DesiredModule, inventory: Inventory | None
    ) -> LiveModule:
        refs = [ObjectRef.of(o.body) for o in module.objects]
        created = (  # L3: a default configuration recorded as ours and created is not read again
            inventory is not None
            and inventory.default_configuration_done
            and inventory.default_configuration is not None
        )
        if module.default_configuration is not None and not created:
            refs.append(ObjectRef.of(module.default_configuration.body))
        if inventory is not None:
            refs += [r for r in inventory.objects if r not in refs]
        objects = self._get_all(runtime, refs)
        running, source = _running_version(module.module, objects)
        if running is None and inventory is not None:
            running, source = inventory.version, f"inventory {inventory.module}"
        if inventory is None:
            rebuilt = _rebuilt_inventory(runtime, module, objects, running)
            return LiveModule(
                rebuilt, objects, running, inventory_stored=False, version_source=source
            )
        wanted = {ObjectRef.of(o.body) for o in module.objects}
        stale = [r for r in inventory.objects if r not in wanted and r in objects]
        return LiveModule(
            inventory,
            objects,
            running,
            namespace_users=self._namespace_users(stale),
            crd_instances=self._crd_instances(stale, objects, inventory.default_configuration),
            version_source=source,
        )

    def _observe_removed(self, inventory: Inventory) -> LiveModule:
        refs = list(inventory.objects)
        if inventory.default_configuration is not None:
            refs.append(inventory.default_configuration)
        objects = self._get_all(inventory.runtime, refs)
        if inventory.strategy is Strategy.IGNORE:
            return LiveModule(inventory, objects, inventory.version)
        blocking, total = self._blocking(inventory)
        users = self._namespace_users([r for r in inventory.objects if r in objects])
        return LiveModule(
            inventory, objects, inventory.version, blocking, total, namespace_users=users
        )

    def _namespace_users(self, refs: Sequence[ObjectRef]) -> dict[str, Occupants]:
        """For each Namespace among ``refs``: the objects in it that are not ours (a user's
        ConfigMaps, PVCs, ...); Namespaces holding none are left out."""
        names = [r.name for r in refs if r.kind == "Namespace" and not r.group]
        if not names:
            return {}
        kinds = [k for k in self.cluster.served_kinds() if k.namespaced and k.kind != "Event"]
        users: dict[str, Occupants] = {}
        for name in names:
            found = [
                ObjectRef.of(body)
                for kind in kinds
                for body in self.cluster.list_objects(kind.api_version, kind.kind, namespace=name)
                if not _ours_or_generated(body)
            ]
            if found:
                found.sort()
                users[name] = Occupants(len(found), tuple(found[:BLOCKING_KEPT]))
        return users

    def _crd_instances(
        self,
        refs: Sequence[ObjectRef],
        objects: Mapping[ObjectRef, Body],
        ours: ObjectRef | None,
    ) -> dict[ObjectRef, Occupants]:
        """For each CRD among ``refs`` (an upgrade drops them): its custom resources left, but
        for ``ours`` (the default configuration, which goes with its CRD)."""
        left: dict[ObjectRef, Occupants] = {}
        for ref in refs:
            if ref.kind != "CustomResourceDefinition":
                continue
            group, kind = crd_kind(objects[ref])
            found = sorted(r for r in map(ObjectRef.of, self._instances(group, kind)) if r != ours)
            if found:
                left[ref] = Occupants(len(found), tuple(found[:BLOCKING_KEPT]))
        return left

    def _instances(self, group: str, kind: str) -> list[Body]:
        """Every object of ``kind`` in ``group``, in all namespaces, in the version served now
        (none when the kind is not served). Discovery may name a version the server no longer
        serves (the cluster refreshes it then): asked again once, never read as none."""
        info = self.cluster.kinds_in_group(group, kind)
        if info is None:
            return []
        try:
            return self.cluster.list_objects(info.api_version, kind)
        except UnknownKindError:  # that version is gone: ask the refreshed discovery
            info = self.cluster.kinds_in_group(group, kind)
        return self.cluster.list_objects(info.api_version, kind) if info else []

    def _get_all(self, runtime: str, refs: Sequence[ObjectRef]) -> dict[ObjectRef, Body]:
        """The objects of ``refs`` that exist: one list per kind by our labels, then a GET
        only for what those lists cannot show (objects without our labels, or absent); an
        object in a Namespace that does not exist is absent without a GET."""
        for ref in refs:
            if self.view.needs_list(ref):
                self._list_kind(runtime, ref)
        unknown = {r.namespace for r in refs if r.namespace and not self.view.lookup(r)[0]}
        absent = {ns for ns in sorted(unknown) if self._read(_namespace_ref(ns)) is None}
        found = {}
        for ref in refs:
            if ref.namespace in absent and not self.view.lookup(ref)[0]:
                self.view.record(ref, None)  # no namespace, no object in it: no GET
                continue
            body = self._read(ref)
            if body is not None:
                found[ref] = body
        return found

    def _list_kind(self, runtime: str, ref: ObjectRef) -> None:
        labels = {LABEL_MANAGED_BY: MANAGED_BY_VALUE, LABEL_RUNTIME: runtime}
        try:
            items = self.cluster.list_objects(ref.api_version, ref.kind, labels=labels)
        except UnknownKindError:  # its CRD is not there (yet): nothing of that kind exists
            self.view.record_list(kind_key(ref), None)
            return
        self.view.record_list(kind_key(ref), {_listed_ref(ref, body): body for body in items})

    def _read(self, ref: ObjectRef, *, fresh: bool = False) -> Body | None:
        """``ref`` from the view, else (or when ``fresh``) read from the server and kept."""
        known, body = self.view.lookup(ref)
        if known and not fresh:
            return body
        try:
            body = self.cluster.get(ref)
        except UnknownKindError:
            body = None
        self.view.record(ref, body)
        return body

    def _blocking(self, inventory: Inventory) -> tuple[tuple[ObjectRef, ...], int]:
        """Instances of the module's kinds, except the default configuration we delete first
        and the module's own objects (a ServiceMonitor of its manifest, deleted with it) when
        they carry our labels (one recorded as intended may be a user's)."""
        ours = {*inventory.objects, inventory.default_configuration}
        found: list[ObjectRef] = []
        for group, kind in inventory.managed_kinds:
            for body in self._instances(group, kind):
                ref = ObjectRef.of(body)
                if ref not in ours or not _labelled(body, inventory.runtime, inventory.module):
                    found.append(ref)
        found.sort()
        return tuple(found[:BLOCKING_KEPT]), len(found)

    # -- execution -------------------------------------------------------------------------------

    def execute(
        self,
        runtime: str,
        the_plan: Plan,
        desired: Sequence[DesiredModule],
        live: Mapping[str, LiveModule],
        dependencies: Mapping[str, tuple[str, ...]] | None = None,
    ) -> PassResult:
        """Carry ``the_plan`` out, module by module; returns each module's status and what was
        done to each object (a module that failed half-way keeps what it did before).

        ``dependencies`` (module -> the modules it depends on) holds a removal back while a
        module that depends on it is still being removed."""
        by_name = {d.name: d for d in desired}
        statuses: dict[str, ModuleStatus] = {}
        self._changes, self._prepared = [], {}
        failed = self._prepare_all(runtime, the_plan, by_name, live)
        for entry in the_plan.modules:
            status = failed.get(entry.module) or self._module(
                runtime, entry, by_name, live, statuses, dependencies or {}
            )
            statuses[entry.module] = status
        self._settle_ready(runtime, the_plan, by_name, live, statuses)
        for entry in the_plan.modules:
            self._module_event(entry, statuses[entry.module])
        return PassResult(tuple(statuses.values()), tuple(self._changes))

    def _module(
        self,
        runtime: str,
        entry: ModulePlan,
        by_name: Mapping[str, DesiredModule],
        live: Mapping[str, LiveModule],
        statuses: Mapping[str, ModuleStatus],
        dependencies: Mapping[str, tuple[str, ...]],
    ) -> ModuleStatus:
        """Carry out one module's plan; its status (Error when that failed)."""
        module_live = live.get(entry.module, LiveModule())
        try:
            waiting = _dependents_left(entry, dependencies, statuses, by_name)
            if waiting:
                return _waiting_for_dependents(entry, waiting)
            if entry.module in by_name:
                return self._desired(runtime, entry, by_name[entry.module], module_live, statuses)
            return self._removal(entry, module_live)
        except ReconcilerError as error:
            return _failed(entry, error)

    def _settle_ready(
        self,
        runtime: str,
        the_plan: Plan,
        by_name: Mapping[str, DesiredModule],
        live: Mapping[str, LiveModule],
        statuses: dict[str, ModuleStatus],
    ) -> None:
        """Modules this pass changed that wait for their operator: wait a little for them
        (:data:`READY_WAIT_SECONDS`) and take their readiness again; then install the modules
        that waited for those, once (their own readiness is for the next pass)."""
        entries = {e.module: e for e in the_plan.modules}
        waiting = [
            name
            for name, s in statuses.items()
            if s.reason == Reason.WAITING_FOR_OPERATOR and entries[name].changes_anything
        ]
        if not waiting:
            return
        self._settle(
            lambda: any(not self._operator_available(by_name[n]) for n in waiting),
            READY_WAIT_SECONDS,
        )
        for name in waiting:
            statuses[name] = self._readiness(entries[name], by_name[name])
        for entry in the_plan.modules:
            if statuses[entry.module].reason == Reason.WAITING_FOR_DEPENDENCY:
                statuses[entry.module] = self._module(runtime, entry, by_name, live, statuses, {})

    def _desired(
        self,
        runtime: str,
        entry: ModulePlan,
        module: DesiredModule,
        live: LiveModule,
        statuses: Mapping[str, ModuleStatus],
    ) -> ModuleStatus:
        if entry.action in (ModuleAction.BLOCKED_DOWNGRADE, ModuleAction.BLOCKED_UNKNOWN_VERSION):
            return _status(entry, ModuleState.WARNING, entry.from_version)
        if entry.action is ModuleAction.DEFERRED_WINDOW:
            return _status(entry, ModuleState.READY, entry.from_version)
        waiting = [
            d
            for d in module.module.depends_on
            if d in statuses and statuses[d].state is not ModuleState.READY
        ]
        if waiting:
            message = f"waits for {', '.join(waiting)} to be Ready"
            return ModuleStatus(
                entry.module,
                ModuleState.PROCESSING,
                Reason.WAITING_FOR_DEPENDENCY,
                message,
                entry.from_version,
            )
        return self._install(runtime, entry, module, live)

    def _install(
        self, runtime: str, entry: ModulePlan, module: DesiredModule, live: LiveModule
    ) -> ModuleStatus:
        prepared = self._prepared.pop(entry.module, None)
        if prepared is None:
            prepared = self._prepare(runtime, entry, module, live)
            self._settle(lambda: bool(self._unestablished(module)), CRD_WAIT_SECONDS)
        pending = self._unestablished(module)
        if pending:
            message = f"waiting for CRD {', '.join(pending)} to be Established"
            return ModuleStatus(
                entry.module,
                ModuleState.PROCESSING,
                Reason.WAITING_FOR_CRD,
                message,
                entry.to_version,
            )
        bodies = prepared.bodies
        for change in entry.changes:
            if change.ref in bodies and change not in prepared.first:
                self._apply(bodies[change.ref])
                self._note(entry.module, change.ref, _APPLIED[change.action])
        for change in entry.changes:
            if change.ref not in bodies:
                self._delete_or_release(entry.module, change, ChangeAction.PRUNED)
        final = _final_inventory(prepared.intent, module, entry)
        self._write_inventory(final, prepared.intent)  # the cluster now holds the intent
        changed = {c.ref for c in entry.changes}
        for ref in bodies:
            if ref not in changed and ref in live.objects:
                self._note(entry.module, ref, ChangeAction.UNCHANGED)
        return self._readiness(entry, module)

    def _prepare(
        self, runtime: str, entry: ModulePlan, module: DesiredModule, live: LiveModule
    ) -> _Prepared:
        """The first stage of an install: the inventory's intent written (before any object),
        then the module's CRDs and Namespaces applied."""
        bodies = {ObjectRef.of(o.body): o.body for o in module.objects}
        if module.default_configuration is not None:
            bodies[ObjectRef.of(module.default_configuration.body)] = (
                module.default_configuration.body
            )
        stored = live.inventory if live.inventory_stored else None
        intent = _intent(runtime, module, live.inventory, self.commit, live.objects)
        if entry.changes_anything or intent != stored:
            self.ensure_namespace(self.system_namespace)
            self._write_inventory(intent, stored)
        first = tuple(c for c in entry.changes if c.ref in bodies and c.ref.kind in _FIRST)
        for change in first:
            self._apply(bodies[change.ref])
            self._note(entry.module, change.ref, _APPLIED[change.action])
        return _Prepared(intent, bodies, first)

    def _prepare_all(
        self,
        runtime: str,
        the_plan: Plan,
        by_name: Mapping[str, DesiredModule],
        live: Mapping[str, LiveModule],
    ) -> dict[str, ModuleStatus]:
        """The first stage of every install that depends on no other module, before any
        module's second stage, and one wait for all their CRDs to be Established (rather than
        one per module); the modules that failed in it, with their Error status."""
        failed: dict[str, ModuleStatus] = {}
        started: list[DesiredModule] = []
        for entry in the_plan.modules:
            module = by_name.get(entry.module)
            if module is None or module.module.depends_on or entry.action in _HELD:
                continue
            try:
                self._prepared[entry.module] = self._prepare(
                    runtime, entry, module, live.get(entry.module, LiveModule())
                )
            except ReconcilerError as error:
                failed[entry.module] = _failed(entry, error)
                continue
            if self._prepared[entry.module].first:
                started.append(module)
        self._settle(lambda: any(self._unestablished(m) for m in started), CRD_WAIT_SECONDS)
        return failed

    def _settle(self, pending: Callable[[], bool], seconds: float) -> None:
        """On a cluster that moves on by itself (:class:`~reconciler.cluster.api.Settling`),
        wait while ``pending()`` holds, ``seconds`` at most, asking again at growing intervals
        (50 ms, doubled up to 1 s); elsewhere (in memory, a snapshot) nothing changes while we
        wait: return at once."""
        if not isinstance(self.cluster, Settling):
            return
        waited, delay = 0.0, SETTLE_FIRST
        while waited < seconds and pending():
            self.cluster.pause(delay)
            waited += delay
            delay = min(delay * 2, SETTLE_MAX)

    def _removal(self, entry: ModulePlan, live: LiveModule) -> ModuleStatus:
        inventory = live.inventory
        assert inventory is not None
        ref = inventory_ref(self.system_namespace, entry.module)
        if entry.action is ModuleAction.REMOVE_IGNORE:
            unmark = _unmark_patch()
            for change in entry.changes:
                self._patch(change.ref, unmark)
                self._note(entry.module, change.ref, ChangeAction.RELEASED)
            self._delete_inventory(ref, entry.module)
            return _status(entry, ModuleState.UNMANAGED, inventory.version)
        for change in entry.changes:
            self._delete_or_release(entry.module, change, ChangeAction.DELETED)
        if entry.action is ModuleAction.BLOCKED_DELETION:
            self._blocked_events(entry)
            if inventory.default_configuration is not None:
                cleared = replace(inventory, default_configuration=None)
                self._write_inventory(cleared, inventory)
            return _status(entry, ModuleState.DELETING, inventory.version)
        self._delete_inventory(ref, entry.module)
        message = "; ".join((entry.message, *entry.notes))
        return ModuleStatus(entry.module, None, entry.reason, message, inventory.version)

    # -- small steps -----------------------------------------------------------------------------

    def _delete_or_release(self, module: str, change: ObjectChange, deletion: ChangeAction) -> None:
        """A planned deletion (recorded as ``deletion``: pruned or deleted), or the release of a
        Namespace that holds others' objects."""
        if change.action is ObjectAction.DELETE:
            self.delete(change.ref)
            self._note(module, change.ref, deletion)
        else:
            self._patch(change.ref, _unmark_patch())
            self._note(module, change.ref, ChangeAction.RELEASED)

    def _note(self, module: str, ref: ObjectRef, action: ChangeAction) -> None:
        self._changes.append(ChangeSetEntry(module, ref, action))

    def _module_event(self, entry: ModulePlan, status: ModuleStatus) -> None:
        """One Event per module and pass that changed anything, on the module's inventory
        ConfigMap (as Flux records one per Kustomization and reconciliation): what was done to
        how many objects, then the objects (``kubectl describe configmap -n SYSTEM
        inventory-MODULE``, or ``kubectl get events -n SYSTEM`` for every module)."""
        if not self.events:
            return
        changed = [
            c for c in self._changes if c.module == entry.module and c.action in _EVENT_REASONS
        ]
        if changed:
            ref = inventory_ref(self.system_namespace, entry.module)
            reason, message = module_event_text(entry.module, status.version, changed)
            self._event(ObjectEvent(ref, reason, message))

    def _blocked_events(self, entry: ModulePlan) -> None:
        """A Warning on each object that holds a removal back (``kubectl describe`` shows it)."""
        for ref in entry.blocking:
            message = (
                f"module {entry.module} is not removed while this {ref.kind} exists: delete it, "
                "or keep the module"
            )
            self._event(ObjectEvent(ref, "DeletionBlocked", message, "Warning"))

    def _event(self, event: ObjectEvent) -> None:
        if self.events:
            cast(EventSink, self.cluster).record_event(event, component=self.field_manager)

    def delete(self, ref: ObjectRef) -> bool:
        """Ask for the deletion of ``ref`` (``False`` when it was gone); the view forgets it."""
        gone = self.cluster.delete(ref)
        self.view.record(ref, None)
        return gone

    def _delete_inventory(self, ref: ObjectRef, module: str) -> None:
        self.delete(ref)
        self.view.forget_inventory(module)

    def _patch(self, ref: ObjectRef, merge_patch: Mapping[str, Any]) -> None:
        self.view.record(ref, self.cluster.patch(ref, merge_patch))

    def _apply(self, body: Mapping[str, Any]) -> None:
        namespace = (body.get("metadata") or {}).get("namespace")
        if namespace:
            self.ensure_namespace(str(namespace))
        result = self.cluster.apply(body, field_manager=self.field_manager, force=True)
        self.view.record(ObjectRef.of(body), result)

    def labelled_ours(self, ref: ObjectRef, inventory: Inventory) -> bool:
        """Whether ``ref`` exists and carries our labels for the inventory's runtime and module
        (an absent kind counts as absent)."""
        return _labelled(self._read(ref), inventory.runtime, inventory.module)

    def ensure_namespace(self, name: str) -> None:
        """Create a namespace that is missing; never labelled ours, so never deleted (S1)."""
        if name in self._namespaces:
            return
        if name == self.system_namespace and self.view.inventories:  # they live in it
            return
        ref = ObjectRef("v1", "Namespace", "", name)
        if self._read(ref) is None:
            body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
            created = self.cluster.apply(body, field_manager=self.field_manager, force=True)
            self.view.record(ref, created)
        self._namespaces.add(name)

    def _write_inventory(self, inventory: Inventory, current: Inventory | None) -> None:
        if inventory != current:
            body = inventory.to_configmap(self.system_namespace)
            self.cluster.apply(body, field_manager=self.field_manager, force=True)
            self.view.record_inventory(inventory)

    def _unestablished(self, module: DesiredModule) -> list[str]:
        pending = []
        for rendered in module.objects:
            if rendered.body.get("kind") != "CustomResourceDefinition":
                continue
            ref = ObjectRef.of(rendered.body)
            live = self._read(ref)
            if live is None or not is_established(live):  # just applied: ask the server
                live = self._read(ref, fresh=True)
            if live is None or not is_established(live):
                pending.append(str(rendered.body["metadata"]["name"]))
        return pending

    def _readiness(self, entry: ModulePlan, module: DesiredModule) -> ModuleStatus:
        """L2: every CRD Established and the operator workload available."""
        spec = module.module
        if not self._operator_available(module):
            message = f"{spec.operator_kind} {spec.operator_name} is not available yet"
            return ModuleStatus(
                entry.module,
                ModuleState.PROCESSING,
                Reason.WAITING_FOR_OPERATOR,
                message,
                entry.to_version,
            )
        reason = entry.reason if entry.action is not ModuleAction.UNCHANGED else Reason.READY
        message = "; ".join((f"{entry.module} {entry.to_version} is Ready", *entry.notes))
        if entry.kept:
            return ModuleStatus(
                entry.module, ModuleState.WARNING, "CRDInUse", message, entry.to_version
            )
        return ModuleStatus(entry.module, ModuleState.READY, reason, message, entry.to_version)

    def _operator_available(self, module: DesiredModule) -> bool:
        """Whether the module's operator workload is available (asked of the server when the
        view does not show it so)."""
        spec = module.module
        operator = next(
            (
                ObjectRef.of(o.body)
                for o in module.objects
                if o.body.get("kind") == spec.operator_kind
                and o.body["metadata"]["name"] == spec.operator_name
            ),
            None,
        )
        if operator is None:
            return False
        live = self._read(operator)
        if live is None or not workload_available(live):  # ask the server
            live = self._read(operator, fresh=True)
        return live is not None and workload_available(live)


@dataclass(frozen=True, slots=True)
class _Prepared:
    """A module after the first stage of its install: the inventory written, the objects to
    apply by reference, the changes applied already (CRDs and Namespaces)."""

    intent: Inventory
    bodies: dict[ObjectRef, Mapping[str, Any]]
    first: tuple[ObjectChange, ...]


#: Kinds applied in the first stage of an install (L1).
_FIRST = ("CustomResourceDefinition", "Namespace")
#: Module actions that apply nothing.
_HELD = (
    ModuleAction.BLOCKED_DOWNGRADE,
    ModuleAction.BLOCKED_UNKNOWN_VERSION,
    ModuleAction.DEFERRED_WINDOW,
)
#: How long a pass waits for the CRDs it applied to be Established (on a real server).
CRD_WAIT_SECONDS = 30.0
#: How long a pass waits for the operators of the modules it changed to be available.
READY_WAIT_SECONDS = 10.0
SETTLE_FIRST = 0.05
SETTLE_MAX = 1.0


def _namespace_ref(name: str) -> ObjectRef:
    return ObjectRef("v1", "Namespace", "", name)


def _listed_ref(asked: ObjectRef, body: Body) -> ObjectRef:
    """The reference of a listed object under the apiVersion it was listed by."""
    metadata = body.get("metadata") or {}
    return ObjectRef(
        asked.api_version,
        asked.kind,
        str(metadata.get("namespace") or ""),
        str(metadata.get("name") or ""),
    )


def _dependents_left(
    entry: ModulePlan,
    dependencies: Mapping[str, tuple[str, ...]],
    statuses: Mapping[str, ModuleStatus],
    desired: Mapping[str, DesiredModule],
) -> list[str]:
    """Modules removed in this plan that depend on ``entry``'s module and are not gone yet."""
    if entry.module in desired or entry.action is ModuleAction.REMOVE_IGNORE:
        return []
    return [
        name
        for name, status in statuses.items()
        if name not in desired
        and status.state is not None
        and status.state is not ModuleState.UNMANAGED
        and entry.module in dependencies.get(name, ())
    ]


def _waiting_for_dependents(entry: ModulePlan, waiting: list[str]) -> ModuleStatus:
    message = f"deletion of {entry.module} waits until {', '.join(waiting)} is gone"
    return ModuleStatus(
        entry.module,
        ModuleState.DELETING,
        Reason.WAITING_FOR_DEPENDENTS,
        message,
        entry.from_version,
    )


#: The Event reason of a module's pass by what it did: deleted (a removal), released (an Ignore
#: removal), else applied (created, configured, pruned); an unchanged object counts for none.
_EVENT_REASONS = {
    ChangeAction.CREATED: "Applied",
    ChangeAction.CONFIGURED: "Applied",
    ChangeAction.PRUNED: "Applied",
    ChangeAction.DELETED: "Deleted",
    ChangeAction.RELEASED: "Released",
}
#: The objects an Event names, at most (the rest are counted).
EVENT_SUBJECTS = 12


def module_event_text(
    module: str, version: str | None, changed: Sequence[ChangeSetEntry]
) -> tuple[str, str]:
    """(reason, message) of a module's Event: ``module widget 1.0.0: 5 created, 1 configured:
    Namespace/widget-system created, ...`` (the first :data:`EVENT_SUBJECTS` objects)."""
    counts: dict[ChangeAction, int] = {}
    for change in changed:
        counts[change.action] = counts.get(change.action, 0) + 1
    reasons = {_EVENT_REASONS[a] for a in counts}
    reason = next(r for r in ("Deleted", "Released", "Applied") if r in reasons)
    summary = ", ".join(f"{n} {action}" for action, n in counts.items())
    subjects = [f"{c.subject} {c.action}" for c in changed[:EVENT_SUBJECTS]]
    if len(changed) > EVENT_SUBJECTS:
        subjects.append(f"and {len(changed) - EVENT_SUBJECTS} more")
    head = f"module {module} {version}" if version else f"module {module}"
    return reason, f"{head}: {summary}: {', '.join(subjects)}"


def _recorded_refs(inventory: Inventory) -> list[ObjectRef]:
    """The objects an inventory lists, then its default configuration if it is not among them."""
    refs = list(inventory.objects)
    default = inventory.default_configuration
    if default is not None and default not in refs:
        refs.append(default)
    return refs


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
    if kind in ("Deployment", "StatefulSet", "DaemonSet"):
        return "Available" if workload_available(body) else "Progressing"
    return "Present"


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


def _running_version(module: Module, objects: Mapping[ObjectRef, Body]) -> tuple[str | None, str]:
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


def _rebuilt_inventory(
    runtime: str, module: DesiredModule, objects: Mapping[ObjectRef, Body], running: str | None
) -> Inventory | None:
    """An inventory that was deleted, rebuilt from our labels on the objects the module's
    manifest names (a copied label on another object does not count)."""
    ours = [
        ObjectRef.of(o.body)
        for o in module.objects
        if _labelled(objects.get(ObjectRef.of(o.body)), runtime, module.name)
    ]
    if not ours:
        return None
    first = objects[ours[0]]
    annotations = (first.get("metadata") or {}).get("annotations") or {}
    version = annotations.get(ANNOTATION_MODULE_VERSION) or running
    default = module.default_configuration
    default_ref = ObjectRef.of(default.body) if default else None
    default_ours = default_ref is not None and _labelled(
        objects.get(default_ref), runtime, module.name
    )
    return Inventory(
        runtime,
        module.name,
        str(version),
        module.strategy,
        tuple(ours),
        module.managed_kinds(),
        default_ref if default_ours else None,
        default_configuration_done=default_ours,
    )


def _ours_or_generated(body: Body) -> bool:
    """Objects a Namespace may hold and still be ours to delete: ours, owned by another object
    (garbage-collected with it), or made by Kubernetes in every Namespace."""
    metadata = body.get("metadata") or {}
    labels = metadata.get("labels") or {}
    if labels.get(LABEL_MANAGED_BY) == MANAGED_BY_VALUE or metadata.get("ownerReferences"):
        return True
    return (str(body.get("kind")), str(metadata.get("name"))) in _GENERATED


#: What Kubernetes creates in every Namespace (kube-controller-manager's service account and
#: root CA publisher; the service CA ConfigMap as OpenShift's, and MicroShift's, creates it).
_GENERATED = {
    ("ServiceAccount", "default"),
    ("ConfigMap", "kube-root-ca.crt"),
    ("ConfigMap", "openshift-service-ca.crt"),
}


def _labelled(body: Body | None, runtime: str, module: str) -> bool:
    labels = ((body or {}).get("metadata") or {}).get("labels") or {}
    return (
        labels.get(LABEL_MANAGED_BY) == MANAGED_BY_VALUE
        and labels.get(LABEL_RUNTIME) == runtime
        and labels.get(LABEL_MODULE) == module
    )


def _intent(
    runtime: str,
    module: DesiredModule,
    current: Inventory | None,
    commit: str,
    objects: Mapping[ObjectRef, Body],
) -> Inventory:
    """The inventory written before applying: the new objects plus every old one still to prune,
    and the default configuration about to be created (recorded before it exists)."""
    wanted = [ObjectRef.of(o.body) for o in module.objects]
    old = [r for r in (current.objects if current else ()) if r not in wanted]
    default, done = _default_intent(runtime, module, current, objects)
    fresh = Inventory(
        runtime,
        module.name,
        module.resolved.version,
        module.strategy,
        tuple(wanted + old),
        module.managed_kinds(),
        default,
        done,
        current.commit if current else commit,
    )
    if current is not None and fresh != current:
        fresh = replace(fresh, commit=commit or current.commit)
    return fresh


def _default_intent(
    runtime: str,
    module: DesiredModule,
    current: Inventory | None,
    objects: Mapping[ObjectRef, Body],
) -> tuple[ObjectRef | None, bool]:
    """L3 bookkeeping: (the default configuration that is ours, whether it was created).

    The reference is recorded *before* the object is created, "intended" (not done), so that
    a lost response or a kill right after the create can never make our object look like a
    user's. Then: intended and absent -> create it (once); intended and present with our labels
    -> it was created (the answer was lost): done; done -> never created again, even when a
    user deleted it; present before we intended anything -> a user's, never ours."""
    ref, done = (
        (current.default_configuration, current.default_configuration_done)
        if current
        else (None, False)
    )
    rendered = module.default_configuration
    if rendered is None or module.strategy is not Strategy.CREATE_AND_DELETE:
        return ref, done
    wanted = ObjectRef.of(rendered.body)
    body = objects.get(wanted)
    ours = body is not None and _labelled(body, runtime, module.name)
    if ref is None and ours:  # created by us, recorded by an older reconciler: ours again
        return wanted, True
    if ref is not None and not done and body is not None and not ours:
        return None, True  # a user made it between our intent and our create: keep theirs
    if done or ref is not None:
        return ref, done
    if body is not None:  # someone made it already: keep theirs
        return None, True
    return wanted, False  # intended: created right after this inventory is written


def _final_inventory(intent: Inventory, module: DesiredModule, entry: ModulePlan) -> Inventory:
    """The inventory once the module is applied: the new objects (and the old ones kept for
    now, a CRD with custom resources left), and an intended default configuration now created."""
    wanted = tuple(ObjectRef.of(o.body) for o in module.objects) + entry.kept
    done = intent.default_configuration_done or intent.default_configuration is not None
    return replace(intent, objects=wanted, default_configuration_done=done)


def _unmark_patch() -> dict[str, Any]:
    patch: dict[str, Any] = {"metadata": {"labels": {}, "annotations": {}}}
    for path in OUR_MARKS:
        patch["metadata"][path[1]][path[2]] = None
    return patch


def _status(entry: ModulePlan, state: ModuleState, version: str | None) -> ModuleStatus:
    return ModuleStatus(entry.module, state, entry.reason, entry.message, version)


def _failed(entry: ModulePlan, error: ReconcilerError) -> ModuleStatus:
    """The module's Error status; the error is kept with its type and retry delay."""
    reason = Reason.RETRYING if not isinstance(error, PermanentError) else Reason.FAILED
    return ModuleStatus(
        entry.module,
        ModuleState.ERROR,
        reason,
        str(error),
        entry.from_version,
        ModuleError.of(error),
    )


#: What applying a planned object change did to the object.
_APPLIED = {ObjectAction.CREATE: ChangeAction.CREATED, ObjectAction.UPDATE: ChangeAction.CONFIGURED}


def sync_runtime(
    cluster: Cluster,
    repo: ConfigRepo,
    runtime_name: str,
    *,
    now: datetime,
    commit: str = "",
    dry_run: bool = False,
    renderer: Renderer | None = None,
) -> SyncResult:
    """Resolve, render, observe, plan and (unless ``dry_run``) carry out one runtime."""
    runtime = repo.runtimes[runtime_name]
    resolution = resolve_runtime(repo, runtime)
    desired = desired_modules(repo, resolution, renderer or Renderer(repo))
    context = Context.of(repo, runtime.name, now)
    lifecycle = Lifecycle(
        cluster,
        system_namespace=repo.settings.system_namespace,
        commit=commit,
        events=repo.settings.kubernetes_events,
    )
    return lifecycle.sync(context, desired, dry_run=dry_run)
