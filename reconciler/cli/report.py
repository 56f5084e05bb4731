"""Plans and sync results as text and JSON for people and tools (pure).

One vocabulary everywhere: module actions and states from the planner and lifecycle, object
subjects as ``Kind/namespace/name``, ``+`` create, ``~`` update, ``-`` delete, ``=`` keep (an
object dropped but marked to be kept: released, not deleted). Secret values are
already masked in the plan. Callers: ``reconciler diff`` and ``reconciler sync``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from reconciler.core.fleetdiff import (
    HELD,
    FleetDiff,
    ModuleChange,
    Outcome,
    RuntimeChange,
    SummaryLine,
)
from reconciler.core.plan_values import ModuleAction, ModulePlan, ObjectAction, ObjectChange, Plan

if TYPE_CHECKING:
    from reconciler.lifecycle.executor import SyncResult

_SYMBOLS = {
    ObjectAction.CREATE: "+",
    ObjectAction.UPDATE: "~",
    ObjectAction.DELETE: "-",
    ObjectAction.REPLACE: "-/+",
    ObjectAction.KEEP: "=",
}
#: What a line of an object change adds after its subject, by action.
_TAGS = {ObjectAction.KEEP: " (kept: released, not deleted)"}
_MODULE_SYMBOLS = {
    ModuleAction.INSTALL: "+",
    ModuleAction.UPGRADE: "^",
    ModuleAction.RECONFIGURE: "~",
    ModuleAction.UNCHANGED: "=",
    ModuleAction.REMOVE_IGNORE: "-",
    ModuleAction.REMOVE_DELETE: "-",
    ModuleAction.BLOCKED_DOWNGRADE: "!",
    ModuleAction.BLOCKED_UNKNOWN_VERSION: "!",
    ModuleAction.BLOCKED_DELETION: "!",
    ModuleAction.DEFERRED_WINDOW: "…",
}
FIELDS_SHOWN = 20


def plan_text(plan: Plan, *, details: bool = True) -> str:
    """A runtime's plan: a header, one line per module, its object changes and field diffs."""
    if plan.suspended:
        return f"runtime {plan.runtime}: suspended, nothing is changed\n"
    changed = sum(1 for m in plan.modules if m.changes_anything)
    what = "deprovision (left git): " if plan.deprovision else ""
    lines = [f"runtime {plan.runtime}: {what}{len(plan.modules)} modules, {changed} to change"]
    for module in plan.modules:
        lines.append(f"  {_MODULE_SYMBOLS[module.action]} {module_line(module)}")
        lines.extend(f"      hook {line}" for line in module.hooks)
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
        tag += _TAGS.get(change.action, "")
        lines.append(f"      {_SYMBOLS[change.action]} {change.ref.subject}{tag}")
        if details and change.action in (
            ObjectAction.UPDATE,
            ObjectAction.REPLACE,
            ObjectAction.KEEP,
        ):
            shown = change.fields[:FIELDS_SHOWN]
            lines.extend(f"          {field.format()}" for field in shown)
            if len(change.fields) > FIELDS_SHOWN:
                lines.append(f"          ... {len(change.fields) - FIELDS_SHOWN} more fields")
    return lines


def _counts(changes: Sequence[ObjectChange]) -> str:
    if not changes:
        return ""
    tally = {action: sum(1 for c in changes if c.action is action) for action in ObjectAction}
    parts = [f"{_SYMBOLS[a]}{n}" for a, n in tally.items() if n]
    return f" ({' '.join(parts)} objects)"


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


# -- fleet diffs between revisions ---------------------------------------------------------------

Style = Callable[[str, str], str]
MARKDOWN_LIMIT = 60_000
_OUTCOME_COLOURS = {
    Outcome.NOW: "green",
    Outcome.WINDOW: "cyan",
    Outcome.HELD_DOWNGRADE: "yellow",
    Outcome.HELD_UNKNOWN_VERSION: "yellow",
    Outcome.HELD_SUSPENDED: "yellow",
    Outcome.HELD_BLOCKED: "yellow",
}


def _plain(text: str, colour: str) -> str:
    return text


