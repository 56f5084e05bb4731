"""The fleet-wide plan between two revisions of the config repo (pure).

For every runtime at either revision: which modules it gets or loses, which change version or
strategy, and what each change does under the lifecycle rules, as the planner decides it when
the base revision is what runs (or what a live cluster shows, when one is given): upgrade now,
wait for the maintenance window, held as a downgrade, held because the runtime is suspended,
install, removal by strategy, blocked deletion. Every change names its cause: the file and
field that made it (``channels/regular.yaml: spec.modules.serverless``; traced by
``core.fleetcauses``). A module version's planning is done once per distinct situation, not once
per runtime. Callers: ``reconciler diff --base``, the review, the daemon, the benchmark.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from reconciler.core.fielddiff import FieldChange
from reconciler.core.fleetcauses import Cause, desired_causes, removed_causes
from reconciler.core.hooks import entry_hooks
from reconciler.core.inventory import Inventory
from reconciler.core.model import ConfigRepo, Runtime, Strategy
from reconciler.core.objects import ObjectRef
from reconciler.core.overridediff import override_causes, override_fields, reconfigured
from reconciler.core.overrides import ConfigOverride, module_channel
from reconciler.core.plan import handover_notes, plan_module, plan_removal
from reconciler.core.plan_values import (
    Context,
    DesiredModule,
    LiveModule,
    ModuleAction,
    ModulePlan,
    ObjectAction,
    desired_modules,
    prepared_module,
)
from reconciler.core.reasons import Reason
from reconciler.core.render import Renderer, removal_order
from reconciler.core.resolve import Resolution, ResolvedModule, resolve_runtime
from reconciler.core.serverform import server_form


class Outcome(StrEnum):
    """How a change lands, for the summary."""

    NOW = "now"
    WINDOW = "in their maintenance window"
    HELD_DOWNGRADE = "held: downgrade"
    HELD_SUSPENDED = "held: suspended"
    HELD_BLOCKED = "held: deletion blocked"
    HELD_UNKNOWN_VERSION = "held: unknown running version"


HELD = frozenset(
    {
        Outcome.HELD_DOWNGRADE,
        Outcome.HELD_SUSPENDED,
        Outcome.HELD_BLOCKED,
        Outcome.HELD_UNKNOWN_VERSION,
    }
)


@dataclass(frozen=True, slots=True)
class ModuleChange:
    """One module's change on one runtime."""

    module: str
    plan: ModulePlan
    outcome: Outcome
    causes: tuple[Cause, ...]

    @property
    def deletes(self) -> bool:
        """Whether the change deletes the module, or a CRD it no longer ships (a manifest's new
        version, or a chart's render with new values: what the deletion brake counts)."""
        if self.plan.action in (ModuleAction.REMOVE_DELETE, ModuleAction.BLOCKED_DELETION):
            return True
        return any(
            c.action is ObjectAction.DELETE and c.ref.kind == "CustomResourceDefinition"
            for c in self.plan.changes
        )

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        return {
            **self.plan.to_json(),
            "outcome": str(self.outcome),
            "causes": [c.to_json() for c in self.causes],
        }


@dataclass(frozen=True, slots=True)
class RuntimeChange:
    """One runtime's changes; ``status`` is added, removed or changed."""

    runtime: str
    status: str
    channel: str
    modules: tuple[ModuleChange, ...]

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "runtime": self.runtime,
            "status": self.status,
            "channel": self.channel,
            "modules": [m.to_json() for m in self.modules],
        }


@dataclass(frozen=True, slots=True)
class SummaryLine:
    """Runtimes sharing one module change, counted by outcome."""

    module: str
    action: str
    from_version: str | None
    to_version: str | None
    outcomes: tuple[tuple[Outcome, int], ...]

    @property
    def runtimes(self) -> int:
        """How many runtimes it concerns."""
        return sum(n for _, n in self.outcomes)

    def format(self) -> str:
        """``serverless 1.2.0 -> 1.3.0 on 37 runtimes: 30 now, 5 in their maintenance window``."""
        if self.from_version and self.to_version and self.from_version != self.to_version:
            what = f"{self.module} {self.from_version} -> {self.to_version}"
        else:
            what = f"{self.module} {self.to_version or self.from_version or ''}".strip()
        counts = ", ".join(f"{n} {outcome}" for outcome, n in self.outcomes)
        plural = "s" if self.runtimes != 1 else ""
        return f"{what} {self.action} on {self.runtimes} runtime{plural}: {counts}"

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "module": self.module,
            "action": self.action,
            "fromVersion": self.from_version,
            "toVersion": self.to_version,
            "runtimes": self.runtimes,
            "outcomes": {str(o): n for o, n in self.outcomes},
        }


