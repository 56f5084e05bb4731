"""The daemon's worker pool, and one runtime's run on it.

Each runtime's operation runs on a bounded pool: one runtime never runs twice at once (a
submit while it runs returns that run, followed by one more when a newer commit asked), slow
clusters do not hold up the others, and a run that waits or fails on a transient error is
retried at the time it asked for. A run's failure is kept per runtime as a
:class:`~reconciler.errors.ReconcilerError` (a bug as an
:class:`~reconciler.errors.InternalError`) for ``/status``; the log names its cause.

Caller: :class:`reconciler.daemon.service.Daemon`.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from reconciler.cluster.api import Cluster
from reconciler.core.health import named_refs
from reconciler.core.model import ClusterAccess, ConfigRepo
from reconciler.core.objects import ObjectRef
from reconciler.core.plan_values import DesiredModule, desired_modules
from reconciler.core.redaction import mask
from reconciler.core.render import Renderer
from reconciler.core.resolve import resolve_runtime
from reconciler.core.status import ModuleState, Reason
from reconciler.daemon.logs import cause
from reconciler.daemon.membership import fenced
from reconciler.daemon.scheduler import retry
from reconciler.daemon.watches import fetch_blocking_kinds
from reconciler.errors import InternalError, ReconcilerError, TransientError
from reconciler.operations.capabilities import ChartRendering
from reconciler.operations.engine import Engine
from reconciler.operations.model import (
    Operation,
    OperationState,
    OperationType,
    operation_limits,
)
from reconciler.operations.report import state_text
from reconciler.operations.runner import Runner
from reconciler.operations.store import load_status

if TYPE_CHECKING:
    from reconciler.daemon.service import Daemon

log = logging.getLogger("reconciler.daemon")


class Workers:
    """The pool of one daemon: which runtime runs, which runs again, and each one's last
    error."""

    def __init__(self, daemon: Daemon, workers: int) -> None:
        self.daemon = daemon
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="reconcile")
        self._running: dict[str, Future[None]] = {}
        self._again: set[str] = set()
        self._lock = threading.Lock()
        #: The error of each runtime's last run (none when it ended without one).
        self.errors: dict[str, ReconcilerError] = {}

    def submit(self, runtime: str, *, newer_commit: bool = False) -> Future[None]:
        """Reconcile ``runtime`` on the pool, or return the run already under way; with
        ``newer_commit`` that run is followed by one more (it may have started on the commit
        before)."""
        with self._lock:
            if self.daemon.stopping.is_set():
                return _not_started(runtime)
            running = self._running.get(runtime)
            if running is not None:
                if newer_commit:
                    self._again.add(runtime)
                return running
            try:
                future = self._pool.submit(self._run, runtime)
            except RuntimeError:  # the pool is shutting down: the next start reconciles it
                return _not_started(runtime)
            self._running[runtime] = future
            return future

    def wait_idle(self) -> None:
        """Wait until no reconcile is running (tests, benchmarks, shutdown)."""
        while True:
            with self._lock:
                running = list(self._running.values())
            if not running:
                return
            for future in running:
                future.result()

    def close(self) -> None:
        """Let running reconciles end (a stopping daemon cuts their waits short) and stop the
        pool; runs queued but not started are dropped (the next start reconciles them)."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _run(self, runtime: str) -> None:
        daemon = self.daemon
        started = daemon.clock()
        try:
            if daemon.stopping.is_set():  # queued before the stop: the next start runs it
                log.info("runtime %s: not started, stopping", runtime)
                return
            self.errors.pop(runtime, None)
            operation = daemon.reconcile(runtime)
            if operation is not None:
                daemon.metrics.operation(operation, daemon.clock() - started)
        except ReconcilerError as error:
            self._failed(runtime, error, error)
        except Exception as error:
            self._failed(runtime, error, InternalError.of(error))
            if daemon.options.debug:
                log.error("runtime %s: traceback", runtime, exc_info=error)
        finally:
            with self._lock:
                self._running.pop(runtime, None)
                if runtime in self._again:
                    self._again.discard(runtime)
                    self._resubmit(runtime)

    def _resubmit(self, runtime: str) -> None:
        if self.daemon.stopping.is_set():  # the next start reconciles it
            log.info("runtime %s: not run again, stopping", runtime)
            return
        try:
            self._running[runtime] = self._pool.submit(self._run, runtime)
        except RuntimeError:  # the pool is shutting down: the next start resumes it
            log.info("runtime %s: not run again, stopping", runtime)

    def _failed(self, runtime: str, raised: BaseException, error: ReconcilerError) -> None:
        daemon = self.daemon
        self.errors[runtime] = error
        daemon.metrics.reconcile_failed(runtime, type(raised).__name__)
        try:
            operation = daemon.store.unfinished(runtime)
        except ReconcilerError:  # the store failed too (it is down): the line without the id
            operation = None
        extra = {"runtime": runtime, "operation": operation.id if operation else ""}
        level = daemon.repeats.level(f"runtime {runtime}", str(error), logging.ERROR)
        if raised is error:
            log.log(level, "runtime %s: %s (%s)", runtime, error, cause(error), extra=extra)
        else:
            log.log(level, "runtime %s: %s", runtime, error, extra=extra)
        if isinstance(error, TransientError):  # retried as it asked, not at the next resync
            retry(daemon, runtime, daemon.clock() + timedelta(seconds=error.retry_after))


