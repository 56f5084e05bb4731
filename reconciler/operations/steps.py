"""Steps: small, idempotent, named units of an operation (O1), and the built-in ones.

A step is a class with a ``name``, a ``domain`` and a ``description`` (the docs' table is made
from them) and a ``run(operation, context) -> StepResult``. It may ask to be retried (the stage
then starts again from its first step after the delay) or fail the operation. Steps that touch
the cluster get it from the context; ``Resolve_Kubeconfig`` opens it at the start of each stage
that needs it, and it lives only in memory, only within that stage (O2). Plugins add steps
through the ``reconciler.steps`` entry point (see docs/runtime-operations.md). Callers: the
engine.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, ClassVar

from reconciler.cluster.api import NO_IDENTITY, Cluster, ClusterIdentity
from reconciler.core.durations import duration_text
from reconciler.core.head import head_text
from reconciler.core.live import held_text
from reconciler.core.model import ClusterAccess, ConfigRepo, RetryLimits, Strategy
from reconciler.core.plan_values import Context, DesiredModule
from reconciler.core.status import ModuleState, ModuleStatus, PassResult, Reason
from reconciler.errors import PermanentError, TransientError
from reconciler.lifecycle.executor import Lifecycle, SyncPart
from reconciler.lifecycle.hooks import HookLedger
from reconciler.lifecycle.live_view import LiveView
from reconciler.operations.model import (
    FenceToken,
    Operation,
    OperationState,
    OperationType,
    RuntimeRecord,
    StepResult,
)
from reconciler.operations.settling import TERMINATION_WAIT_SECONDS, terminating
from reconciler.operations.store import RunLedger

RETRY_PROCESSING = 10.0
RETRY_DELETING = 30.0
#: Module states a deprovision leaves behind (blocked by users' objects, or failed for good).
_LEFT = (ModuleState.DELETING, ModuleState.ERROR)


@dataclass(slots=True)
class StepContext:
    """What steps of one stage share: inputs from git and the clock, and the cluster once
    ``Resolve_Kubeconfig`` opened it. Rebuilt for every stage, never stored."""

    store: RunLedger
    now: Callable[[], datetime]
    owner: str
    lease_seconds: float
    alive: Callable[[str], bool]
    connect: Callable[[ClusterAccess, str], Cluster]
    access: ClusterAccess
    desired: Sequence[DesiredModule]
    planning: Context
    system_namespace: str
    repo: ConfigRepo | None = None
    cluster: Cluster | None = None
    #: Deprovision through another access than the runtime was synced with (``sync
    #: --allow-access-change``); never set by the daemon.
    allow_access_change: bool = False
    #: The live view shared by the stages of one run (one list per kind per run, not per step).
    view: LiveView = field(default_factory=LiveView)
    extra: dict[str, Any] = field(default_factory=dict)
    #: The fence every write of the run to the store carries (a daemon replica's member and
    #: epoch; none for ``reconciler sync``).
    fence: FenceToken | None = None

    def lifecycle(self, operation: Operation, step: str = "") -> Lifecycle:
        """The lifecycle executor on this stage's cluster; ``step``: the step whose kept data
        holds the operation's Helm hook runs (lifecycle.hooks), saved with the operation as
        soon as a hook phase starts or ends."""
        if self.cluster is None:
            raise PermanentError("no cluster in this stage: Resolve_Kubeconfig must run first")
        return Lifecycle(
            self.cluster,
            system_namespace=self.system_namespace,
            commit=head_text(operation.commit),
            view=self.view,
            events=self.repo.settings.kubernetes_events if self.repo is not None else True,
            hooks=self.hook_ledger(operation, step) if step else None,
        )

    def hook_ledger(self, operation: Operation, step: str) -> HookLedger:
        """The hook runs ``step`` kept in ``operation``, saved with it at every change."""

        def persist() -> None:
            operation.data = operation.data.keeping(step, ledger.data())
            self.store.save(operation, self.fence)

        ledger = HookLedger.of(operation.data.kept_by(step), operation.id, persist)
        return ledger


class Step:
    """Base class of steps. Subclasses set the class attributes and implement :meth:`run`."""

    name: ClassVar[str] = ""
    domain: ClassVar[str] = ""
    description: ClassVar[str] = ""
    #: Optional steps can be switched off in Settings (``spec.operations.disabledSteps``).
    optional: ClassVar[bool] = False
    #: O5, "retry without fail": a step that keeps asking to retry past a limit is skipped and
    #: recorded instead of holding its operation. ``True``: the configured limit
    #: (:func:`skip_limit`: ``spec.operations.retryWithoutFail``, else 5 minutes); seconds: a
    #: limit of the step's own (the settings may name the step to change it); ``None``: never.
    retry_without_fail: ClassVar[bool | float | None] = None
    #: Whether the step writes the runtime's record itself, also when it fails (else a failed
    #: operation leaves the runtime in Error with the step's reason).
    records_status: ClassVar[bool] = False
    #: For plugins: the operations, the stage and the step to come after.
    operations: ClassVar[tuple[OperationType, ...]] = ()
    stage: ClassVar[str] = ""
    after: ClassVar[str | None] = None

    def run(self, operation: Operation, context: StepContext) -> StepResult:
        """Do this step's work once."""
        raise NotImplementedError


