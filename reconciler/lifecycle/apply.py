"""Install, upgrade and reconfigure a module as named stages (L1-L3, L5-L7).

:class:`Installer` carries out a desired module's plan entry in stages:

1. :meth:`~Installer.start` - the preflight (L14, :mod:`reconciler.lifecycle.preflight`:
   every kind served or defined by a CRD, what the server can judge dry-run; a refusal fails
   the module with nothing written), the inventory's intent written before any object (a crash
   never loses track of one), then the module's CRDs and Namespaces applied;
2. the module's CRDs Established (asked, never waited for: a pass that finds one not
   Established yet ends the module as Processing, ``WaitingForCRD``, and the next pass, woken
   by the CRD's event in the daemon, goes on), then :meth:`~Installer.dry_run_rest`: what the
   server could judge only now dry-run;
3. :meth:`~Installer.apply_rest` - the module's other objects applied, in plan order (a
   replace: deleted, gone, created again);
4. :meth:`~Installer.create_default_configuration` - created once, after the objects (L3);
5. :meth:`~Installer.prune` - what the new version dropped, deleted or released;
6. :meth:`~Installer.readiness` - L2: every CRD Established and the operator available (asked
   once: not available yet is Processing, ``WaitingForOperator``, for a later pass);
7. :meth:`~Installer.finish` - at the end of the pass, once readiness is known: the final
   inventory written, with the version the module became Ready at (L15: the running version
   the no-downgrade rule judges by, so that an upgrade that never becomes Ready rolls back).

Stage 1 of every module that depends on no other runs for all of them before any module's
next stage (:meth:`~Installer.start_all`), so their CRDs are on their way together. A module
held back (a downgrade, an unknown version, a closed window) or waiting for a dependency to be
Ready is not started. A pass never waits for the cluster (seed 004, idea 5: no waiting inside
the reconciliation loop): what is not there yet ends the module's pass as Processing with a
reason naming it, and the operation's step asks to be run again (woken by the event that
satisfies it, or by a bounded retry). Only a replace waits a little for the old object to go
(:func:`settle`, on a cluster that moves on by itself:
:class:`~reconciler.cluster.api.Settling`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from reconciler.cluster.api import Cluster, Settling
from reconciler.core.enforce import Enforcement
from reconciler.core.health import Health, Judgement
from reconciler.core.hooks import run_kind
from reconciler.core.intent import final_inventory, inventory_intent
from reconciler.core.inventory import Inventory
from reconciler.core.objects import ObjectRef
from reconciler.core.plan_values import (
    DesiredModule,
    LiveModule,
    ModuleAction,
    ModulePlan,
    ObjectAction,
    ObjectChange,
    Plan,
)
from reconciler.core.status import ChangeAction, ModuleError, ModuleState, ModuleStatus, Reason
from reconciler.errors import ConflictError, PermanentError, ReconcilerError
from reconciler.lifecycle.enforce import Enforcer
from reconciler.lifecycle.hooks import HookLedger, HookRunner
from reconciler.lifecycle.observe import Observer
from reconciler.lifecycle.outcome import ChangeSet, failed_status, planned_status
from reconciler.lifecycle.preflight import Preflight
from reconciler.lifecycle.write import Writer

#: Kinds applied in the first stage of an install (L1).
FIRST_KINDS = ("CustomResourceDefinition", "Namespace")
#: Module actions that apply nothing.
HELD = (
    ModuleAction.BLOCKED_DOWNGRADE,
    ModuleAction.BLOCKED_UNKNOWN_VERSION,
    ModuleAction.DEFERRED_WINDOW,
)
#: How long a replace waits for the old object to be gone before it creates the new one.
REPLACE_WAIT_SECONDS = 30.0
#: The reasons of a module whose named objects (``healthChecks``) are not all healthy.
UNHEALTHY = (Reason.WAITING_FOR_HEALTH_CHECKS, Reason.HEALTH_CHECK_FAILED)
SETTLE_FIRST = 0.05
SETTLE_MAX = 1.0

#: What applying a planned object change did to the object.
_APPLIED = {
    ObjectAction.CREATE: ChangeAction.CREATED,
    ObjectAction.UPDATE: ChangeAction.CONFIGURED,
    ObjectAction.REPLACE: ChangeAction.REPLACED,
}


@dataclass(frozen=True, slots=True)
class Started:
    """A module after the first stage of its install: the inventory's intent written, the
    objects to apply by reference, the changes applied already (CRDs and Namespaces)."""

    intent: Inventory
    bodies: dict[ObjectRef, Mapping[str, Any]]
    first: tuple[ObjectChange, ...]
    #: Changes the server could not judge before stage 1 (L14), dry-run before stage 3.
    unchecked: tuple[ObjectChange, ...] = ()


class Installer:
    """Carries out the desired modules of one pass (see the module docstring)."""

    def __init__(
        self,
        observer: Observer,
        writer: Writer,
        changes: ChangeSet,
        *,
        commit: str,
        enforcer: Enforcer | None = None,
        preflight: Preflight | None = None,
        modules: Mapping[str, DesiredModule] | None = None,
        ledger: HookLedger | None = None,
    ) -> None:
        self.observer = observer
        self.writer = writer
        self.changes = changes
        self.commit = commit
        #: Re-asserts and releases enforced configuration fields (stage 5b); none: not done.
        self.enforcer = enforcer
        #: Checks a module version before its first write (L14); none: not checked.
        self.preflight = preflight
        #: The runtime's desired modules by name (the CRDs of a module's dependencies).
        self.modules: Mapping[str, DesiredModule] = modules or {}
        #: What enforcement did per module in this pass, for its status.
        self.enforced: dict[str, Enforcement] = {}
        #: Modules whose first stage ran ahead of the others (see :meth:`start_all`).
        self._started: dict[str, Started] = {}
        #: The final inventory of each module pruned, written by :meth:`finish`.
        self._finals: dict[str, Inventory] = {}
        #: Modules whose readiness was last seen Ready in this pass (L2).
        self._ready: set[str] = set()
        #: Runs the modules' Helm hooks in their phases (lifecycle.hooks).
        self.hooks = HookRunner(
            observer,
            writer,
            ledger if ledger is not None else HookLedger(commit or "sync"),
            lambda pending, seconds: settle(observer.cluster, pending, seconds),
        )

    def start_all(
        self,
        runtime: str,
        the_plan: Plan,
        by_name: Mapping[str, DesiredModule],
        live: Mapping[str, LiveModule],
    ) -> dict[str, ModuleStatus]:
        """Stage 1 of every install that depends on no other module; the modules that failed
        in it, with their Error status."""
        failed: dict[str, ModuleStatus] = {}
        for entry in the_plan.modules:
            module = by_name.get(entry.module)
            if module is None or module.module.depends_on or entry.action in HELD:
                continue
            if module.hooks and (run_kind(entry) or self.hooks.ledger.kind(entry.module)):
                continue  # its pre- hooks first (install)
            try:
                begun = self.start(runtime, entry, module, live.get(entry.module, LiveModule()))
            except ReconcilerError as error:
                failed[entry.module] = failed_status(entry, error)
                continue
            self._started[entry.module] = begun
        return failed

    def desired(
        self,
        runtime: str,
        entry: ModulePlan,
        module: DesiredModule,
        live: LiveModule,
        statuses: Mapping[str, ModuleStatus],
    ) -> ModuleStatus:
        """A desired module's status after this pass: held back, waiting for a dependency to
        be Ready, or installed."""
        if entry.action in (ModuleAction.BLOCKED_DOWNGRADE, ModuleAction.BLOCKED_UNKNOWN_VERSION):
            return planned_status(entry, ModuleState.WARNING, entry.from_version)
        if entry.action is ModuleAction.DEFERRED_WINDOW:
            return planned_status(entry, ModuleState.READY, entry.from_version)
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
        return self.install(runtime, entry, module, live)

    def install(
        self, runtime: str, entry: ModulePlan, module: DesiredModule, live: LiveModule
    ) -> ModuleStatus:
        """The stages of one module's install, from where :meth:`start_all` left it."""
        started = self._started.pop(entry.module, None)
        if started is None:
            before = self.hooks.phase(entry, module.hooks, 0, run_kind(entry))
            if before is not None:
                return before  # nothing of the version written past a pre- hook not done
            started = self.start(runtime, entry, module, live)
        pending = self.observer.unestablished(module)
        if pending:
            stalled = self._stalled(entry, module)
            if stalled is not None:
                return stalled
            message = f"waiting for CRD {', '.join(pending)} to be Established"
            return ModuleStatus(
                entry.module,
                ModuleState.PROCESSING,
                Reason.WAITING_FOR_CRD,
                message,
                entry.to_version,
            )
        self.dry_run_rest(module, started)
        self.apply_rest(entry, started)
        self.create_default_configuration(entry, started)
        final = self.prune(entry, module, started)
        done = self.enforce(module, final)
        self._note_unchanged(entry, started, live, done)
        after = self.hooks.phase(entry, module.hooks, 1, run_kind(entry))
        return after if after is not None else self.readiness(entry, module)

    # -- the stages ----------------------------------------------------------------------------

    def start(
        self, runtime: str, entry: ModulePlan, module: DesiredModule, live: LiveModule
    ) -> Started:
        """Stage 1: the preflight (L14: kinds served, changes dry-run), the inventory's intent
        written (before any object), then the module's CRDs and Namespaces applied."""
        bodies = {ObjectRef.of(o.body): o.body for o in module.objects}
        if module.default_configuration is not None:
            default = module.default_configuration.body
            bodies[ObjectRef.of(default)] = default
        unchecked: tuple[ObjectChange, ...] = ()
        if self.preflight is not None:
            unchecked = self.preflight.check(entry, module, bodies, self.modules)
        stored = live.inventory if live.inventory_stored else None
        intent = inventory_intent(
            runtime, module, live.inventory, self.commit, live.objects, live.running_version
        )
        if entry.changes_anything or intent != stored:
            self.writer.ensure_namespace(self.writer.system_namespace)
            self.writer.write_inventory(intent, stored)
        first = tuple(c for c in entry.changes if c.ref in bodies and c.ref.kind in FIRST_KINDS)
        self._apply(entry.module, bodies, first)
        return Started(intent, bodies, first, unchecked)

    def dry_run_rest(self, module: DesiredModule, started: Started) -> None:
        """Stage 2b (L14): what the server could not judge before stage 1 (kinds of the CRDs
        it applied, objects in Namespaces it creates) dry-run before the rest is written."""
        if self.preflight is None or not started.unchecked:
            return
        for change in started.unchecked:
            if change.ref.namespace:
                self.writer.ensure_namespace(change.ref.namespace)
        self.preflight.dry_run(module, started.bodies, started.unchecked, first_written=True)

    def apply_rest(self, entry: ModulePlan, started: Started) -> None:
        """Stage 3: the module's objects that stage 1 did not apply, in plan order."""
        rest = [
            c
            for c in entry.changes
            if c.ref in started.bodies and c not in started.first and not c.default_configuration
        ]
        self._apply(entry.module, started.bodies, rest)

    def create_default_configuration(self, entry: ModulePlan, started: Started) -> None:
        """Stage 4: the default configuration, when the plan creates it (L3: once)."""
        default = [
            c
            for c in entry.changes
            if c.ref in started.bodies
            and c not in started.first
            and c.default_configuration
            and c.action is ObjectAction.CREATE  # an update: its enforced fields only (5b)
        ]
        self._apply(entry.module, started.bodies, default)

    def prune(self, entry: ModulePlan, module: DesiredModule, started: Started) -> Inventory:
        """Stage 5: what the new version dropped deleted or released (L4); the final inventory
        returned, written by :meth:`finish` (the cluster holds the intent until then)."""
        for change in entry.changes:
            if change.ref not in started.bodies:
                done = self.writer.delete_or_release(change, ChangeAction.PRUNED)
                self.changes.note(entry.module, change.ref, done)
        final = self._finals[entry.module] = final_inventory(started.intent, module, entry.kept)
        return final

    def enforce(self, module: DesiredModule, inventory: Inventory) -> Enforcement | None:
        """Stage 5b: the enforced fields of the default configuration re-asserted, released
        ones handed over (:mod:`reconciler.lifecycle.enforce`); what was done."""
        if self.enforcer is None:
            return None
        done = self.enforcer.enforce(module, inventory)
        if done is not None:
            self.enforced[module.name] = done
        return done

    def readiness(self, entry: ModulePlan, module: DesiredModule) -> ModuleStatus:
        """Stage 6, L2: every CRD Established and the operator workload available; the
        message also says what enforcement did to the configuration in this pass."""
        status = self._readiness(entry, module)
        if status.reason in (Reason.WAITING_FOR_OPERATOR, Reason.STALLED, *UNHEALTHY):
            self._ready.discard(entry.module)
        else:
            self._ready.add(entry.module)
        done = self.enforced.get(entry.module)
        return (
            status if done is None else replace(status, message=f"{status.message}; {done.message}")
        )

    def _readiness(self, entry: ModulePlan, module: DesiredModule) -> ModuleStatus:
        spec = module.module
        health = self.observer.health(module)
        if health.health is Health.FAILED:
            return _health_status(entry, health)
        if not self.observer.operator_available(module):
            stalled = self._stalled(entry, module)
            if stalled is not None:
                return stalled
            waiting = f"{spec.operator_kind} {spec.operator_name} is not available yet"
            message = "; ".join((waiting, *entry.notes))  # what this pass kept or released
            return ModuleStatus(
                entry.module,
                ModuleState.PROCESSING,
                Reason.WAITING_FOR_OPERATOR,
                message,
                entry.to_version,
            )
        if health.health is Health.IN_PROGRESS:
            return _health_status(entry, health)
        reason = Reason.READY if _carried_on(entry) else entry.reason
        message = "; ".join((f"{entry.module} {entry.to_version} is Ready", *entry.notes))
        if entry.kept:
            return ModuleStatus(
                entry.module, ModuleState.WARNING, Reason.CRD_IN_USE, message, entry.to_version
            )
        return ModuleStatus(entry.module, ModuleState.READY, reason, message, entry.to_version)

    def finish(self, entry: ModulePlan) -> None:
        """Stage 7, once the pass knows whether the module became Ready: the final inventory
        written (the cluster holds the intent until then, which lists every object the final
        one does), with the version the module became Ready at when it is (L15). Nothing is
        written when nothing changed."""
        stored = self.observer.recorded_inventory(entry.module)
        final = self._finals.pop(entry.module, stored)
        if final is None or stored is None:
            return
        final = replace(final, enforced=stored.enforced)  # as stage 5b recorded them
        if entry.module in self._ready and final.version == entry.to_version:
            final = replace(final, ready_version=final.version)
        self.writer.write_inventory(final, stored)

    def _stalled(self, entry: ModulePlan, module: DesiredModule) -> ModuleStatus | None:
        """Error, reason Stalled, when what the module waits for will not get ready by itself
        (a progress deadline passed, a CRD's names refused): each named, never waited for in
        silence; a later pass that finds it recovered reports as usual."""
        stalls = self.observer.stalls(module)
        if not stalls:
            return None
        message = f"{entry.module} {entry.to_version} is stalled: {'; '.join(stalls)}"
        return ModuleStatus(
            entry.module,
            ModuleState.ERROR,
            Reason.STALLED,
            message,
            entry.to_version,
            ModuleError(PermanentError, message),
        )

    def _apply(
        self,
        module: str,
        bodies: Mapping[ObjectRef, Mapping[str, Any]],
        changes: Sequence[ObjectChange],
    ) -> None:
        for change in changes:
            if change.action is ObjectAction.REPLACE:
                self._replace(bodies[change.ref])
            else:
                self.writer.apply(bodies[change.ref], take_over=change.takeover)
            self.changes.note(module, change.ref, _APPLIED[change.action])

    def _replace(self, body: Mapping[str, Any]) -> None:
        """Delete the object, wait (:data:`REPLACE_WAIT_SECONDS` at most) until it is gone,
        then create it from ``body``; still there (a finalizer): retried by the next pass."""
        ref = ObjectRef.of(body)
        self.writer.delete(ref)
        settle(
            self.observer.cluster,
            lambda: self.observer.read(ref, fresh=True) is not None,
            REPLACE_WAIT_SECONDS,
        )
        if self.observer.read(ref) is not None:
            raise ConflictError(
                f"{ref.subject} is deleted to be replaced and not gone yet; it is created again "
                "once it is gone"
            )
        self.writer.apply(body)

    def _note_unchanged(
        self, entry: ModulePlan, started: Started, live: LiveModule, done: Enforcement | None
    ) -> None:
        changed = {c.ref for c in entry.changes} | ({done.ref} if done else set())
        for ref in started.bodies:
            if ref not in changed and ref in live.objects:
                self.changes.note(entry.module, ref, ChangeAction.UNCHANGED)


