"""The text of the Kubernetes Events a lifecycle pass records (pure).

- :func:`module_event_text`: one Event per module and pass that changed anything, on its
  inventory ConfigMap: what was done to how many objects, then the objects.
- :func:`deletion_blocked_text`: the Warning on an object that holds a module's removal back.

Callers: the lifecycle's event recorder (``reconciler.lifecycle.events``).
"""

from __future__ import annotations

from collections.abc import Sequence

from reconciler.core.objects import ObjectRef
from reconciler.core.status import ChangeAction, ChangeSetEntry

#: The Event reason of a module's pass by what it did: deleted (a removal), released (an Ignore
#: removal, or an object kept by its mark), else applied (created, configured, pruned); an
#: unchanged object counts for none.
EVENT_REASONS = {
    ChangeAction.CREATED: "Applied",
    ChangeAction.CONFIGURED: "Applied",
    ChangeAction.PRUNED: "Applied",
    ChangeAction.DELETED: "Deleted",
    ChangeAction.RELEASED: "Released",
    ChangeAction.REPLACED: "Applied",
    ChangeAction.KEPT: "Released",
}
#: The objects an Event names, at most (the rest are counted).
EVENT_SUBJECTS = 12
#: The reason of the Warning on an object that blocks a removal.
DELETION_BLOCKED = "DeletionBlocked"


def counts_for_event(change: ChangeSetEntry) -> bool:
    """Whether a change is worth an Event (an unchanged object is not)."""
    return change.action in EVENT_REASONS


def module_event_text(
    module: str, version: str | None, changed: Sequence[ChangeSetEntry]
) -> tuple[str, str]:
    """(reason, message) of a module's Event: ``module widget 1.0.0: 5 created, 1 configured:
    Namespace/widget-system created, ...`` (the first :data:`EVENT_SUBJECTS` objects)."""
    counts: dict[ChangeAction, int] = {}
    for change in changed:
        counts[change.action] = counts.get(change.action, 0) + 1
    reasons = {EVENT_REASONS[a] for a in counts}
    reason = next(r for r in ("Deleted", "Released", "Applied") if r in reasons)
    summary = ", ".join(f"{n} {action}" for action, n in counts.items())
    subjects = [f"{c.subject} {c.action}" for c in changed[:EVENT_SUBJECTS]]
    if len(changed) > EVENT_SUBJECTS:
        subjects.append(f"and {len(changed) - EVENT_SUBJECTS} more")
    head = f"module {module} {version}" if version else f"module {module}"
    return reason, f"{head}: {summary}: {', '.join(subjects)}"


def deletion_blocked_text(
    module: str, ref: ObjectRef, finalizers: tuple[str, ...] | None = None
) -> str:
    """The message of the Warning on ``ref``, which holds ``module``'s removal back
    (``finalizers``: it is being deleted, and they hold it)."""
    if finalizers is None:
        return (
            f"module {module} is not removed while this {ref.kind} exists: delete it, "
            "or keep the module"
        )
    what = f"its finalizers {', '.join(finalizers)} are" if finalizers else "its content is"
    return (
        f"module {module} is not removed while this {ref.kind} is being deleted: it goes once "
        f"{what} removed (by the operator, which keeps running until then)"
    )