#: O5: how long a step that retries without fail may retry when nothing else says.
DEFAULT_RETRY_WITHOUT_FAIL = timedelta(minutes=5)
#: Where :func:`skip_limit` found a limit, as ``operations show`` names it.
_SETTING = "spec.operations.retryWithoutFail"


@dataclass(frozen=True, slots=True)
class SkipLimit:
    """How long a step may keep asking to retry before it is skipped (O5), and what says so."""

    after: timedelta
    source: str

    def skipped_text(self, message: str) -> str:
        """A skipped step's message: ``skipped after 15m (retry-without-fail limit, spec...):
        waiting for ...``."""
        return (
            f"skipped after {duration_text(self.after)} (retry-without-fail limit, "
            f"{self.source}): {message}"
        )


def skip_limit(step: type[Step], limits: RetryLimits) -> SkipLimit | None:
    """The limit of ``step`` if it retries without fail (``None``: it never is skipped): the
    settings' limit for its name, else its own, else the settings' default, else
    :data:`DEFAULT_RETRY_WITHOUT_FAIL`."""
    own = step.retry_without_fail
    if own is None or own is False:
        return None
    named = limits.steps.get(step.name)
    if named is not None:
        return SkipLimit(named, f"{_SETTING}.steps.{step.name}")
    if own is not True:
        return SkipLimit(timedelta(seconds=own), "the step's own")
    if limits.default is not None:
        return SkipLimit(limits.default, f"{_SETTING}.default")
    return SkipLimit(DEFAULT_RETRY_WITHOUT_FAIL, "the default")


def _module_errors(result: PassResult) -> StepResult | None:
    """Modules in Error: a failure when one failed for good (a permanent error), else a retry of
    the stage after the longest delay their transient errors asked for (a 429's Retry-After);
    ``None`` when no module is in Error."""
    failed = result.in_state(ModuleState.ERROR)
    if not failed:
        return None
    text = "; ".join(f"{s.module}: {s.message}" for s in failed)
    if any(s.error is not None and s.error.permanent for s in failed):
        return StepResult(error=PermanentError(text))
    asked = [s.error.retry_after for s in failed if s.error and s.error.retry_after is not None]
    return StepResult(f"retrying: {text}", retry_after=max(asked, default=RETRY_PROCESSING))


class Starting(Step):
    """O3: moves the operation to in progress when no other runs on the runtime."""

    name = "Starting"
    domain = "operations"
    description = (
        "Moves the operation from pending to in progress when no other operation is in "
        "progress on the runtime."
    )

    def run(self, operation: Operation, context: StepContext) -> StepResult:
        now = context.now()
        lease = now.timestamp() + context.lease_seconds
        holder = context.store.claim(
            operation.id,
            context.owner,
            now,
            datetime.fromtimestamp(lease, now.tzinfo),
            context.alive,
            context.fence,
        )
        if holder is not None:
            message = f"waiting: {holder} is in progress on {operation.runtime}"
            return StepResult(message, retry_after=5.0)
        operation.state = OperationState.IN_PROGRESS
        operation.owner = context.owner
        return StepResult("in progress")


class ResolveKubeconfig(Step):
    """Opens the cluster for the rest of the stage; credentials stay in memory."""

    name = "Resolve_Kubeconfig"
    domain = "cluster access"
    description = (
        "Reads the runtime's cluster credentials (kubeconfig file, context, Secret or in-"
        "cluster) into memory for this stage only."
    )

    def run(self, operation: Operation, context: StepContext) -> StepResult:
        cluster = context.connect(context.access, operation.runtime)
        identity = cluster.identity or ClusterIdentity.reached_by(context.access.describe())
        record = context.store.runtime(operation.runtime)
        recorded = record.access if record is not None else NO_IDENTITY
        if operation.type is OperationType.DEPROVISION:
            if identity.is_other_than(recorded) and not context.allow_access_change:
                return StepResult(
                    error=PermanentError(
                        f"runtime {operation.runtime} was synced through "
                        f"{recorded.describe()}, this run reaches {identity.describe()}: it is "
                        "not deprovisioned through another access (rehearsals and real clusters "
                        "never mix; sync --allow-access-change to do it anyway)"
                    )
                )
        elif recorded != identity:
            context.store.record_access(operation.runtime, identity, context.fence)
        context.cluster = cluster
        return StepResult(f"using {context.access.describe()} ({identity.describe()})")