def _health_status(entry: ModulePlan, health: Judgement) -> ModuleStatus:
    """The status of a module whose named objects (``healthChecks``) are not all healthy:
    Error, naming the failed ones (kstatus Failed), else Processing, naming those on their
    way."""
    if health.health is Health.FAILED:
        message = f"{entry.module} {entry.to_version}: health check failed: {health.message}"
        error = ModuleError(PermanentError, message)
        state, reason = ModuleState.ERROR, Reason.HEALTH_CHECK_FAILED
        return ModuleStatus(entry.module, state, reason, message, entry.to_version, error)
    message = "; ".join((f"waiting for {health.message}", *entry.notes))
    reason = Reason.WAITING_FOR_HEALTH_CHECKS
    return ModuleStatus(entry.module, ModuleState.PROCESSING, reason, message, entry.to_version)


def _carried_on(entry: ModulePlan) -> bool:
    """Whether the pass only waited for what an earlier one applied: nothing to change, or an
    install or upgrade begun earlier that has nothing left to apply (L15: not Ready yet)."""
    if entry.action is ModuleAction.UNCHANGED:
        return True
    return entry.action in (ModuleAction.INSTALL, ModuleAction.UPGRADE) and not entry.changes


def settle(cluster: Cluster, pending: Callable[[], bool], seconds: float) -> None:
    """On a cluster that moves on by itself (:class:`~reconciler.cluster.api.Settling`), wait
    while ``pending()`` holds, ``seconds`` at most, asking again at growing intervals (50 ms,
    doubled up to 1 s); elsewhere (in memory, a snapshot) nothing changes while we wait:
    return at once. A pause cut short (the daemon is stopping) ends the wait: the pass goes
    on as after the full wait, so what still waits is retried as usual (at the next start)."""
    if not isinstance(cluster, Settling):
        return
    waited, delay = 0.0, SETTLE_FIRST
    while waited < seconds and pending():
        if not cluster.pause(delay):
            return
        waited += delay
        delay = min(delay * 2, SETTLE_MAX)