@dataclass(frozen=True, slots=True)
class FleetDiff:
    """The whole fleet's changes between two revisions."""

    base: str
    head: str
    runtimes: tuple[RuntimeChange, ...]
    unchanged: int

    @property
    def has_changes(self) -> bool:
        """Whether anything changes anywhere."""
        return bool(self.runtimes)

    @property
    def needs_second_look(self) -> bool:
        """Whether a change deletes a runtime, a module or a CRD, or is held (exit code 3)."""
        return any(
            r.status == "removed" or any(m.deletes or m.outcome in HELD for m in r.modules)
            for r in self.runtimes
        )

    def summary(self) -> list[SummaryLine]:
        """Module changes grouped by module, versions and action; biggest first."""
        groups: dict[tuple[str, str, str | None, str | None], Counter[Outcome]] = {}
        for runtime in self.runtimes:
            for change in runtime.modules:
                plan = change.plan
                key = (change.module, _verb(plan), plan.from_version, plan.to_version)
                groups.setdefault(key, Counter())[change.outcome] += 1
        lines = [
            SummaryLine(
                m, a, f, t, tuple(sorted(c.items(), key=lambda i: list(Outcome).index(i[0])))
            )
            for (m, a, f, t), c in groups.items()
        ]
        return sorted(lines, key=lambda s: (-s.runtimes, s.module, s.action, str(s.to_version)))

    def to_json(self) -> dict[str, Any]:
        """The documented JSON form (docs/fleet-diff.md)."""
        added = sum(1 for r in self.runtimes if r.status == "added")
        removed = sum(1 for r in self.runtimes if r.status == "removed")
        return {
            "schemaVersion": 1,
            "base": self.base,
            "head": self.head,
            "hasChanges": self.has_changes,
            "needsSecondLook": self.needs_second_look,
            "counts": {
                "runtimesChanged": len(self.runtimes),
                "runtimesUnchanged": self.unchanged,
                "runtimesAdded": added,
                "runtimesRemoved": removed,
            },
            "summary": [line.to_json() for line in self.summary()],
            "runtimes": [r.to_json() for r in self.runtimes],
        }


def _verb(plan: ModulePlan) -> str:
    return {
        ModuleAction.DEFERRED_WINDOW: "upgrade",
        ModuleAction.BLOCKED_DOWNGRADE: "downgrade",
        ModuleAction.BLOCKED_DELETION: "remove-delete",
    }.get(plan.action, str(plan.action))