class CheckClusterAccess(Step):
    """A cheap read proves the credentials work."""

    name = "Check_Cluster_Access"
    domain = "cluster access"
    description = (
        "Lists the runtime's inventories (read once, used by the steps after it) to prove "
        "the API server answers and the credentials are accepted."
    )

    def run(self, operation: Operation, context: StepContext) -> StepResult:
        assert context.cluster is not None
        context.lifecycle(operation).read_inventories(operation.runtime)
        return StepResult("the API server answers")


class PlanChanges(Step):
    """Observes the cluster and records what will change (no write)."""

    name = "Plan_Changes"
    domain = "lifecycle"
    description = (
        "Observes the cluster and plans each module (install, upgrade, no downgrade, "
        "windows, removals); records the plan in the operation."
    )

    def run(self, operation: Operation, context: StepContext) -> StepResult:
        result = context.lifecycle(operation).sync(context.planning, context.desired, dry_run=True)
        planned = tuple(m.summary() for m in result.plan.modules)
        operation.data = replace(operation.data, plan=planned)
        changing = sum(1 for m in result.plan.modules if m.changes_anything)
        return StepResult(f"{changing} of {len(result.plan.modules)} modules change")


class EnsureSystemNamespace(Step):
    """The namespace that holds the inventories."""

    name = "Ensure_System_Namespace"
    domain = "cluster"
    description = "Creates the system namespace (inventories live there) when it is missing."

    def run(self, operation: Operation, context: StepContext) -> StepResult:
        context.lifecycle(operation).ensure_namespace(context.system_namespace)
        return StepResult(f"namespace {context.system_namespace} exists")


class ApplyModules(Step):
    """L1, L3-L6, L10: every desired module, in dependency order."""

    name = "Apply_Modules"
    domain = "lifecycle"
    description = (
        "Applies each module in dependency order (CRDs first, then the rest, then its "
        "default configuration once); upgrades prune from the inventory; a chart's pre- and "
        "post-install or upgrade hooks run around its objects (kept as the step's data)."
    )

    def run(self, operation: Operation, context: StepContext) -> StepResult:
        result = context.lifecycle(operation, self.name).sync(
            context.planning, context.desired, part=SyncPart.DESIRED
        )
        operation.data = replace(operation.data, applied=result.outcome)
        return _module_errors(result.outcome) or StepResult(
            f"{len(result.modules)} modules applied"
        )


class CheckModulesReady(Step):
    """L2: waits until every module is Ready (or deliberately held)."""

    name = "Check_Modules_Ready"
    domain = "lifecycle"
    description = (
        "Waits until every module is Ready: CRDs Established and the operator workload "
        "available (the default configuration's status does not count)."
    )

    def run(self, operation: Operation, context: StepContext) -> StepResult:
        waiting = operation.data.applied.in_state(ModuleState.PROCESSING)
        if waiting:
            text = ", ".join(f"{m.module} ({m.reason})" for m in waiting)
            return StepResult(f"waiting for {text}", retry_after=RETRY_PROCESSING)
        return StepResult("every module is Ready or held")


class RemoveModules(Step):
    """L7-L9: modules that left git, by the strategy in their inventory."""

    name = "Remove_Modules"
    domain = "lifecycle"
    description = (
        "Removes modules that left git by their recorded strategy: Ignore releases them, "
        "CreateAndDelete waits for their custom resources, then deletes them in reverse "
        "order."
    )

    def run(self, operation: Operation, context: StepContext) -> StepResult:
        result = context.lifecycle(operation, self.name).sync(
            context.planning, context.desired, part=SyncPart.REMOVALS
        )
        operation.data = replace(operation.data, removals=result.outcome)
        errors = _module_errors(result.outcome)  # never "removed" while a removal failed half-way
        if errors is not None:
            return errors
        deleting = result.outcome.in_state(ModuleState.DELETING)
        if deleting:
            return StepResult("; ".join(s.message for s in deleting), retry_after=RETRY_DELETING)
        return StepResult(f"{len(result.modules)} modules removed or released")


