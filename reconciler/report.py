"""Plans and sync results as text and JSON for people and tools (pure).

One vocabulary everywhere: module actions and states from the planner and lifecycle, object
subjects as ``Kind/namespace/name``, ``+`` create, ``~`` update, ``-`` delete. Secret values are
already masked in the plan. Callers: ``reconciler diff`` and ``reconciler sync``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reconciler.lifecycle import ModuleStatus, SyncResult
from reconciler.plan import ModuleAction, ModulePlan, ObjectAction, ObjectChange, Plan

_SYMBOLS = {ObjectAction.CREATE: "+", ObjectAction.UPDATE: "~", ObjectAction.DELETE: "-"}
_MODULE_SYMBOLS = {
    ModuleAction.INSTALL: "+",
    ModuleAction.UPGRADE: "^",
    ModuleAction.RECONFIGURE: "~",
    ModuleAction.UNCHANGED: "=",
    ModuleAction.REMOVE_IGNORE: "-",
    ModuleAction.REMOVE_DELETE: "-",
    ModuleAction.BLOCKED_DOWNGRADE: "!",
    ModuleAction.BLOCKED_DELETION: "!",
    ModuleAction.DEFERRED_WINDOW: "…",
}
FIELDS_SHOWN = 20


def plan_text(plan: Plan, *, details: bool = True) -> str:
    """A runtime's plan: a header, one line per module, its object changes and field diffs."""
    if plan.suspended:
        return f"runtime {plan.runtime}: suspended, nothing is changed\n"
    changed = sum(1 for m in plan.modules if m.changes_anything)
    lines = [f"runtime {plan.runtime}: {len(plan.modules)} modules, {changed} to change"]
    for module in plan.modules:
        lines.append(f"  {_MODULE_SYMBOLS[module.action]} {module_line(module)}")
        lines.extend(_change_lines(module.changes, details))
    return "\n".join(lines) + "\n"


def module_line(module: ModulePlan) -> str:
    """``serverless  upgrade 1.1.0 -> 1.2.0 [Upgrade] message``."""
    versions = _versions(module)
    return f"{module.module:<16} {module.action}{versions} [{module.reason}] {module.message}"


def _versions(module: ModulePlan) -> str:
    if module.from_version and module.to_version and module.from_version != module.to_version:
        return f" {module.from_version} -> {module.to_version}"
    version = module.to_version or module.from_version
    return f" {version}" if version else ""


def _change_lines(changes: Sequence[ObjectChange], details: bool) -> list[str]:
    lines = []
    for change in changes:
        tag = " (default configuration)" if change.default_configuration else ""
        lines.append(f"      {_SYMBOLS[change.action]} {change.ref.subject}{tag}")
        if details and change.action is ObjectAction.UPDATE:
            shown = change.fields[:FIELDS_SHOWN]
            lines.extend(f"          {field.format()}" for field in shown)
            if len(change.fields) > FIELDS_SHOWN:
                lines.append(f"          ... {len(change.fields) - FIELDS_SHOWN} more fields")
    return lines


def result_text(result: SyncResult) -> str:
    """What a sync did and each module's state, then the runtime's state."""
    if result.plan.suspended:
        return f"runtime {result.runtime}: suspended, nothing changed\n"
    lines = [f"runtime {result.runtime}: {result.state}"]
    for module in result.plan.modules:
        counts = _counts(module.changes)
        lines.append(f"  {_MODULE_SYMBOLS[module.action]} {module_line(module)}{counts}")
    lines.append("  states:")
    lines.extend(f"    {status_line(s)}" for s in result.modules)
    return "\n".join(lines) + "\n"


def _counts(changes: Sequence[ObjectChange]) -> str:
    if not changes:
        return ""
    tally = {action: sum(1 for c in changes if c.action is action) for action in ObjectAction}
    parts = [f"{_SYMBOLS[a]}{n}" for a, n in tally.items() if n]
    return f" ({' '.join(parts)} objects)"


def status_line(status: ModuleStatus) -> str:
    """``serverless  Ready  1.2.0  Upgrade: message``."""
    state = str(status.state) if status.state else "Removed"
    version = status.version or "-"
    return f"{status.module:<16} {state:<10} {version:<8} {status.reason}: {status.message}"


def plans_json(plans: Sequence[Plan], errors: dict[str, str]) -> dict[str, Any]:
    """JSON of several runtimes' plans and of the runtimes that could not be planned."""
    return {
        "hasChanges": any(p.has_changes for p in plans),
        "runtimes": [p.to_json() for p in plans],
        "errors": [{"runtime": r, "error": e} for r, e in sorted(errors.items())],
    }


def results_json(results: Sequence[SyncResult], errors: dict[str, str]) -> dict[str, Any]:
    """JSON of several runtimes' sync results."""
    return {
        "runtimes": [
            {
                "runtime": r.runtime,
                "state": str(r.state),
                "dryRun": r.dry_run,
                "plan": r.plan.to_json(),
                "modules": [s.to_json() for s in r.modules],
            }
            for r in results
        ],
        "errors": [{"runtime": r, "error": e} for r, e in sorted(errors.items())],
    }