@dataclass(slots=True)
class FleetDiffer:
    """Compares the fleet at ``base`` and ``head``; ``live`` (runtime -> module -> what its
    cluster shows) replaces the assumption that the base revision is what runs."""

    base: ConfigRepo
    head: ConfigRepo
    now: datetime
    base_label: str = "base"
    head_label: str = "head"
    live: Mapping[str, Mapping[str, LiveModule]] | None = None
    _base_renderer: Renderer = field(init=False)
    _head_renderer: Renderer = field(init=False)
    _plans: dict[tuple[Any, ...], ModulePlan] = field(default_factory=dict, init=False)
    _assumed_live: dict[tuple[Any, ...], LiveModule] = field(default_factory=dict, init=False)
    #: Whether a plain module version has the same objects at both revisions (for every runtime).
    _same_plain: dict[tuple[str, str], bool] = field(default_factory=dict, init=False)
    #: Modules some channel of either revision enforces configuration of.
    _channel_config: frozenset[str] = field(default=frozenset(), init=False)
    #: Runtime name -> whether a module entry of it has a ``config`` at either revision.
    _configured: dict[str, bool] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self._base_renderer = Renderer(self.base)
        self._head_renderer = Renderer(self.head)
        channels = (*self.base.channels.values(), *self.head.channels.values())
        self._channel_config = frozenset(m for c in channels for m, v in c.config.items() if v)

    @property
    def planned_situations(self) -> int:
        """How many distinct module changes were planned (the rest reused a plan)."""
        return len(self._plans)

    @property
    def assumed_situations(self) -> int:
        """How many base module versions were put in the server's form (once each)."""
        return len(self._assumed_live)

    def diff(self) -> FleetDiff:
        """The fleet diff."""
        names = sorted(set(self.base.runtimes) | set(self.head.runtimes))
        changes = [c for c in (self._runtime(n) for n in names) if c is not None]
        return FleetDiff(
            self.base_label, self.head_label, tuple(changes), len(names) - len(changes)
        )

    # -- one runtime -----------------------------------------------------------------------------

    def _runtime(self, name: str) -> RuntimeChange | None:
        old, new = self.base.runtimes.get(name), self.head.runtimes.get(name)
        before = resolve_runtime(self.base, old) if old else None
        after = resolve_runtime(self.head, new) if new else None
        runtime = new or old
        assert runtime is not None
        modules = self._modules(runtime, before, after)
        if old is not None and new is not None and not modules:
            return None
        status = "added" if old is None else "removed" if new is None else "changed"
        return RuntimeChange(name, status, runtime.channel, tuple(modules))

    def _modules(
        self, runtime: Runtime, before: Resolution | None, after: Resolution | None
    ) -> list[ModuleChange]:
        old = {m.name: m for m in before.modules} if before else {}
        new = {m.name: m for m in after.modules} if after else {}
        live = self.live.get(runtime.name) if self.live is not None else None
        changes = []
        for resolved in after.modules if after else ():
            change = self._desired(runtime, before, after, old.get(resolved.name), resolved, live)
            if change is not None:
                changes.append(change)
        gone = [n for n in old if n not in new]
        dependencies = {n: m.depends_on for n, m in self.base.modules.items()}
        for name in removal_order(gone, dependencies):
            changes.append(self._removed(runtime, before, after, old[name], live))
        return _handed_over(changes)

    def _desired(
        self,
        runtime: Runtime,
        before: Resolution | None,
        after: Resolution | None,
        old: ResolvedModule | None,
        new: ResolvedModule,
        live: Mapping[str, LiveModule] | None,
    ) -> ModuleChange | None:
        overrides = self._overrides(before, after, old, new)
        fields = override_fields(*overrides) if old is not None and any(overrides) else ()
        same = live is None and old is not None and self._same(old, new, runtime.name)
        if same and not fields:
            return None
        context = Context.of(self.head, runtime.name, self.now)
        if live is not None and after is not None:  # as sync plans it: the runtime's own objects
            desired = self._stamped_module(after, new)
            the_plan = plan_module(context, desired, live.get(new.name) or LiveModule())
        elif same and old is not None:  # only enforced fields change
            desired = self._desired_module(new, runtime.name)
            the_plan = ModulePlan(
                new.name, ModuleAction.UNCHANGED, Reason.UP_TO_DATE, "", old.version, new.version
            )
        else:
            desired = self._desired_module(new, runtime.name)
            the_plan = self._cached_plan(context, desired, old, new)
            if old is not None and _renders_alike(the_plan, fields):
                return None  # another render, the same objects (a value no template reads)
        the_plan = entry_hooks(the_plan, desired.hooks)
        if fields and live is None and desired.default_configuration is not None:  # else planned
            ref = ObjectRef.of(desired.default_configuration.body)
            the_plan = reconfigured(the_plan, ref, fields)
        if (
            live is not None
            and not the_plan.changes_anything
            and the_plan.action in (ModuleAction.UNCHANGED,)
        ):
            return None
        causes = self._causes(runtime, (before, after), (old, new), overrides, fields)
        return ModuleChange(new.name, the_plan, _outcome(the_plan, runtime), causes)

    def _causes(
        self,
        runtime: Runtime,
        resolutions: tuple[Resolution | None, Resolution | None],
        modules: tuple[ResolvedModule | None, ResolvedModule],
        overrides: tuple[ConfigOverride | None, ConfigOverride | None],
        fields: tuple[FieldChange, ...],
    ) -> tuple[Cause, ...]:
        """Why a module changes: its version, strategy or content, and each enforced field of
        its configuration that changes (then only those when nothing else changed)."""
        old, new = modules
        causes: tuple[Cause, ...] = ()
        if not fields or old is None or not self._same(old, new, runtime.name):
            causes = desired_causes(
                self.base, self.head, runtime, *resolutions, old, new, self.head_label
            )
        channel = self.head.channels.get(module_channel(runtime, new.name))
        found = override_causes(fields, overrides, new.name, (runtime, channel))
        return causes + tuple(Cause(path, name, self.head_label) for path, name in found)

    def _overrides(
        self,
        before: Resolution | None,
        after: Resolution | None,
        old: ResolvedModule | None,
        new: ResolvedModule,
    ) -> tuple[ConfigOverride | None, ConfigOverride | None]:
        """The enforced configuration of the module at the base and at the head (none, at
        once, when no channel and neither revision of the runtime's entries has a ``config``)."""
        if new.name not in self._channel_config and not self._runtime_config(before, after):
            return None, None
        was = self._base_renderer.override(before, old) if before and old else None
        now = self._head_renderer.override(after, new) if after else None
        return was, now

    def _runtime_config(self, before: Resolution | None, after: Resolution | None) -> bool:
        """Whether a module entry of the runtime has a ``config`` at either revision (once
        per runtime)."""
        either = after or before
        name = either.runtime.name if either is not None else ""
        known = self._configured.get(name)
        if known is None:
            entries = [m for r in (before, after) if r for m in r.runtime.modules]
            known = self._configured[name] = any(m.config for m in entries)
        return known

    def _removed(
        self,
        runtime: Runtime,
        before: Resolution | None,
        after: Resolution | None,
        old: ResolvedModule,
        live: Mapping[str, LiveModule] | None,
    ) -> ModuleChange:
        module_live = (live or {}).get(old.name) if live is not None else None
        if module_live is None or module_live.inventory is None:
            module_live = self._assumed(old, runtime.name)
        assert module_live is not None
        the_plan = plan_removal(module_live)
        causes = removed_causes(self.base, self.head, runtime, before, after, old, self.head_label)
        return ModuleChange(old.name, the_plan, _outcome(the_plan, runtime), causes)

    # -- planning, once per situation ---------------------------------------------------------

    def _same(self, old: ResolvedModule, new: ResolvedModule, runtime: str) -> bool:
        if (old.version, old.strategy) != (new.version, new.strategy):
            return False
        before = self.base.modules[old.name].versions[old.version]
        after = self.head.modules[new.name].versions[new.version]
        if before.kind.templated or after.kind.templated:  # the same render, or not
            keys = (r.rendered.get((runtime, old.name)) for r in (self.base, self.head))
            return len({k.key if k is not None else None for k in keys}) == 1
        same = self._same_plain.get((old.name, old.version))
        if same is None:
            same = _same_content(before.objects, after.objects) and _same_content(
                (before.default_configuration,), (after.default_configuration,)
            )
            self._same_plain[(old.name, old.version)] = same
        return same

    def _stamped_module(self, resolution: Resolution, resolved: ResolvedModule) -> DesiredModule:
        """``resolved`` as ``sync`` applies it to ``resolution``'s runtime: the runtime's label
        and the enforced configuration on its objects (compared with a live cluster)."""
        (desired,) = desired_modules(self.head, resolution, self._head_renderer, (resolved.name,))
        return desired

    def _desired_module(self, resolved: ResolvedModule, runtime: str) -> DesiredModule:
        return prepared_module(self._head_renderer, resolved, runtime)

    def _assumed(self, old: ResolvedModule | None, runtime: str) -> LiveModule | None:
        """What runs when the base revision is deployed: its objects and inventory (once per
        module version, strategy and render: nothing else goes into it)."""
        if old is None:
            return None
        key = (old.name, old.version, old.strategy, self._render_keys(runtime, old.name)[0])
        known = self._assumed_live.get(key)
        if known is None:
            known = self._assumed_live[key] = self._assume(old, runtime)
        return known

    def _assume(self, old: ResolvedModule, runtime: str) -> LiveModule:
        base = prepared_module(self._base_renderer, old, runtime, hooks=False)
        prepared = self._base_renderer.prepare(old, runtime)  # base's objects (kept prepared)
        objects = {ObjectRef.of(o.body): server_form(o.body) for o in prepared}  # as stored
        manifest = tuple(ObjectRef.of(o.body) for o in base.objects)
        default = base.default_configuration
        ours = (
            ObjectRef.of(default.body)
            if default is not None and old.strategy is Strategy.CREATE_AND_DELETE
            else None
        )
        inventory = Inventory(
            "", old.name, old.version, old.strategy, manifest, base.managed_kinds(), ours, True
        )
        return LiveModule(inventory, objects, old.version)

    def _cached_plan(
        self,
        context: Context,
        desired: DesiredModule,
        old: ResolvedModule | None,
        new: ResolvedModule,
    ) -> ModulePlan:
        """The plan of one situation. The planner reads the runtime's window only for a
        version that requires downtime (deferred outside it), so only then is it the key's."""
        window = context.window
        timing = None
        if self.head.modules[new.name].versions[new.version].requires_downtime:
            from reconciler.core.windows import in_window  # zoneinfo: only for downtime

            timing = (window, in_window(window, context.now))
        key = (
            new.name,
            old.version if old else None,
            old.strategy if old else None,
            new.version,
            new.strategy,
            timing,
            self._render_keys(context.runtime, new.name),
        )
        cached = self._plans.get(key)
        if cached is None:
            live = self._assumed(old, context.runtime) or LiveModule()
            cached = self._plans[key] = plan_module(context, desired, live)
        return cached

    def _render_keys(self, runtime: str, module: str) -> tuple[str | None, str | None]:
        """Which renders of a templated module the runtime has at both revisions (none for a
        plain one): runtimes with the same renders share their plan."""
        found = (r.rendered.get((runtime, module)) for r in (self.base, self.head))
        keys = tuple(f.key if f is not None else None for f in found)
        return keys[0], keys[1]