class RecordStatus(Step):
    """Writes the runtime's state for ``reconciler status``."""

    name = "Record_Status"
    domain = "operations"
    records_status = True
    description = (
        "Records each module's state and the runtime's (its worst module's) with the commit."
    )

    def run(self, operation: Operation, context: StepContext) -> StepResult:
        before = context.store.runtime(operation.runtime)
        runtime = context.repo.runtimes.get(operation.runtime) if context.repo else None
        in_git = runtime is not None and runtime.suspend
        if context.planning.suspended and not in_git and before is not None:
            # reconciler suspend: the store's suspension says so while it lasts, and the record
            # keeps what runs there
            kept = replace(before, commit=operation.commit, updated=context.now())
            context.store.put_runtime(kept, context.fence)
            return StepResult(f"runtime {kept.state}: suspended, {kept.message}")
        suspended = context.planning.suspended
        record = RuntimeRecord.of(operation, context.now(), suspended=suspended, before=before)
        context.store.put_runtime(record, context.fence)
        return StepResult(f"runtime {record.state}: {record.message}")


class DeleteDefaultConfigurations(Step):
    """Deprovision: the default configurations we created go first."""

    name = "Delete_Default_Configurations"
    domain = "lifecycle"
    description = (
        "Deletes the default configuration resources the reconciler created (only those, "
        "and only while they carry its labels)."
    )

    def run(self, operation: Operation, context: StepContext) -> StepResult:
        lifecycle = context.lifecycle(operation)
        count = 0
        for inventory in lifecycle.read_inventories(operation.runtime).values():
            if inventory.strategy is Strategy.IGNORE:
                continue  # L7: an Ignore module has nothing deleted, its CR neither
            ref = inventory.default_configuration
            if ref is not None and lifecycle.labelled_ours(ref, inventory):
                count += bool(lifecycle.delete(ref))
        return StepResult(f"{count} default configuration(s) deleted")


class WaitForManagedResources(Step):
    """Deprovision: waits for users' resources of the modules' kinds; retries without fail."""

    name = "Wait_For_Managed_Resources"
    domain = "lifecycle"
    description = (
        "Waits while custom resources of the modules' kinds exist, or objects of the modules "
        "are being deleted (names them, and the finalizers that hold them); retries "
        "without fail: skipped past its limit (5 minutes unless spec.operations."
        "retryWithoutFail sets another), so that the modules nothing blocks are deleted."
    )
    retry_without_fail = True

    def run(self, operation: Operation, context: StepContext) -> StepResult:
        live = context.lifecycle(operation).observe(operation.runtime, [])
        blocked = [(name, m) for name, m in sorted(live.items()) if m.blocking_total]
        if blocked:
            text = "; ".join(
                f"{name}: {m.blocking_total} object(s), e.g. "
                + ", ".join(
                    held_text(r, m.held[r]) if r in m.held else r.subject for r in m.blocking[:3]
                )
                for name, m in blocked
            )
            operation.data = replace(operation.data, blocking=text)
            return StepResult(f"waiting for {text}", retry_after=RETRY_DELETING)
        return StepResult("no managed resources left")


class DeleteModuleManifests(Step):
    """Deprovision: every module's objects in reverse order, CRDs last, where nothing blocks."""

    name = "Delete_Module_Manifests"
    domain = "lifecycle"
    description = (
        "Deletes each module's objects in reverse apply order, CRDs last, for modules "
        "nothing blocks any more; releases Ignore modules; asks again (never waits) for "
        "CRDs and Namespaces the server is still deleting, 10 seconds at most; a transient "
        "failure runs the stage again."
    )

    def run(self, operation: Operation, context: StepContext) -> StepResult:
        result = context.lifecycle(operation, self.name).sync(
            context.planning, [], part=SyncPart.REMOVALS
        )
        operation.data = replace(operation.data, removals=result.outcome)
        errors = _module_errors(result.outcome)
        if errors is not None and errors.retry_after is not None:
            return errors  # a transient failure: the stage runs again
        left = [s.module for s in result.modules if s.state in _LEFT]
        going = self._terminating(operation)
        remaining = _remaining(operation, self.name, context.now(), TERMINATION_WAIT_SECONDS)
        if going and remaining > 0:  # the server is still deleting them: not yet
            return StepResult(
                f"waiting for the server to delete what {', '.join(going)} left",
                retry_after=min(remaining, RETRY_PROCESSING),
            )
        if left:
            return StepResult(f"not deleted, left for a new deprovision: {', '.join(left)}")
        return StepResult(f"{len(result.modules)} modules deleted or released")

    def _terminating(self, operation: Operation) -> list[str]:
        """The modules still Deleting whose CRDs or Namespaces a pass of this step deleted
        (this one, or an earlier one: kept in the step's data)."""
        data = operation.data
        deleting = {m.module for m in data.removals.modules if m.state is ModuleState.DELETING}
        before = data.kept_by(self.name).get("terminating") or []
        going = sorted(deleting & {*before, *terminating(data)})
        if going != before:
            operation.data = data.keeping(self.name, {"terminating": going})
        return going


