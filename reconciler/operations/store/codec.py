"""The JSON the state store keeps of typed values, and only at the store's edge.

An operation's data (:class:`~reconciler.operations.model.OperationData`: the access, the plan,
each pass's module statuses with their errors and changes, the step failure), a runtime's module
statuses and a commit verdict's detail are kept as JSON text in their rows; this module turns
them into that text and reads them back into the same types, rows written by earlier versions
included (an error kept as text reads as a permanent error with that message). Pure: no I/O.
"""

from __future__ import annotations

import functools
import json
from dataclasses import asdict
from typing import Any

from reconciler.core.model import ClusterAccess
from reconciler.core.objects import ObjectRef
from reconciler.core.plan_values import ModuleAction, PlannedModule
from reconciler.core.reasons import parse_reason
from reconciler.core.status import (
    ChangeAction,
    ChangeSetEntry,
    ModuleError,
    ModuleState,
    ModuleStatus,
    PassResult,
    Reason,
    StepFailure,
    reason_of_state,
)
from reconciler.errors import PermanentError
from reconciler.operations.model import Operation, OperationData
from reconciler.operations.step_data import StepData


class DataTexts:
    """:func:`encode_data` of each unfinished operation's data, kept while the data is the same
    object (:class:`OperationData` is frozen; steps replace it): the engine saves an operation
    after every step, and its data changes at few of them."""

    def __init__(self) -> None:
        self._texts: dict[str, tuple[OperationData, str]] = {}

    def of(self, operation: Operation) -> str:
        """The JSON text of ``operation``'s data."""
        kept = self._texts.get(operation.id)
        data = operation.data
        text = kept[1] if kept is not None and kept[0] is data else encode_data(data)
        if operation.finished:
            self._texts.pop(operation.id, None)
        else:
            self._texts[operation.id] = (data, text)
        return text


#: Shared by the stores of a process (an operation is saved to one store).
data_text = DataTexts().of


def encode_data(data: OperationData) -> str:
    """An operation's typed data as the JSON text every store keeps."""
    return json.dumps(_data_json(data), sort_keys=True)


def decode_data(text: str) -> OperationData:
    """Inverse of :func:`encode_data` (rows written by earlier versions included)."""
    return _data_from_json(json.loads(text))


def encode_modules(modules: tuple[ModuleStatus, ...]) -> str:
    """A runtime's module statuses as the JSON text every store keeps."""
    return json.dumps([_status_json(m) for m in modules], sort_keys=True)


@functools.lru_cache(maxsize=4096)
def decode_modules(text: str) -> tuple[ModuleStatus, ...]:
    """Inverse of :func:`encode_modules`. Remembered by text (the statuses are frozen): the
    runtimes of one channel run the same modules and say the same of them, so reading a fleet's
    records (``/status``, the status page, each request) decodes each distinct list once."""
    return tuple(_status_from_json(m) for m in json.loads(text))


def deployed_of(modules: str) -> dict[str, str]:
    """:meth:`RuntimeRecord.deployed` of a record whose modules are the JSON text ``modules``
    (:func:`encode_modules`), without building the statuses."""
    unmanaged = str(ModuleState.UNMANAGED)
    return {
        m["module"]: m.get("version") or ""
        for m in json.loads(modules)
        if m.get("state") and m["state"] != unmanaged
    }


def encode_detail(detail: dict[str, Any]) -> str:
    """A commit verdict's detail as the JSON text of its row."""
    return json.dumps(detail, sort_keys=True)


def decode_detail(text: str) -> dict[str, Any]:
    """Inverse of :func:`encode_detail`."""
    found = json.loads(text)
    return found if isinstance(found, dict) else {}


def encode_error(error: ModuleError) -> dict[str, Any]:
    """A kept error as JSON: its cause's name, its kind and the delay it asked for."""
    return {
        "cause": error.cause.__name__,
        "permanent": error.permanent,
        "message": error.message,
        "retryAfter": error.retry_after,
    }


def decode_error(document: object) -> ModuleError:
    """Inverse of :func:`encode_error`; an error kept as text (or without its kind) by an
    earlier version is a permanent error with that message."""
    if not isinstance(document, dict):
        return ModuleError(PermanentError, str(document))
    permanent = bool(document.get("permanent", True))
    cause = ModuleError.cause_named(str(document.get("cause", "")), permanent)
    return ModuleError(cause, str(document.get("message", "")), document.get("retryAfter"))


