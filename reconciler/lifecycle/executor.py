"""Module lifecycle on one runtime: observe the cluster, plan, carry the plan out (L1-L15).

:class:`Lifecycle` works through the :class:`~reconciler.cluster.api.Cluster` interface only
and wires the rooms of this package together for a pass:

- :mod:`~reconciler.lifecycle.observe` reads inventories, the desired and recorded objects, the
  running versions and, for modules being removed, the instances that block their deletion,
  into the pass's :mod:`~reconciler.lifecycle.live_view`; a failing read raises before anything
  is changed (S2);
- the pure :func:`reconciler.core.plan.plan` decides;
- :mod:`~reconciler.lifecycle.apply` installs in named stages (CRDs and Namespaces first,
  Established before the rest, modules after their dependencies are Ready, the inventory
  written before objects so a crash never loses track of them) and
  :mod:`~reconciler.lifecycle.remove` prunes and deletes in reverse order with CRDs last, only
  objects the inventory lists and that carry our label (S1), through
  :mod:`~reconciler.lifecycle.write`; :mod:`~reconciler.lifecycle.events` records the Events.

A failure in one module is that module's Error state, its error kept with its type and retry
delay; the others go on. ``execute`` returns the pass's
:class:`~reconciler.core.status.PassResult`: each module's status and the change set (what was
done to each object: created, configured, unchanged, pruned, deleted, released). Callers:
``reconciler sync`` and ``diff``, the operations steps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import Enum

from reconciler.cluster.api import Cluster
from reconciler.core.hooks import plan_hooks
from reconciler.core.inventory import Inventory
from reconciler.core.model import FIELD_MANAGER, ConfigRepo
from reconciler.core.objects import ObjectRef
from reconciler.core.plan import plan
from reconciler.core.plan_values import (
    Context,
    DesiredModule,
    LiveModule,
    ModulePlan,
    Plan,
    desired_modules,
)
from reconciler.core.render import Renderer
from reconciler.core.resolve import resolve_runtime
from reconciler.core.status import ModuleState as ModuleState
from reconciler.core.status import ModuleStatus as ModuleStatus
from reconciler.core.status import PassResult
from reconciler.core.windows import in_window
from reconciler.errors import ReconcilerError
from reconciler.lifecycle.apply import Installer
from reconciler.lifecycle.enforce import Enforcer
from reconciler.lifecycle.events import EventRecorder
from reconciler.lifecycle.hooks import HookLedger
from reconciler.lifecycle.live_view import LiveView, Planned
from reconciler.lifecycle.observe import InventoryBranch, Observer
from reconciler.lifecycle.outcome import ChangeSet, failed_status, upgrade_status
from reconciler.lifecycle.preflight import Preflight
from reconciler.lifecycle.remove import Remover, dependents_left, waiting_for_dependents
from reconciler.lifecycle.write import Writer

#: The time put in a plan's facts to compare them without it.
_NO_TIME = datetime.min.replace(tzinfo=UTC)


class SyncPart(Enum):
    """Which modules of a plan a sync carries out."""

    #: Every module of the plan.
    ALL = "all"
    #: Only the modules git wants (installs, upgrades, reconfigurations).
    DESIRED = "desired"
    #: Only the modules git dropped (removals).
    REMOVALS = "removals"

    def keeps(self, entry: ModulePlan, wanted: set[str]) -> bool:
        """Whether ``entry`` is carried out in this part (``wanted``: the desired modules)."""
        if self is SyncPart.ALL:
            return True
        return (entry.module in wanted) == (self is SyncPart.DESIRED)


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
        hooks: HookLedger | None = None,
    ) -> None:
        self.cluster = cluster
        #: The hook runs of this operation (lifecycle.hooks); one of its own when none given.
        self.hooks = hooks if hooks is not None else HookLedger(commit or "sync")
        self.system_namespace = system_namespace
        self.field_manager = field_manager
        self.commit = commit
        #: What this pass has listed, read and written (shared by the stages of one run).
        self.view = view if view is not None else LiveView()
        self.observer = Observer(cluster, self.view, system_namespace=system_namespace)
        self.writer = Writer(self.observer, field_manager=field_manager)
        #: L14 before a module version's first write; replaces found for ``diff`` and sync.
        self.preflight = Preflight(self.observer, field_manager=field_manager)
        #: Record a Kubernetes Event on each module changed, and on each object that blocks a
        #: removal (``spec.kubernetesEvents`` of the settings), where the cluster can.
        self.recorder = EventRecorder(
            cluster, enabled=events, field_manager=field_manager, system_namespace=system_namespace
        )
        self.events = self.recorder.enabled

    # -- the whole sync ------------------------------------------------------------------------

    def sync(
        self,
        context: Context,
        desired: Sequence[DesiredModule],
        *,
        dry_run: bool = False,
        part: SyncPart = SyncPart.ALL,
    ) -> SyncResult:
        """Observe, plan and (unless ``dry_run``) carry the plan out; ``part`` carries out
        only the modules git wants, or only those it dropped."""
        live, the_plan = self._observed_plan(context, desired)
        the_plan = self.preflight.replaces(the_plan, desired)
        if part is not SyncPart.ALL:
            wanted = {d.name for d in desired}
            kept = tuple(m for m in the_plan.modules if part.keeps(m, wanted))
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
        the_plan = plan_hooks(plan(context, desired, live), desired, live)
        self.view.planned = Planned(self.view.generation, desired, key, live, the_plan)
        return live, the_plan

    # -- reads and writes callers ask for ------------------------------------------------------

    def observe(self, runtime: str, desired: Sequence[DesiredModule]) -> dict[str, LiveModule]:
        """What the cluster shows for every desired or recorded module; raises on a failed read."""
        return self.observer.observe(runtime, desired)

    def read_inventories(self, runtime: str, *, fresh: bool = False) -> dict[str, Inventory]:
        """Every inventory of ``runtime`` (listed once per pass, or again when ``fresh``)."""
        return self.observer.read_inventories(runtime, fresh=fresh)

    def inventory_tree(self, runtime: str) -> list[InventoryBranch]:
        """Each recorded module with the live body of every object its inventory lists."""
        return self.observer.inventory_tree(runtime)

    def labelled_ours(self, ref: ObjectRef, inventory: Inventory) -> bool:
        """Whether ``ref`` exists and carries our labels for the inventory's module."""
        return self.observer.labelled_ours(ref, inventory)

    def ensure_namespace(self, name: str) -> None:
        """Create a namespace that is missing; never labelled ours, so never deleted (S1)."""
        self.writer.ensure_namespace(name)

    def delete(self, ref: ObjectRef) -> bool:
        """Ask for the deletion of ``ref`` (``False`` when it was gone)."""
        return self.writer.delete(ref)

    # -- execution -----------------------------------------------------------------------------

    def execute(
        self,
        runtime: str,
        the_plan: Plan,
        desired: Sequence[DesiredModule],
        live: Mapping[str, LiveModule],
        dependencies: Mapping[str, tuple[str, ...]] | None = None,
    ) -> PassResult:
        """Carry ``the_plan`` out, module by module; returns each module's status and the
        change set (a module that failed half-way keeps what it did before).

        ``dependencies`` (module -> the modules it depends on) holds a removal back while a
        module that depends on it is still being removed."""
        changes = ChangeSet()
        installer = Installer(
            self.observer,
            self.writer,
            changes,
            commit=self.commit,
            enforcer=Enforcer(self.writer, self.recorder, changes),
            preflight=self.preflight,
            modules={d.name: d for d in desired},
            ledger=self.hooks,
        )
        run = _Pass(
            runtime,
            the_plan,
            {d.name: d for d in desired},
            live,
            installer,
            Remover(self.writer, self.recorder, changes, installer.hooks),
        )
        statuses = run.carry_out(dependencies or {})
        for entry in the_plan.modules:
            status = statuses[entry.module]
            self.recorder.module_pass(entry.module, status.version, changes.of_module(entry.module))
        return PassResult(tuple(statuses.values()), changes.frozen())