def _not_started(runtime: str) -> Future[None]:
    """A cancelled run: the daemon is stopping (the next start reconciles ``runtime``)."""
    log.info("runtime %s: not started, stopping", runtime)
    stopped: Future[None] = Future()
    stopped.cancel()
    return stopped


def run_runtime(daemon: Daemon, runtime: str) -> Operation | None:
    """Run (or resume) ``runtime``'s operation once on the commit in force, if this replica
    owns it; schedule a retry if it waits. None: not this replica's (or no member yet)."""
    daemon.follow_store()  # the commit in force for every replica, not only this one's git
    repo = daemon.state.repo
    membership = daemon.membership
    member = membership.fresh()
    if repo is None or member is None or runtime not in membership.mine(daemon.fleet()):
        return None  # another replica's (or none while the store cannot be reached)
    # a runtime whose rollout wave has not started keeps its previous commit
    repo, commit = daemon.rollouts.desired(runtime, repo, daemon.state.commit)
    epoch = member.epoch
    engine = Engine(
        daemon.store,
        clock=daemon.clock,
        disabled=frozenset(repo.settings.disabled_steps),
        limits=operation_limits(repo.settings),
        retry_limits=repo.settings.retry_limits,
        owner=membership.name,
        alive=membership.alive,
        fence=lambda: membership.fenced(epoch),
        token=membership.token(epoch),
        stopping=daemon.stopping.is_set,
    )

    def fenced_connect(access: ClusterAccess, name: str) -> Cluster:
        cluster = daemon.connect(access, name)
        ours = daemon.watches.own_deletes.around(access.describe())  # no drift (watches)
        return fenced(cluster, lambda: membership.fenced(epoch), daemon.stopping, ours)

    charts = ChartRendering(daemon.renderer, daemon.chart_renders)
    runner = Runner(daemon.store, engine, repo, fenced_connect, daemon.clock, commit, charts=charts)
    outcome = runner.run(runner.operation_for(runtime))
    operation = outcome.operation
    extra = {"runtime": runtime, "operation": operation.id}
    _log_run(daemon, runtime, operation, engine, extra)
    _log_module_errors(daemon, runtime, operation, extra)
    _measure(daemon, runtime, repo, operation, engine)
    try:
        crds = _waits_for_crds(outcome.retry_at, operation)
        _watch(daemon, runtime, repo, operation, crds=crds)
    except Exception as error:  # watches only hasten: the run's outcome stands without them
        shown = mask(str(error))
        log.warning("runtime %s: not watched: %s: %s", runtime, type(error).__name__, shown)
    if outcome.retry_at is not None:
        retry(daemon, runtime, outcome.retry_at)
    elif operation.state is OperationState.FAILED:
        crash = engine.crashes.get(operation.id)
        if crash is not None:  # a bug inside a step: shown like one outside
            daemon.workers.errors[runtime] = InternalError(crash.describe(), type(crash.error))
    return operation


def _log_run(
    daemon: Daemon, runtime: str, operation: Operation, engine: Engine, extra: dict[str, str]
) -> None:
    """The run's one line: failed (ERROR) or waiting (INFO) once per change of state (each
    retry is another operation: the same state again, at DEBUG), done (INFO, saying it
    recovered after a failure)."""
    shown = f"{operation.type} {operation.id} {state_text(operation)}"
    subject = f"runtime {runtime}"
    if operation.state is OperationState.SUCCEEDED:
        again = "recovered: " if daemon.repeats.recovered(subject) else ""
        log.info("runtime %s: %s%s", runtime, again, shown, extra=extra)
        return
    failed = operation.state is OperationState.FAILED
    state = state_text(operation)  # without the type: a failed provision's retry is an update
    level = logging.ERROR if failed else logging.INFO
    crash = engine.crashes.get(operation.id)
    log.log(
        daemon.repeats.level(subject, state, level, failure=failed),
        "runtime %s: %s",
        runtime,
        shown,
        extra=extra,
        exc_info=crash.error if failed and crash is not None and daemon.options.debug else None,
    )


