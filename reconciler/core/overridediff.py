"""How a pull request changes the enforced configuration of one module on one runtime (pure).

The fleet diff (``diff --base``) shows a change of a ``config`` override as a reconfiguration
of the module's default configuration: each enforced field whose value changes, starts or stops
being enforced (released: its value stays, the user's), with its cause: the runtime's module
entry (``runtimes/x.yaml: spec.modules[2].config.logLevel``) or the channel
(``channels/regular.yaml: spec.config.serverless.logLevel``). Callers: the fleet diff.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from reconciler.core.enforce import split_path, value_at
from reconciler.core.fielddiff import FieldChange
from reconciler.core.model import Channel, Runtime
from reconciler.core.objects import ObjectRef
from reconciler.core.overrides import ConfigOverride, EnforcedField
from reconciler.core.plan_values import ModuleAction, ModulePlan, ObjectAction, ObjectChange
from reconciler.core.reasons import Reason


def override_fields(
    before: ConfigOverride | None, after: ConfigOverride | None
) -> tuple[FieldChange, ...]:
    """Each enforced field that changes: (path, value before or ``None``, value after or
    ``None`` when released)."""
    old, new = _values(before), _values(after)
    return tuple(
        FieldChange(path, old.get(path), new.get(path))
        for path in sorted({*old, *new})
        if old.get(path) != new.get(path)
    )


def override_causes(
    fields: Iterable[FieldChange],
    sources: tuple[ConfigOverride | None, ConfigOverride | None],
    module: str,
    where: tuple[Runtime, Channel | None],
) -> list[tuple[str, str]]:
    """(file, field) that made each field change: the runtime's entry or its channel's config."""
    by_path = {f.dotted: f for o in sources if o is not None for f in o.fields}
    causes: list[tuple[str, str]] = []
    for change in fields:
        enforced = by_path[change.path]
        if change.new is None and _nulled_by_runtime(where[0], module, enforced.path):
            enforced = EnforcedField(enforced.path, f"runtime {where[0].name}")
        tail = ".".join(enforced.path)
        cause = _cause(enforced, f"{module}.{tail}", *where)
        if cause not in causes:
            causes.append(cause)
    return causes


def reconfigured(plan: ModulePlan, ref: ObjectRef, fields: tuple[FieldChange, ...]) -> ModulePlan:
    """``plan`` with the default configuration's enforced fields changing."""
    change = ObjectChange(ObjectAction.UPDATE, ref, fields, default_configuration=True)
    released = [f.path for f in fields if f.new is None]
    notes = (
        (f"released {', '.join(released)}: the value stays, the user's to change",)
        if released
        else ()
    )
    action = plan.action if plan.action is not ModuleAction.UNCHANGED else ModuleAction.RECONFIGURE
    reason = plan.reason if plan.action is not ModuleAction.UNCHANGED else Reason.CONFIG_CHANGED
    message = f"{len(fields)} enforced field(s) of {ref.subject} change"
    return replace(
        plan,
        action=action,
        reason=reason,
        message=message if plan.action is ModuleAction.UNCHANGED else plan.message,
        changes=(*plan.changes, change),
        notes=(*plan.notes, *notes),
    )


def _values(override: ConfigOverride | None) -> dict[str, object]:
    if override is None:
        return {}
    return {f.dotted: value_at(override.spec, split_path(f.dotted)[1:]) for f in override.fields}


def _cause(
    enforced: EnforcedField, field: str, runtime: Runtime, channel: Channel | None
) -> tuple[str, str]:
    """``field`` is ``module.path``: in a channel's ``spec.config`` as it is, in the runtime's
    module entry without the module."""
    module, _, tail = field.partition(".")
    if enforced.source.startswith("runtime ") or channel is None:
        index = next((i for i, m in enumerate(runtime.modules) if m.name == module), 0)
        return runtime.source, f"spec.modules[{index}].config.{tail}"
    return channel.source, f"spec.config.{field}"


def _nulled_by_runtime(runtime: Runtime, module: str, path: tuple[str, ...]) -> bool:
    """Whether the runtime's entry of ``module`` sets the field at ``path`` to ``null``: it
    releases a field its channel enforces, so the release is the runtime's doing."""
    entry = next((m for m in runtime.modules if m.name == module), None)
    return entry is not None and value_at(entry.config, path) is None