def _handed_over(changes: list[ModuleChange]) -> list[ModuleChange]:
    """L12: an object one module's plan deletes and another's applies on the same runtime moves
    from the one to the other: handed over, so the giver's deletion is dropped (and noted)."""
    applied = {
        c.ref: m.module
        for m in changes
        for c in m.plan.changes
        if c.action is not ObjectAction.DELETE and not c.default_configuration
    }
    handed_changes = []
    for change in changes:
        plan = change.plan
        handed = {
            c.ref: applied[c.ref]
            for c in plan.changes
            if c.action is ObjectAction.DELETE
            and applied.get(c.ref, change.module) != change.module
        }
        if handed:
            kept = tuple(
                c
                for c in plan.changes
                if c.action is not ObjectAction.DELETE or c.ref not in handed
            )
            plan = replace(plan, changes=kept, notes=plan.notes + handover_notes(handed))
            change = replace(change, plan=plan)
        handed_changes.append(change)
    return handed_changes


def _renders_alike(the_plan: ModulePlan, fields: tuple[FieldChange, ...]) -> bool:
    """Whether a changed module plans no change at all (values no template reads)."""
    return (
        not fields and the_plan.action is ModuleAction.UNCHANGED and not the_plan.changes_anything
    )


def _same_content(before: tuple[Any, ...], after: tuple[Any, ...]) -> bool:
    """Objects parsed from the same blob are the same Python objects; else compare values."""
    if len(before) != len(after):
        return False
    return all(a is b or a == b for a, b in zip(before, after, strict=True))


def _outcome(plan: ModulePlan, runtime: Runtime) -> Outcome:
    if runtime.suspend:
        return Outcome.HELD_SUSPENDED
    return {
        ModuleAction.DEFERRED_WINDOW: Outcome.WINDOW,
        ModuleAction.BLOCKED_DOWNGRADE: Outcome.HELD_DOWNGRADE,
        ModuleAction.BLOCKED_UNKNOWN_VERSION: Outcome.HELD_UNKNOWN_VERSION,
        ModuleAction.BLOCKED_DELETION: Outcome.HELD_BLOCKED,
    }.get(plan.action, Outcome.NOW)
