"""The operations engine: runs an operation's stages and steps by the rules O1-O5.

- O1 a step returns a :class:`StepResult`: an error fails the operation; ``retry_after`` ends this
  run, and the stage starts again from its first step when the operation runs next (at or after
  the recorded time); otherwise the next step runs. A step's transient error is a retry, a
  permanent one an error.
- O2 a finished stage is recorded and never repeated, also after a crash: the next run resumes
  at the first unfinished stage. The step context (and so the cluster credentials) is rebuilt
  for every stage and never stored.
- O3 the ``Starting`` step claims the runtime in the store; an operation whose owner died is
  taken over and resumed.
- O4 past its deadline (provision/deprovision 24h, update 3h by default) an operation fails,
  naming the step that kept it waiting.
- O5 a step marked "retry without fail" that keeps asking to retry past its own limit is skipped
  and recorded; :meth:`Engine.retrigger` starts a new operation for runtimes with skipped work.

Every change of state is saved before the next step runs: a step's start (attempts, lease)
and its end, with the end of its stage and of the operation after the last one. But for an
update that has changed nothing so far (a resync finding no drift: most runs of a fleet): once
it is claimed, its saves wait while the claim's lease has at least half its length to run, and
its end is saved in one save with every step since (no change: four saves, not two a step).
The first step that changes anything, waits, fails or is skipped saves all at once, and the
rest as above. A process that dies in such a stretch leaves the operation claimed at its last
save: the next run resumes there and runs again what changed nothing. Callers: the operations
runner (``reconciler sync`` and the daemon), ``reconciler operations``.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from importlib.metadata import entry_points

from reconciler.cluster.api import flush_writes
from reconciler.core.head import Head
from reconciler.core.model import DEFAULT_OPERATION_TIMEOUTS, RetryLimits
from reconciler.core.plan_values import ModuleAction
from reconciler.core.status import ChangeAction, ModuleError, Reason, StepFailure
from reconciler.errors import AccessError, FencedError, PermanentError, TransientError
from reconciler.operations.crash import Crash
from reconciler.operations.model import (
    FenceToken,
    Operation,
    OperationData,
    OperationState,
    OperationType,
    RuntimeRecord,
    StageRecord,
    StepRecord,
    StepResult,
    StepState,
)
from reconciler.operations.steps import (
    BUILTIN_STAGES,
    SkipLimit,
    Step,
    StepContext,
    skip_limit,
    transient_retry,
)
from reconciler.operations.store import RunLedger
from reconciler.source.plugins import ENTRY_POINT_GROUP

DEFAULT_LIMITS = {OperationType(kind): limit for kind, limit in DEFAULT_OPERATION_TIMEOUTS.items()}
LEASE_SECONDS = 120.0

Stages = list[tuple[str, list[type[Step]]]]


def this_owner() -> str:
    """``host:pid`` of this process."""
    return f"{socket.gethostname()}:{os.getpid()}"


def owner_alive(owner: str) -> bool:
    """Whether an owner could still be running: a process on this host that exists, or any
    process elsewhere (its lease decides)."""
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _flushed(cluster: object) -> AccessError | None:
    """Flush ``cluster``'s writes (:func:`~reconciler.cluster.api.flush_writes`); the error
    when they cannot be kept (a snapshot file that cannot be written), else ``None``."""
    try:
        flush_writes(cluster)
    except AccessError as error:
        return error
    return None


def _failed_on(operation: Operation, failure: StepFailure | None) -> None:
    """Keep the error the step under way ended on (``None``: none, or not yet) with the
    operation, for its runtime's status."""
    if operation.data.failure != failure:
        operation.data = replace(operation.data, failure=failure)


#: The states of the steps of an operation that has changed nothing so far.
_QUIET_STEPS = frozenset({StepState.PENDING, StepState.RUNNING, StepState.DONE})


def changed_nothing_yet(operation: Operation) -> bool:
    """Whether ``operation`` has planned and done nothing but leave every module as it was,
    with no step waiting, failed or skipped."""
    data = operation.data
    passes = (data.applied, data.removals)
    return (
        data.failure is None
        and all(t.state in _QUIET_STEPS for s in operation.stages for t in s.steps)
        and all(p.action is ModuleAction.UNCHANGED for p in data.plan)
        and all(c.action is ChangeAction.UNCHANGED for r in passes for c in r.changes)
        and not any(r.failed() for r in passes)
    )


