"""Runs the right operation for each runtime: provision, update or deprovision.

A runtime with an unfinished operation resumes it (after a crash, at its first unfinished
stage); a runtime in git that the store does not know is provisioned, a known one updated; a
runtime the store knows but git no longer lists is deprovisioned. A runtime is known from the
moment its first operation is created (not when it finishes), so a runtime whose provision was
interrupted and which then left git is still deprovisioned from whatever its inventories say;
an unfinished provision or update of a runtime that left git (or a deprovision of one that came
back) is superseded. Callers: ``reconciler sync``, the daemon.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from reconciler.cluster.api import AccessKind, Cluster
from reconciler.core.head import Head
from reconciler.core.model import ClusterAccess, ConfigRepo
from reconciler.core.plan_values import Context, DesiredModule, ModuleAction, desired_modules
from reconciler.core.render import Renderer
from reconciler.core.resolve import resolve_runtime
from reconciler.core.status import ModuleState, Reason
from reconciler.core.templates import ENGINE_DEFAULT, Capabilities, gets_a_chart
from reconciler.errors import NotFoundError, ReconcilerError
from reconciler.lifecycle.live_view import LiveView
from reconciler.operations.capabilities import ChartRendering, fetch_capabilities
from reconciler.operations.engine import LEASE_SECONDS, Engine, RunOutcome
from reconciler.operations.model import (
    Operation,
    OperationData,
    OperationState,
    OperationType,
    RuntimeRecord,
)
from reconciler.operations.steps import StepContext
from reconciler.operations.store import OperationLedger, RuntimeRecords, SyncLedger

Connect = Callable[[ClusterAccess, str], Cluster]


class Runner:
    """Operations for the runtimes of one repo, against one store."""

    def __init__(
        self,
        store: SyncLedger,
        engine: Engine,
        repo: ConfigRepo,
        connect: Connect,
        clock: Callable[[], datetime],
        commit: Head | None = None,
        *,
        allow_access_change: bool = False,
        charts: ChartRendering | None = None,
    ) -> None:
        self.store = store
        self.allow_access_change = allow_access_change
        self.engine = engine
        self.repo = repo
        self.connect = connect
        self.clock = clock
        self.commit = commit
        self._renderer = Renderer(repo)
        #: Renders a runtime's charts again for what its cluster says (none: as read).
        self.charts = charts
        #: Operations this runner created (the others it returned were resumed).
        self._created: set[str] = set()

    def removed_runtimes(self) -> list[str]:
        """Runtimes the store knows that git no longer lists."""
        return sorted(set(self.store.runtime_names()) - set(self.repo.runtimes))

    def operation_for(self, runtime: str) -> Operation:
        """The unfinished operation of ``runtime``, or a new one of the right kind."""
        in_git = runtime in self.repo.runtimes
        current = self.store.unfinished(runtime)
        if current is not None:
            removing = current.type is OperationType.DEPROVISION
            if in_git != removing or self._held_elsewhere(current):
                return current
            self._supersede(current, in_git)
        if in_git:
            kind = OperationType.UPDATE
            if self.store.runtime(runtime) is None:
                kind = OperationType.PROVISION
                self.store.put_runtime(self._first_record(runtime), self.engine.token)
            data = OperationData(access=self.repo.runtimes[runtime].cluster)
            return self._created_one(
                self.engine.create(runtime, kind, commit=self.commit, data=data)
            )
        data = OperationData(access=recorded_access(self.store, runtime))
        operation = self.engine.create(
            runtime, OperationType.DEPROVISION, commit=self.commit, data=data
        )
        return self._created_one(operation)

    def _created_one(self, operation: Operation) -> Operation:
        self._created.add(operation.id)
        return operation

    def follow_up(self, finished: Operation) -> Operation | None:
        """The operation for the repo's current state after a *resumed* operation finished.

        A resumed operation keeps the plan it recorded when it started (O2), so a change made
        in git while it waited (a module removed, a version bumped) is not in it: the runtime
        gets an update right after, in the same run, instead of at the next sync. None when
        ``finished`` was created by this runner, did not succeed, removed its runtime, or
        planned for the modules and versions git wants now.
        """
        if (
            finished.id in self._created
            or finished.state is not OperationState.SUCCEEDED
            or finished.type is OperationType.DEPROVISION
            or finished.runtime not in self.repo.runtimes
            or self._planned_as_now(finished)
        ):
            return None
        return self.operation_for(finished.runtime)

    def _planned_as_now(self, operation: Operation) -> bool:
        """Whether ``operation``'s recorded plan kept the modules (and versions) git wants now."""
        resolution = resolve_runtime(self.repo, self.repo.runtimes[operation.runtime])
        wanted = {m.name: m.version for m in resolution.modules}
        kept = {p.module: p.to_version for p in operation.data.plan if p.action not in _REMOVALS}
        return kept.keys() == wanted.keys() and all(
            version in (None, wanted[name]) for name, version in kept.items()
        )

    def _held_elsewhere(self, operation: Operation) -> bool:
        """Another live process runs it: leave it to that process (O3)."""
        lease = operation.lease_until
        return (
            operation.state is OperationState.IN_PROGRESS
            and operation.owner not in ("", self.engine.owner)
            and lease is not None
            and lease > self.clock()
            and self.engine.alive(operation.owner)
        )

    def _supersede(self, operation: Operation, in_git: bool) -> None:
        reason = "is back in git" if in_git else "left git"
        operation.state = OperationState.FAILED
        operation.message = f"superseded: runtime {operation.runtime} {reason}"
        operation.updated = self.clock()
        self.store.save(operation, self.engine.token)

    def _first_record(self, runtime: str) -> RuntimeRecord:
        return RuntimeRecord(
            runtime,
            ModuleState.PROCESSING,
            Reason.PROVISIONING,
            "first operation under way",
            self.commit,
            self.clock(),
        )

    def run(self, operation: Operation) -> RunOutcome:
        """Run ``operation`` once (until it finishes or must wait)."""
        view = LiveView()  # read once per run, shared by its stages
        desired = functools.cache(lambda: self._desired(operation))  # the same for every stage
        return self.engine.run(operation, lambda: self._context(operation, view, desired()))

    def _leaving(self, operation: Operation) -> bool:
        """Whether the operation takes its runtime away (a deprovision, or gone from git)."""
        gone = operation.runtime not in self.repo.runtimes
        return gone or operation.type is OperationType.DEPROVISION

    def _desired(self, operation: Operation) -> list[DesiredModule]:
        """The modules git wants on the operation's runtime (none when it leaves)."""
        if self._leaving(operation):
            return []
        resolution = resolve_runtime(self.repo, self.repo.runtimes[operation.runtime])
        if self.charts is None or not gets_a_chart(self.repo, operation.runtime):
            return desired_modules(self.repo, resolution, self._renderer)
        seen = self._capabilities(operation)
        repo = self.charts.for_cluster(self.repo, operation.runtime, seen)
        renderer = self._renderer if repo is self.repo else Renderer(repo)
        return desired_modules(repo, resolution, renderer)

    def _capabilities(self, operation: Operation) -> Capabilities:
        """What the runtime's cluster serves now, recorded when it changed; what was recorded
        (else the engine's defaults) for a snapshot, and when the cluster cannot be reached
        (its steps say why)."""
        runtime = operation.runtime
        recorded = self.store.capabilities().get(runtime)
        try:
            cluster = self.connect(operation.data.access or ClusterAccess(), runtime)
            if cluster.identity.kind is AccessKind.SNAPSHOT:  # a recording has no version
                return recorded or ENGINE_DEFAULT
            seen = fetch_capabilities(cluster, self.clock())
        except ReconcilerError:
            return recorded or ENGINE_DEFAULT
        if not seen.same_as(recorded):
            self.store.record_capabilities(runtime, seen)
        return seen

    def _context(
        self, operation: Operation, view: LiveView, desired: list[DesiredModule]
    ) -> StepContext:
        leaving = self._leaving(operation)
        planning = Context.of(self.repo, operation.runtime, self.clock(), leaving=leaving)
        if operation.runtime in self.store.suspensions():  # reconciler suspend
            planning = replace(planning, suspended=True)
        access = operation.data.access or ClusterAccess()
        return StepContext(
            store=self.store,
            now=self.clock,
            owner=self.engine.owner,
            lease_seconds=LEASE_SECONDS,
            alive=self.engine.alive,
            connect=self.connect,
            access=access,
            desired=desired,
            planning=planning,
            system_namespace=self.repo.settings.system_namespace,
            repo=self.repo,
            allow_access_change=self.allow_access_change,
            view=view,
            fence=self.engine.token,
        )


def recorded_access(store: OperationLedger, runtime: str) -> ClusterAccess:
    """How the last operation of ``runtime`` reached its cluster (a runtime that left git)."""
    for operation in store.operations(runtime=runtime, limit=20):
        if operation.data.access is not None:
            return operation.data.access
    raise NotFoundError(f"runtime {runtime}: no record of how to reach its cluster")


def deployed(store: RuntimeRecords) -> dict[str, dict[str, str]]:
    """Runtime -> module -> version, as the store knows them (what the brake counts from)."""
    return store.deployed()


_REMOVALS = frozenset(
    {ModuleAction.REMOVE_IGNORE, ModuleAction.REMOVE_DELETE, ModuleAction.BLOCKED_DELETION}
)