# -- an operation's data -------------------------------------------------------------------------


def _data_json(data: OperationData) -> dict[str, Any]:
    document: dict[str, Any] = {
        "plan": [p.to_json() for p in data.plan],
        "applied": _pass_json(data.applied),
        "removals": _pass_json(data.removals),
    }
    if data.access is not None:
        document["cluster"] = asdict(data.access)
    if data.blocking:
        document["blocking"] = data.blocking
    if data.inventories_left:
        document["inventoriesLeft"] = list(data.inventories_left)
    if data.failure is not None:
        document["failure"] = _failure_json(data.failure)
    if data.steps.kept:
        document["steps"] = data.steps.to_json()
    return document


def _data_from_json(document: dict[str, Any]) -> OperationData:
    """An operation's data; rows of the first versions kept ``modules`` and ``removals`` as
    lists of statuses and the plan's versions as ``from``/``to``."""
    applied = document.get("applied", {"modules": document.get("modules", [])})
    removals = document.get("removals", [])
    cluster = document.get("cluster")
    return OperationData(
        access=ClusterAccess(**cluster) if cluster is not None else None,
        plan=tuple(_planned_from_json(p) for p in document.get("plan", [])),
        applied=_pass_from_json(applied),
        removals=_pass_from_json(removals if isinstance(removals, dict) else {"modules": removals}),
        blocking=str(document.get("blocking", "")),
        inventories_left=tuple(document.get("inventoriesLeft", ())),
        failure=_failure_from_json(document.get("failure")),
        steps=StepData.from_json(document.get("steps")),
    )


def _failure_json(failure: StepFailure) -> dict[str, Any]:
    return {"step": failure.step, "reason": str(failure.reason), **encode_error(failure.error)}


def _failure_from_json(document: object) -> StepFailure | None:
    """A step failure; one kept as text is a permanent failure of an unnamed step."""
    if isinstance(document, str) and document:
        return StepFailure("", Reason.STEP_FAILED, decode_error(document))
    if not isinstance(document, dict):
        return None
    reason = parse_reason(document.get("reason"), Reason.STEP_FAILED)
    return StepFailure(str(document.get("step", "")), reason, decode_error(document))


def _planned_from_json(entry: dict[str, Any]) -> PlannedModule:
    return PlannedModule(
        entry["module"],
        ModuleAction(entry["action"]),
        parse_reason(entry["reason"], Reason.UP_TO_DATE),
        entry.get("fromVersion", entry.get("from")),
        entry.get("toVersion", entry.get("to")),
    )


def _pass_json(result: PassResult) -> dict[str, Any]:
    return {
        "modules": [_status_json(m) for m in result.modules],
        "changes": [
            {"module": c.module, "action": str(c.action), **c.ref.to_json()} for c in result.changes
        ],
    }


def _pass_from_json(document: dict[str, Any]) -> PassResult:
    changes = tuple(
        ChangeSetEntry(c["module"], ObjectRef.from_json(c), ChangeAction(c["action"]))
        for c in document.get("changes", [])
    )
    return PassResult(tuple(_status_from_json(m) for m in document["modules"]), changes)


# -- a module's status ---------------------------------------------------------------------------


def _status_json(status: ModuleStatus) -> dict[str, Any]:
    document = status.to_json()
    if status.error is not None:
        document["error"] = encode_error(status.error)
    return document


#: The states by their text: a lookup costs a tenth of ``ModuleState(text)``, and a fleet's
#: records hold tens of thousands (``/status``, the status page).
_STATES = {str(state): state for state in ModuleState}


def _status_from_json(document: dict[str, Any]) -> ModuleStatus:
    """A module's status; one stored before errors were kept reads its reason: ``Failed`` was
    a permanent error, ``Retrying`` a transient one (its delay unknown: none)."""
    text = document.get("state")
    state = (_STATES.get(text) or ModuleState(text)) if text else None
    error = document.get("error")
    kept = None
    if error is not None:
        kept = decode_error(error)
    elif state is ModuleState.ERROR:
        permanent = document.get("reason") == Reason.FAILED.value
        kept = ModuleError(ModuleError.cause_named("", permanent), document.get("message", ""))
    return ModuleStatus(
        document["module"],
        state,
        parse_reason(document.get("reason"), reason_of_state(state)),
        document.get("message") or "",
        document.get("version"),
        kept,
        document.get("readyVersion"),
        document.get("targetVersion"),
    )