def fleet_text(diff: FleetDiff, *, details: bool = False, style: Style = _plain) -> str:
    """Summary first, then each changed runtime's module changes with causes, then (with
    ``details``) object changes and field diffs."""
    lines = [style(_headline(diff), "bold")]
    for line in diff.summary():
        lines.append(f"  {line.format()}")
    for runtime in diff.runtimes:
        lines.append("")
        lines.append(
            style(f"runtime {runtime.runtime} ({runtime.channel}): {runtime.status}", "bold")
        )
        for change in runtime.modules:
            outcome = style(str(change.outcome), _OUTCOME_COLOURS[change.outcome])
            symbol = _MODULE_SYMBOLS[change.plan.action]
            lines.append(f"  {symbol} {_fleet_module(change)} [{outcome}]")
            lines.extend(f"      because {c.format()}" for c in change.causes)
            lines.extend(f"      hook {line}" for line in change.plan.hooks)
            if details:
                lines.extend(_change_lines(change.plan.changes, True))
    return "\n".join(lines) + "\n"


def _headline(diff: FleetDiff) -> str:
    if not diff.has_changes:
        return f"fleet diff {diff.base} -> {diff.head}: no changes ({diff.unchanged} runtimes)"
    second = "; needs a second look (deletions or held changes)" if diff.needs_second_look else ""
    return (
        f"fleet diff {diff.base} -> {diff.head}: {len(diff.runtimes)} runtimes change, "
        f"{diff.unchanged} unchanged{second}"
    )


def _fleet_module(change: ModuleChange) -> str:
    plan = change.plan
    counts = _counts(plan.changes)
    return f"{plan.module} {plan.action}{_versions(plan)}: {plan.message}{counts}"


def fleet_markdown(diff: FleetDiff, *, limit: int = MARKDOWN_LIMIT) -> str:
    """A PR comment: headline, summary table, one collapsible section per runtime; cut to fit
    ``limit`` characters with a note of what was left out."""
    head = [f"### Fleet diff `{diff.base}` → `{diff.head}`", "", _md_headline(diff), ""]
    summary = diff.summary()
    if summary:
        head += [
            "| module | change | runtimes | now | in window | held |",
            "|---|---|---|---|---|---|",
        ]
        head += [_md_summary_row(line) for line in summary]
        head.append("")
    text = "\n".join(head) + "\n"
    note_room = 400
    shown = 0
    for runtime in diff.runtimes:
        section = _md_runtime(runtime)
        if len(text) + len(section) + note_room > limit:
            break
        text += section
        shown += 1
    left = len(diff.runtimes) - shown
    if left:
        text += (
            f"\n_{left} more changed runtime(s) not shown to keep this comment short; "
            "`reconciler diff --base … --format json` lists every one._\n"
        )
    return text


def _md_headline(diff: FleetDiff) -> str:
    if not diff.has_changes:
        return f"No changes ({diff.unchanged} runtimes)."
    text = f"**{len(diff.runtimes)} runtimes change**, {diff.unchanged} unchanged."
    if diff.needs_second_look:
        text += " :warning: **Needs a second look**: deletions or held changes."
    return text


def _md_summary_row(line: SummaryLine) -> str:
    counts = dict(line.outcomes)
    held = sum(n for o, n in line.outcomes if o in HELD)
    versions = (
        f"{line.from_version} → {line.to_version}"
        if line.from_version and line.to_version and line.from_version != line.to_version
        else line.to_version or line.from_version or ""
    )
    return (
        f"| {_md_escape(line.module)} | {line.action} {versions} | {line.runtimes} "
        f"| {counts.get(Outcome.NOW, 0)} | {counts.get(Outcome.WINDOW, 0)} | {held} |"
    )


def _md_runtime(runtime: RuntimeChange) -> str:
    count = len(runtime.modules)
    title = f"{runtime.runtime} ({runtime.channel}): {runtime.status}, {count} module change(s)"
    lines = [f"<details><summary>{_html_escape(title)}</summary>", ""]
    for change in runtime.modules:
        plan = change.plan
        causes = "; ".join(f"`{c.format()}`" for c in change.causes)
        what = f"**{_md_escape(plan.module)}** {plan.action}{_versions(plan)}"
        how = f"_{change.outcome}_{_counts(plan.changes)}: {_md_escape(plan.message)}"
        lines.append(f"- {what}, {how} (because {causes})")
    lines += ["", "</details>", ""]
    return "\n".join(lines) + "\n"


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def _html_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