@dataclass(slots=True)
class _Pass:
    """One execution of a plan: its modules, what was observed, the stages, the statuses."""

    runtime: str
    plan: Plan
    by_name: Mapping[str, DesiredModule]
    live: Mapping[str, LiveModule]
    installer: Installer
    remover: Remover
    statuses: dict[str, ModuleStatus] = field(default_factory=dict)

    def carry_out(self, dependencies: Mapping[str, tuple[str, ...]]) -> dict[str, ModuleStatus]:
        """Every module of the plan in order (what is not ready yet is left for a later
        pass: this one never waits), then each desired module's final inventory."""
        failed = self.installer.start_all(self.runtime, self.plan, self.by_name, self.live)
        for entry in self.plan.modules:
            status = failed.get(entry.module) or self.module(entry, dependencies)
            self.statuses[entry.module] = status
        for entry in self.plan.modules:
            self.finish(entry)
            self.statuses[entry.module] = upgrade_status(entry, self.statuses[entry.module])
        return self.statuses

    def finish(self, entry: ModulePlan) -> None:
        """A desired module's final inventory written (Error when that failed)."""
        if entry.module not in self.by_name:
            return
        try:
            self.installer.finish(entry)
        except ReconcilerError as error:
            self.statuses[entry.module] = failed_status(entry, error)

    def module(
        self, entry: ModulePlan, dependencies: Mapping[str, tuple[str, ...]]
    ) -> ModuleStatus:
        """Carry out one module's plan; its status (Error when that failed)."""
        module_live = self.live.get(entry.module, LiveModule())
        try:
            waiting = dependents_left(entry, dependencies, self.statuses, self.by_name)
            if waiting:
                return waiting_for_dependents(entry, waiting)
            if entry.module in self.by_name:
                module = self.by_name[entry.module]
                return self.installer.desired(
                    self.runtime, entry, module, module_live, self.statuses
                )
            return self.remover.remove(entry, module_live)
        except ReconcilerError as error:
            return failed_status(entry, error)


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