def _remaining(operation: Operation, step: str, now: datetime, seconds: float) -> float:
    """Seconds left of ``seconds`` since ``step`` of ``operation`` first started."""
    first = next(
        (t.first_started for s in operation.stages for t in s.steps if t.name == step), None
    )
    return seconds if first is None else seconds - (now - first).total_seconds()


class DeleteInventory(Step):
    """Deprovision: inventories of modules that are gone (the rest stay for a new deprovision)."""

    name = "Delete_Inventory"
    domain = "lifecycle"
    description = (
        "Checks that the inventories of deleted modules are gone; those of modules still "
        "blocked are kept for a new deprovision."
    )

    def run(self, operation: Operation, context: StepContext) -> StepResult:
        lifecycle = context.lifecycle(operation)
        left = sorted(lifecycle.read_inventories(operation.runtime, fresh=True))
        operation.data = replace(operation.data, inventories_left=tuple(left))
        return StepResult(f"inventories left: {', '.join(left)}" if left else "no inventory left")


class RemoveRuntimeRecord(Step):
    """Deprovision: forgets the runtime once nothing of it is left; otherwise the operation
    fails, naming what is left and why, and the runtime stays Deleting for a new deprovision."""

    name = "Remove_Runtime_Record"
    domain = "operations"
    records_status = True
    description = (
        "Removes the runtime's record from the state store when no inventory is left in its "
        "cluster; otherwise keeps it as Deleting and fails the operation, naming what is left "
        "and why (the next sync starts a new deprovision)."
    )

    def run(self, operation: Operation, context: StepContext) -> StepResult:
        left = operation.data.inventories_left
        if not left:
            context.store.forget_runtime(operation.runtime, context.fence)
            return StepResult("runtime record removed")
        removals = operation.data.removals.modules
        why = left_text(left, removals)
        context.store.put_runtime(
            RuntimeRecord(
                operation.runtime,
                ModuleState.DELETING,
                Reason.WAITING_FOR_RESOURCES,
                why,
                operation.commit,
                context.now(),
                tuple(m for m in removals if m.state),
            ),
            context.fence,
        )
        return StepResult(
            error=PermanentError(
                f"{why}; the runtime stays Deleting and the next sync starts a new deprovision"
            )
        )


def left_text(left: Sequence[str], removals: Sequence[ModuleStatus]) -> str:
    """``left in the cluster: widget (why), ...``: each module whose inventory is left, with the
    message its removal reported."""
    why = {m.module: m.message for m in removals}
    parts = [f"{name} ({why[name]})" if why.get(name) else name for name in left]
    return f"left in the cluster: {', '.join(parts)}"


def transient_retry(error: TransientError) -> StepResult:
    """A transient error of a step: try the stage again after the error's delay."""
    return StepResult(f"retrying: {error}", retry_after=error.retry_after)


_LIFECYCLE_STEPS = (ResolveKubeconfig, EnsureSystemNamespace, ApplyModules, CheckModulesReady)

#: Operation type -> its stages, each a list of step classes, in order (the docs' table).
BUILTIN_STAGES: dict[OperationType, list[tuple[str, list[type[Step]]]]] = {
    OperationType.PROVISION: [
        ("starting", [Starting]),
        ("plan", [ResolveKubeconfig, CheckClusterAccess, PlanChanges]),
        ("apply", list(_LIFECYCLE_STEPS)),
        ("finish", [RecordStatus]),
    ],
    OperationType.UPDATE: [
        ("starting", [Starting]),
        ("plan", [ResolveKubeconfig, CheckClusterAccess, PlanChanges]),
        ("apply", list(_LIFECYCLE_STEPS)),
        ("remove", [ResolveKubeconfig, RemoveModules]),
        ("finish", [RecordStatus]),
    ],
    OperationType.DEPROVISION: [
        ("starting", [Starting]),
        ("configurations", [ResolveKubeconfig, CheckClusterAccess, DeleteDefaultConfigurations]),
        ("resources", [ResolveKubeconfig, WaitForManagedResources]),
        ("modules", [ResolveKubeconfig, DeleteModuleManifests, DeleteInventory]),
        ("finish", [RemoveRuntimeRecord]),
    ],
}
