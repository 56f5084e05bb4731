"""Why a module changes on a runtime between two revisions of the config repo (pure): the file
and field that made it (``channels/regular.yaml: spec.modules.serverless``), for a version, a
strategy, an inclusion or a removal; a change of rendered values is traced by
``core.valuecauses``, a change of enforced configuration by ``core.overridediff``. Callers: the
fleet diff (``core.fleetdiff``).
"""

from __future__ import annotations

from dataclasses import dataclass

from reconciler.core.model import ConfigRepo, Runtime
from reconciler.core.resolve import Inclusion, Resolution, ResolvedModule, VersionSource
from reconciler.core.valuecauses import rendered_causes


@dataclass(frozen=True, slots=True)
class Cause:
    """The file and field whose change made a change happen, and at which revision."""

    path: str
    field: str
    revision: str

    def format(self) -> str:
        """``channels/regular.yaml: spec.modules.serverless``."""
        return f"{self.path}: {self.field}"

    def to_json(self) -> dict[str, str]:
        """JSON form."""
        return {"path": self.path, "field": self.field, "revision": self.revision}


def desired_causes(
    base: ConfigRepo,
    head: ConfigRepo,
    runtime: Runtime,
    before: Resolution | None,
    after: Resolution | None,
    old: ResolvedModule | None,
    new: ResolvedModule,
    revision: str,
) -> tuple[Cause, ...]:
    """Why ``new`` is what the runtime gets at the head: a new runtime, a module it did not
    have, a version or strategy that changed, values it renders with, or the version's files."""
    if before is None:
        return (Cause(runtime.source, "(new runtime)", revision),)
    if old is None:
        return _why_included(base, head, runtime, new, revision)
    causes = []
    if old.version != new.version:
        causes.append(_why_version(base, head, runtime, old, new, revision))
    if old.strategy != new.strategy:
        causes.append(Cause(runtime.source, _entry(runtime, new.name, "strategy"), revision))
    if not causes:
        found = rendered_causes((base, head), (before.runtime, runtime), new.name, new.version)
        causes.extend(Cause(path, name, revision) for path, name in found)
    if not causes:
        module = head.modules[new.name]
        folder = module.source.rsplit("/", 1)[0]
        causes.append(Cause(f"{folder}/{new.version}", "manifest.yaml or default.yaml", revision))
    return tuple(causes)


def removed_causes(
    base: ConfigRepo,
    head: ConfigRepo,
    runtime: Runtime,
    before: Resolution | None,
    after: Resolution | None,
    old: ResolvedModule,
    revision: str,
) -> tuple[Cause, ...]:
    """Why the runtime loses ``old``: the runtime, the module or the reason it had it is gone."""
    if after is None:
        return (Cause(runtime.source, "(runtime removed)", revision),)
    if old.name not in head.modules:
        return (Cause(base.modules[old.name].source, "(module removed)", revision),)
    return _why_included(head, base, runtime, old, revision, removed=True)


def _why_included(
    was: ConfigRepo,
    now: ConfigRepo,
    runtime: Runtime,
    module: ResolvedModule,
    revision: str,
    removed: bool = False,
) -> tuple[Cause, ...]:
    """Why a module joined (or, with ``removed``, left) a runtime."""
    if module.inclusion is Inclusion.LISTED:
        return (
            Cause(
                runtime.source, "spec.modules" + (" (entry removed)" if removed else ""), revision
            ),
        )
    if module.inclusion is Inclusion.MANDATORY:
        return (
            Cause(
                now.modules[module.name].source
                if module.name in now.modules
                else was.modules[module.name].source,
                "spec.mandatory",
                revision,
            ),
        )
    causes = []
    for requirer in module.required_by:
        source = (now.modules.get(requirer) or was.modules[requirer]).source
        old_deps = was.modules[requirer].depends_on if requirer in was.modules else ()
        new_deps = now.modules[requirer].depends_on if requirer in now.modules else ()
        if (module.name in old_deps) != (module.name in new_deps):
            causes.append(Cause(source, "spec.dependsOn", revision))
        else:
            causes.append(Cause(runtime.source, f"spec.modules ({requirer} needs it)", revision))
    return tuple(causes)


def _why_version(
    base: ConfigRepo,
    head: ConfigRepo,
    runtime: Runtime,
    old: ResolvedModule,
    new: ResolvedModule,
    revision: str,
) -> Cause:
    name = new.name
    if new.source is VersionSource.PIN or old.source is VersionSource.PIN:
        return Cause(runtime.source, _entry(runtime, name, "version"), revision)
    if new.channel != old.channel:
        if VersionSource.MODULE_CHANNEL in (new.source, old.source):
            return Cause(runtime.source, _entry(runtime, name, "channel"), revision)
        return Cause(runtime.source, "spec.channel", revision)
    channel = head.channels.get(new.channel or "") or base.channels[old.channel or ""]
    return Cause(channel.source, f"spec.modules.{name}", revision)


def _entry(runtime: Runtime, module: str, field_name: str) -> str:
    index = next((i for i, ref in enumerate(runtime.modules) if ref.name == module), None)
    return f"spec.modules[{index}].{field_name}" if index is not None else "spec.modules"
