"""Operations and runtime states as text and JSON (pure).

``operation_text`` is what ``sync`` prints per runtime; ``operation_tree`` is ``reconciler
operations show``: stages, steps, attempts, times, the last message (blocking objects included)
as a tree. Callers: the CLI, and the status page for the marks of a step.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from reconciler.core.head import head_text
from reconciler.operations.model import (
    Operation,
    OperationState,
    RuntimeRecord,
    RuntimeStatus,
    StepRecord,
)

#: What a step's state looks like in the tree (``operations show`` and the status page).
STEP_MARKS = {
    "pending": " ",
    "running": ">",
    "retrying": "~",
    "done": "x",
    "skipped": "-",
    "failed": "!",
}


def operation_text(operation: Operation) -> str:
    """One runtime's operation: headline, then each module's state."""
    lines = [
        f"runtime {operation.runtime}: {operation.type} {operation.id} {state_text(operation)}"
    ]
    for module in operation.data.modules:
        state = module.state or "Removed"
        lines.append(
            f"    {module.module:<16} {state:<10} {module.version or '-':<8} "
            f"{module.reason}: {module.message}"
        )
    return "\n".join(lines) + "\n"


def state_text(operation: Operation) -> str:
    """``succeeded: 1 upgraded, 3 unchanged``: the state, then the message when it adds to it."""
    if operation.state is OperationState.IN_PROGRESS:
        return f"in progress: {operation.message}"
    if not operation.message or operation.message == str(operation.state):
        return str(operation.state)  # not "succeeded: succeeded"
    return f"{operation.state}: {operation.message}"


#: The columns of :func:`operation_row`; the last two only with ``-o wide``.
OPERATION_COLUMNS = ("ID", "RUNTIME", "TYPE", "STATE", "CREATED", "MESSAGE")
OPERATION_WIDE_COLUMNS = ("COMMIT", "DEADLINE")


def operation_row(operation: Operation) -> tuple[str, ...]:
    """One row of ``reconciler operations list`` (and ``get operations``)."""
    return (
        operation.id,
        operation.runtime,
        str(operation.type),
        str(operation.state),
        _time(operation.created),
        operation.message[:80],
        head_text(operation.commit)[:8] or "-",
        _time(operation.deadline),
    )


def operation_tree(operation: Operation) -> str:
    """``reconciler operations show``: the operation, its stages and steps as a tree."""
    lines = [
        f"operation {operation.id} ({operation.type}) of runtime {operation.runtime}",
        f"  state:    {operation.state}" + (f": {operation.message}" if operation.message else ""),
        f"  created:  {_time(operation.created)}, deadline {_time(operation.deadline)}",
        f"  commit:   {head_text(operation.commit) or '-'}"
        + (f", re-trigger of {operation.retrigger_of}" if operation.retrigger_of else ""),
    ]
    if operation.owner:
        lines.append(f"  owner:    {operation.owner}")
    for index, stage in enumerate(operation.stages):
        last = index == len(operation.stages) - 1
        done = f" (finished {_time(stage.finished)})" if stage.done else ""
        lines.append(f"  {'└' if last else '├'}─ stage {stage.name}{done}")
        for position, step in enumerate(stage.steps):
            branch = "   " if last else "│  "
            tip = "└" if position == len(stage.steps) - 1 else "├"
            lines.append(f"  {branch}{tip}─ [{STEP_MARKS[str(step.state)]}] {_step(step)}")
    blocking = operation.data.blocking
    if blocking:
        lines.append(f"  blocking: {blocking}")
    return "\n".join(lines) + "\n"


def _step(step: StepRecord) -> str:
    parts = [f"{step.name} {step.state}", f"attempts {step.attempts}"]
    if step.started:
        parts.append(f"started {_time(step.started)}")
    if step.finished:
        parts.append(f"finished {_time(step.finished)}")
    if step.retry_at:
        parts.append(f"retry at {_time(step.retry_at)}")
    text = ", ".join(parts)
    return f"{text}: {step.message}" if step.message else text


def _time(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S") if moment else "-"


def operation_json(operation: Operation) -> dict[str, Any]:
    """JSON of an operation with its stages and steps."""
    return {
        "id": operation.id,
        "runtime": operation.runtime,
        "type": str(operation.type),
        "state": str(operation.state),
        "message": operation.message,
        "created": _iso(operation.created),
        "deadline": _iso(operation.deadline),
        "commit": head_text(operation.commit),
        "retriggerOf": operation.retrigger_of,
        "stages": [
            {
                "name": stage.name,
                "done": stage.done,
                "steps": [
                    {
                        "name": step.name,
                        "state": str(step.state),
                        "attempts": step.attempts,
                        "started": _iso(step.started),
                        "finished": _iso(step.finished),
                        "retryAt": _iso(step.retry_at),
                        "message": step.message,
                        **_kept(operation, step.name),
                    }
                    for step in stage.steps
                ],
            }
            for stage in operation.stages
        ],
        "modules": [m.to_json() for m in operation.data.modules],
    }


#: The columns of :func:`status_rows`, in order; the wide ones only with ``-o wide``.
STATUS_COLUMNS = ("NAME", "STATE", "VERSION", "REASON", "COMMIT", "AGE", "MESSAGE")
STATUS_WIDE_COLUMNS = ("UPDATED", "ACCESS")


def status_rows(statuses: list[RuntimeStatus], now: datetime) -> list[tuple[str, ...]]:
    """``reconciler status``: a row per runtime (state, reason, commit, age, what it says);
    under it the operation under way and the last finished result, then a row per module."""
    rows = []
    for status in statuses:
        record = status.current
        shown = replace(record, reason=status.reason, message=status.message)
        rows.append(_record_row(record.runtime, shown, now, status.state))
        operation = status.operation
        if operation is not None:
            message = f"{operation.id}: {operation.message or 'under way'}"
            updated = operation.updated or operation.created
            commit = head_text(operation.commit)[:8] or "-"
            age = age_text(now, updated)
            kind = str(operation.type)
            rows.append(("  (operation)", str(operation.state), "-", kind, commit, age, message))
        if status.last is not None:
            rows.append(_record_row("  (last finished)", status.last, now))
        for module in record.modules:
            state = str(module.state or "Removed")
            version = module.version or "-"
            rows.append(
                (f"  {module.module}", state, version, module.reason, "", "", module.message)
            )
    return rows


def _record_row(
    label: str, record: RuntimeRecord, now: datetime, state: str = ""
) -> tuple[str, ...]:
    return (
        label,
        state or str(record.state),
        "-",
        record.reason,
        head_text(record.commit)[:8] or "-",
        age_text(now, record.updated),
        record.message,
        _time(record.updated),
        record.access.describe() or "-",
    )


def age_text(now: datetime, then: datetime) -> str:
    """How long ago ``then`` was, as kubectl's AGE column: ``45s``, ``3m``, ``2h``, ``5d``."""
    seconds = int((now - then).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def _kept(operation: Operation, step: str) -> dict[str, Any]:
    """``{"data": ...}`` when ``step`` kept data in ``operation``, else nothing."""
    kept = operation.data.kept_by(step)
    return {"data": kept} if kept else {}
