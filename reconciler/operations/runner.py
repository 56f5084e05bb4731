"""Runs the right operation for each runtime: provision, update or deprovision.

A runtime with an unfinished operation resumes it (after a crash, at its first unfinished
stage); a runtime in git that the store does not know is provisioned, a known one updated; a
runtime the store knows but git no longer lists is deprovisioned. Callers: ``reconciler sync``;
later the daemon.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime

from reconciler.cluster.api import Cluster
from reconciler.errors import NotFoundError
from reconciler.lifecycle import desired_modules
from reconciler.model import ClusterAccess, ConfigRepo
from reconciler.operations.engine import LEASE_SECONDS, Engine, RunOutcome
from reconciler.operations.model import Operation, OperationType
from reconciler.operations.steps import StepContext
from reconciler.operations.store import StateStore
from reconciler.plan import Context
from reconciler.render import Renderer
from reconciler.resolve import resolve_runtime

Connect = Callable[[ClusterAccess, str], Cluster]


class Runner:
    """Operations for the runtimes of one repo, against one store."""

    def __init__(
        self,
        store: StateStore,
        engine: Engine,
        repo: ConfigRepo,
        connect: Connect,
        clock: Callable[[], datetime],
        commit: str = "",
    ) -> None:
        self.store = store
        self.engine = engine
        self.repo = repo
        self.connect = connect
        self.clock = clock
        self.commit = commit
        self._renderer = Renderer(repo)

    def removed_runtimes(self) -> list[str]:
        """Runtimes the store knows that git no longer lists."""
        known = {r.runtime for r in self.store.runtimes()}
        return sorted(known - set(self.repo.runtimes))

    def operation_for(self, runtime: str) -> Operation:
        """The unfinished operation of ``runtime``, or a new one of the right kind."""
        current = self.store.unfinished(runtime)
        if current is not None:
            return current
        if runtime in self.repo.runtimes:
            known = any(r.runtime == runtime for r in self.store.runtimes())
            kind = OperationType.UPDATE if known else OperationType.PROVISION
            access = self.repo.runtimes[runtime].cluster
            return self.engine.create(
                runtime, kind, commit=self.commit, data={"cluster": asdict(access)}
            )
        access_data = self._last_access(runtime)
        return self.engine.create(
            runtime, OperationType.DEPROVISION, commit=self.commit, data={"cluster": access_data}
        )

    def run(self, operation: Operation) -> RunOutcome:
        """Run ``operation`` once (until it finishes or must wait)."""
        return self.engine.run(operation, lambda: self._context(operation))

    def _context(self, operation: Operation) -> StepContext:
        runtime = self.repo.runtimes.get(operation.runtime)
        if runtime is not None and operation.type is not OperationType.DEPROVISION:
            desired = desired_modules(
                self.repo, resolve_runtime(self.repo, runtime), self._renderer
            )
            planning = Context(
                runtime.name,
                self.clock(),
                runtime.maintenance_window,
                runtime.suspend,
                {n: m.depends_on for n, m in self.repo.modules.items()},
            )
        else:
            desired = []
            planning = Context(
                operation.runtime,
                self.clock(),
                dependencies={n: m.depends_on for n, m in self.repo.modules.items()},
            )
        access = ClusterAccess(**operation.data.get("cluster", {}))
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
        )

    def _last_access(self, runtime: str) -> dict[str, object]:
        for operation in self.store.operations(runtime=runtime, limit=20):
            if "cluster" in operation.data:
                found: dict[str, object] = operation.data["cluster"]
                return found
        raise NotFoundError(f"runtime {runtime}: no record of how to reach its cluster")