def _watch(
    daemon: Daemon, runtime: str, repo: ConfigRepo, operation: Operation, *, crds: bool
) -> None:
    """The kinds ``runtime``'s modules use, watched on its cluster, and what its removals wait
    for (a deprovision's: until it finished). A run that waits for CRDs (``crds``: the
    server establishes them in a moment, likely during the run) is woken once when it needs a
    watch it did not before: the event may have come before it was passed to the runtime."""
    watches = daemon.watches
    declared = repo.runtimes.get(runtime)
    leaving = declared is None or operation.type is OperationType.DEPROVISION
    unfinished = operation.state not in (OperationState.SUCCEEDED, OperationState.FAILED)
    if not watches.enabled or (leaving and not unfinished):
        watches.release(runtime)
        return
    access = declared.cluster if declared is not None and not leaving else operation.data.access
    if access is None:
        watches.release(runtime)
        return
    where = access.describe()
    cluster = watches.cluster(where, lambda: daemon.connect(access, runtime))
    if cluster is None:  # unreachable, or nothing there changes but by us (a snapshot file)
        watches.release(runtime)
        return
    desired: list[DesiredModule] = []
    if declared is not None and not leaving:
        desired = desired_modules(repo, resolve_runtime(repo, declared), Renderer(repo))
    kinds = {
        (str(o.body.get("apiVersion")), str(o.body.get("kind"))) for m in desired for o in m.objects
    }
    kinds |= {(r.api_version, r.kind) for m in desired for r in named_refs(m)}  # healthChecks
    deleting = [
        m.module for m in operation.data.removals.modules if m.state is ModuleState.DELETING
    ]
    blocking: set[tuple[str, str]] = set()
    if (deleting or leaving) and cluster is not None:
        try:
            namespace = repo.settings.system_namespace
            own, blocking = fetch_blocking_kinds(
                cluster, namespace, runtime, None if leaving else deleting
            )
            kinds |= own
        except ReconcilerError as error:  # the timers retry the removal as before
            log.info("runtime %s: no watch on what blocks its removals: %s", runtime, error)
    refs = [ObjectRef.of(o.body) for m in desired for o in m.objects]
    opened = watches.need(runtime, where, cluster, kinds, blocking, refs)
    if opened and crds:
        watches.wake(runtime, "watching the CRDs it waits for")


def _waits_for_crds(retry_at: datetime | None, operation: Operation) -> bool:
    """Whether the run ended waiting, with a module waiting for its CRDs."""
    modules = operation.data.applied.modules
    return retry_at is not None and any(m.reason == Reason.WAITING_FOR_CRD for m in modules)


def _measure(
    daemon: Daemon, runtime: str, repo: ConfigRepo, operation: Operation, engine: Engine
) -> None:
    """The runtime's state in the metrics, by the rule of ``reconciler status``; a run that
    ended on an error (a failed operation, a step retrying) counted by its type."""
    declared = repo.runtimes.get(runtime)
    in_git = declared.suspend if declared is not None else None
    status = load_status(daemon.store, runtime, git_suspended=in_git)
    if status is None:
        daemon.metrics.forget_runtime(runtime)
    else:
        daemon.metrics.runtime_status(status)
    crash, failure = engine.crashes.get(operation.id), operation.data.failure
    if crash is not None:
        daemon.metrics.reconcile_failed(runtime, crash.type)
    elif failure is not None:
        daemon.metrics.reconcile_failed(runtime, failure.error.cause.__name__)


def _log_module_errors(
    daemon: Daemon, runtime: str, operation: Operation, extra: dict[str, str]
) -> None:
    """Each module in Error, with its error's type, permanence and asked delay (once per
    change: the same error at the next run at DEBUG)."""
    for module in operation.data.modules:
        subject = f"runtime {runtime} module {module.module}"
        if module.error is None:
            daemon.repeats.recovered(subject)
        else:
            level = logging.ERROR if module.error.permanent else logging.WARNING
            state = f"{module.error.describe()}: {module.error.message}"
            log.log(
                daemon.repeats.level(subject, state, level),
                "runtime %s: module %s: %s: %s",
                runtime,
                module.module,
                module.error.describe(),
                module.error.message,
                extra={**extra, "module_name": module.module},
            )