def plugin_steps() -> list[type[Step]]:
    """Step classes that installed packages offer through the ``reconciler.steps`` entry point."""
    found: list[type[Step]] = []
    for entry in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        step = entry.load()
        if not (isinstance(step, type) and issubclass(step, Step)):
            raise PermanentError(f"entry point {entry.name} ({entry.value}) is not a Step class")
        found.append(step)
    return found


def stages_for(
    kind: OperationType, plugins: list[type[Step]], disabled: frozenset[str] = frozenset()
) -> Stages:
    """The built-in stages of ``kind`` with plugin steps inserted and optional steps switched
    off; the order is checked (every plugin names an existing stage and step). A plugin may
    come after another plugin's step: each goes in once the step it follows is there."""
    stages = [(name, list(steps)) for name, steps in BUILTIN_STAGES[kind]]
    pending = [plugin for plugin in plugins if kind in plugin.operations]
    while pending:
        placed = [p for p in pending if _insert(stages, p, kind, final=False)]
        if not placed:  # none of them can go in: the first one says why
            _insert(stages, pending[0], kind, final=True)
        pending = [p for p in pending if p not in placed]
    return [
        (n, [s for s in steps if not (s.optional and s.name in disabled)]) for n, steps in stages
    ]


def _insert(
    stages: list[tuple[str, list[type[Step]]]],
    plugin: type[Step],
    kind: OperationType,
    *,
    final: bool,
) -> bool:
    """Put ``plugin`` in its stage, after its step; ``False`` when that step is not there (yet);
    with ``final``, a :class:`PermanentError` saying what is missing instead."""
    stage = next((steps for name, steps in stages if name == plugin.stage), None)
    if stage is None:
        known = ", ".join(n for n, _ in stages)
        raise PermanentError(f"step {plugin.name}: no stage '{plugin.stage}' in {kind} ({known})")
    position = len(stage)
    if plugin.after is not None:
        names = [s.name for s in stage]
        if plugin.after not in names:
            if final:
                raise PermanentError(
                    f"step {plugin.name}: no step '{plugin.after}' in stage {plugin.stage}"
                )
            return False
        position = names.index(plugin.after) + 1
    stage.insert(position, plugin)
    return True


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """How one run of an operation ended: finished, or waiting until ``retry_at``."""

    operation: Operation
    retry_at: datetime | None = None


#: The states of a step that will not run again in this operation.
_ENDED = frozenset({StepState.DONE, StepState.SKIPPED})


class Engine:
    """Creates and runs operations against a store."""

    def __init__(
        self,
        store: RunLedger,
        *,
        clock: Callable[[], datetime],
        plugins: list[type[Step]] | None = None,
        disabled: frozenset[str] = frozenset(),
        limits: Mapping[OperationType, timedelta] | None = None,
        retry_limits: RetryLimits | None = None,
        owner: str | None = None,
        alive: Callable[[str], bool] = owner_alive,
        fence: Callable[[], str | None] = lambda: None,
        token: FenceToken | None = None,
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        self.store = store
        self.clock = clock
        self.plugins = plugins if plugins is not None else plugin_steps()
        self.disabled = disabled
        self.limits = {**DEFAULT_LIMITS, **(limits or {})}
        #: O5: ``spec.operations.retryWithoutFail``, for :func:`skip_limit`.
        self.retry_limits = retry_limits or RetryLimits()
        self.owner = owner or this_owner()
        self.alive = alive
        #: Why this process may no longer write (a daemon replica whose lease lapsed): every
        #: save of an operation asks first, so a fenced replica never overwrites the record
        #: of the member that took the operation over.
        self.fence = fence
        #: The fence every write to the store carries, checked by the store in the statement
        #: that writes (a daemon replica's member and epoch; none for ``reconciler sync``).
        self.token = token
        #: Whether this process is stopping (a daemon's shutdown): no further step starts;
        #: the operation stays as its last saved step left it and is resumed there (O2).
        self.stopping = stopping
        #: Operation id -> the unexpected exception that failed it in this process (for --debug).
        self.crashes: dict[str, Crash] = {}
        #: Operation id -> the end of the lease the store holds for it (claimed, in progress):
        #: the saves of a stretch that changes nothing wait while it lasts (see the docstring).
        self._leases: dict[str, datetime] = {}

    def stages(self, kind: OperationType) -> Stages:
        """The stages an operation of ``kind`` runs."""
        return stages_for(kind, self.plugins, self.disabled)

    def create(
        self,
        runtime: str,
        kind: OperationType,
        *,
        commit: Head | None = None,
        data: OperationData | None = None,
        retrigger_of: str = "",
    ) -> Operation:
        """A new pending operation, saved."""
        now = self.clock()
        stages = [
            StageRecord(name, [StepRecord(step.name) for step in steps])
            for name, steps in self.stages(kind)
        ]
        operation = Operation(
            id=uuid.uuid4().hex[:12],
            runtime=runtime,
            type=kind,
            state=OperationState.PENDING,
            created=now,
            deadline=now + self.limits[kind],
            stages=stages,
            commit=commit,
            updated=now,
            retrigger_of=retrigger_of,
            data=data or OperationData(),
        )
        self.store.save(operation, self.token)
        return operation

    def run(self, operation: Operation, context_for: Callable[[], StepContext]) -> RunOutcome:
        """Run ``operation`` from its first unfinished stage until it finishes or must wait.

        A started operation is claimed again first (O3): while another live owner holds it,
        nothing runs and the outcome says when to look again."""
        if operation.state is not OperationState.PENDING:
            holder = self._claim(operation)
            if holder is not None:
                operation.message = f"waiting: {holder} is in progress on {operation.runtime}"
                return RunOutcome(operation, self.clock() + timedelta(seconds=5))
        steps = dict(self.stages(operation.type))
        for stage in operation.stages:
            if stage.done:
                continue
            try:
                context = context_for()
            except (PermanentError, TransientError) as error:  # e.g. a chart that does not render
                return self._unprepared(operation, stage, error)
            outcome = self._stage(operation, stage, steps.get(stage.name, []), context)
            if outcome is not None:
                return outcome
        if operation.state is not OperationState.SUCCEEDED:  # every stage was done already
            self._succeed(operation)
            self._save(operation)
        return RunOutcome(operation)

    def _unprepared(
        self, operation: Operation, stage: StageRecord, error: PermanentError | TransientError
    ) -> RunOutcome:
        """What the stage's steps need could not be made (the desired objects: a chart the
        cluster's version does not meet): the stage's next step fails with ``error``, or waits
        for a transient one, as if it had raised it."""
        waiting = [r for r in stage.steps if r.state not in _ENDED] or stage.steps
        if not waiting:  # a stage of no step needs no context: not reached
            raise error
        record = waiting[0]
        record.attempts += 1
        record.started = record.first_started = record.first_started or self.clock()
        _failed_on(operation, StepFailure.of(record.name, error))
        if isinstance(error, TransientError):
            record.message = f"retrying: {error}"
            return self._wait(operation, stage, record, error.retry_after)
        record.finished, record.message = self.clock(), str(error)
        return self._fail(operation, record, f"step {record.name} failed: {error}")

    def _succeed(self, operation: Operation) -> None:
        """The operation succeeded; its message says what it did to the modules (``1
        upgraded, 3 unchanged``, never the state again) and names the steps skipped (O5); not
        saved."""
        operation.state = OperationState.SUCCEEDED
        operation.data = operation.data.compacted()  # the objects left unchanged: not kept
        skipped = operation.skipped_steps()
        operation.message = operation.data.outcome_text() + (
            "; skipped: " + ", ".join(t.name for _, t in skipped) if skipped else ""
        )

    def _finish_stage(self, operation: Operation, stage: StageRecord) -> None:
        """``stage`` is done (O2), and the operation succeeded when it was the last; not saved:
        the save of the stage's last step records it."""
        stage.done, stage.finished = True, self.clock()
        if all(s.done for s in operation.stages):
            self._succeed(operation)

    def _step_ended(self, operation: Operation, stage: StageRecord, last: bool) -> None:
        """Save a step's end (done or skipped); after the ``last`` step of ``stage``, the end of
        the stage and, after the last stage, of the operation in the same save."""
        if last:
            self._finish_stage(operation, stage)
        self._save(operation)

    def _claim(self, operation: Operation) -> str | None:
        now = self.clock()
        lease = now + timedelta(seconds=LEASE_SECONDS)
        holder = self.store.claim(operation.id, self.owner, now, lease, self.alive, self.token)
        if holder is None:
            operation.state, operation.owner, operation.lease_until = (
                OperationState.IN_PROGRESS,
                self.owner,
                lease,
            )
            self._leases[operation.id] = lease
        return holder

    def _stage(
        self,
        operation: Operation,
        stage: StageRecord,
        classes: list[type[Step]],
        context: StepContext,
    ) -> RunOutcome | None:
        by_name = {cls.name: cls for cls in classes}
        runnable = [
            (record, by_name[record.name])
            for record in stage.steps
            if record.state is not StepState.SKIPPED and record.name in by_name
        ]
        for record, cls in runnable:
            last = record is runnable[-1][0]
            if self.stopping():
                operation.message = f"stopped before {stage.name}/{record.name}: resumed at start"
                return RunOutcome(operation)
            if self.clock() > operation.deadline:
                message = self._timeout_message(operation, record)
                timed_out = ModuleError(PermanentError, message)
                _failed_on(operation, StepFailure(record.name, Reason.TIMED_OUT, timed_out))
                return self._fail(operation, record, message)
            result = self._attempt(operation, record, cls, context)
            if result.error is not None:
                record.state, record.finished = StepState.FAILED, self.clock()
                if operation.data.failure is None:  # a step that returned its error
                    failure = StepFailure.of(record.name, result.error)
                    _failed_on(operation, failure)
                message = f"step {record.name} failed: {result.error}"
                return self._fail(operation, record, message, records_status=cls.records_status)
            if result.retry_after is not None:
                limit = self._passed_limit(cls, record)
                if limit is not None:
                    record.state, record.finished = StepState.SKIPPED, self.clock()
                    record.message = limit.skipped_text(record.message)
                    self._step_ended(operation, stage, last)
                    continue
                return self._wait(operation, stage, record, result.retry_after)
            record.state, record.finished, record.retry_at = StepState.DONE, self.clock(), None
            self._step_ended(operation, stage, last)
        if not stage.done:  # no step to run in it
            self._finish_stage(operation, stage)
            self._save(operation)
        return None

    def _attempt(
        self, operation: Operation, record: StepRecord, cls: type[Step], context: StepContext
    ) -> StepResult:
        now = self.clock()
        record.attempts += 1
        record.state, record.started = StepState.RUNNING, now
        record.first_started = record.first_started or now
        operation.lease_until = now + timedelta(seconds=LEASE_SECONDS)
        self._save(operation)
        _failed_on(operation, None)
        pending = operation.state is OperationState.PENDING
        try:
            result = cls().run(operation, context)
            if pending and operation.state is OperationState.IN_PROGRESS:  # claimed (O3)
                self._leases[operation.id] = operation.lease_until  # the claim's is later
        except TransientError as error:
            _failed_on(operation, StepFailure.of(record.name, error))
            result = transient_retry(error)
        except PermanentError as error:
            _failed_on(operation, StepFailure.of(record.name, error))
            result = StepResult(error=error)
        except Exception as error:  # the crash barrier: a bug fails this operation, not the process
            result = self._crashed(operation, record, error)
        finally:
            unsaved = _flushed(context.cluster)  # before the store records the step's end
        if unsaved is not None:  # the step's writes are lost: it failed, whatever it returned
            _failed_on(operation, StepFailure.of(record.name, unsaved))
            result = StepResult(error=unsaved)
        record.message = result.recorded
        return result

    def _crashed(self, operation: Operation, record: StepRecord, error: Exception) -> StepResult:
        """An unexpected exception in a step: the step's failure (type, message, place), reason
        InternalError; the traceback stays in memory, in :attr:`crashes`."""
        crash = self.crashes[operation.id] = Crash.of(error)
        kept = ModuleError(PermanentError, crash.describe())
        _failed_on(operation, StepFailure(record.name, Reason.INTERNAL_ERROR, kept))
        return StepResult(error=PermanentError(crash.describe()))

    def _passed_limit(self, cls: type[Step], record: StepRecord) -> SkipLimit | None:
        """O5: the limit of a step that retries without fail, once it has retried that long
        since its first start (``None``: not yet, or it is never skipped)."""
        limit = skip_limit(cls, self.retry_limits)
        if limit is None or record.first_started is None:
            return None
        return limit if self.clock() - record.first_started >= limit.after else None

    def _wait(
        self, operation: Operation, stage: StageRecord, record: StepRecord, delay: float
    ) -> RunOutcome:
        retry_at = self.clock() + timedelta(seconds=delay)
        record.state, record.retry_at = StepState.RETRYING, retry_at
        for other in stage.steps:  # O1: the stage starts again from its first step
            if other is not record and other.state is StepState.DONE:
                other.state = StepState.PENDING
        operation.message = f"waiting in {stage.name}/{record.name}: {record.message}"
        self._save(operation)
        return RunOutcome(operation, retry_at)

    def _fail(
        self,
        operation: Operation,
        record: StepRecord,
        message: str,
        *,
        records_status: bool = False,
    ) -> RunOutcome:
        """The operation failed: saved, and the runtime's record says Error with the step's
        reason until an operation succeeds (unless the step wrote the record itself)."""
        operation.state, operation.message = OperationState.FAILED, message
        record.state = StepState.FAILED
        self._save(operation)
        if not records_status:
            known = self.store.runtime(operation.runtime)
            self.store.put_runtime(RuntimeRecord.failed(operation, known, self.clock()), self.token)
        return RunOutcome(operation)

    def _timeout_message(self, operation: Operation, record: StepRecord) -> str:
        limit = self.limits[operation.type]
        waiting = next(
            (t for s in operation.stages for t in s.steps if t.state is StepState.RETRYING), record
        )
        if waiting.state is not StepState.RETRYING:  # the limit passed before it ever ran
            return f"timed out after {limit}, before step {waiting.name} had run"
        return (
            f"timed out after {limit}: step {waiting.name} still asking to retry "
            f"({waiting.message or 'no message'})"
        )

    def _save(self, operation: Operation) -> None:
        reason = self.fence()
        if reason is not None:
            raise FencedError(f"operation {operation.id} not saved: {reason}")
        operation.updated = self.clock()
        if self._waits(operation):
            return
        self.store.save(operation, self.token)
        if operation.state is not OperationState.IN_PROGRESS:
            self._leases.pop(operation.id, None)

    def _waits(self, operation: Operation) -> bool:
        """Whether this save may wait for the next (see the module docstring): an update
        claimed under a lease the store holds for at least half its length more, that has
        changed nothing, nor waited, failed or skipped a step, so far."""
        held = self._leases.get(operation.id)
        return (
            held is not None
            and operation.type is OperationType.UPDATE
            and operation.state is OperationState.IN_PROGRESS
            and self.clock() + timedelta(seconds=LEASE_SECONDS / 2) < held
            and changed_nothing_yet(operation)
        )

    def retrigger_candidates(self) -> list[Operation]:
        """O5: the latest operation of every runtime that finished with skipped steps."""
        latest: dict[str, Operation] = {}
        for operation in self.store.operations(limit=10_000):
            latest.setdefault(operation.runtime, operation)
        return [
            o for o in latest.values() if o.state is OperationState.SUCCEEDED and o.skipped_steps()
        ]

    def retrigger(self, candidates: list[Operation] | None = None) -> list[Operation]:
        """O5: a new operation for each candidate (default: every runtime whose latest operation
        finished with skipped steps); their work is tried again, idempotently."""
        chosen = self.retrigger_candidates() if candidates is None else candidates
        return [
            self.create(
                operation.runtime,
                operation.type,
                commit=operation.commit,
                data=operation.data,
                retrigger_of=operation.id,
            )
            for operation in chosen
        ]
