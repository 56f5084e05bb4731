"""Resolution: which modules a runtime gets, at which version, and why (pure).

For one runtime: the modules it lists, every mandatory module, and the dependencies of both
(rule C5), each with its resolved version (pin > module channel > runtime channel, rule C2) and
the origin of that version, in dependency order (a module after the modules it depends on, ties
by name). Problems are returned as data, so the validator reports them with file and line and
every other caller can trust a valid repo to resolve cleanly. Callers: the validator, the
renderer, the CLI, the lifecycle executor and the operations runner (what the planner gets), the
deletion brake, the fleet diff and review, the daemon.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from reconciler.core.diagnostics import Pointer, did_you_mean
from reconciler.core.model import Channel, ConfigRepo, Module, ModuleRef, Runtime, Strategy
from reconciler.core.versions import sorted_versions


class VersionSource(StrEnum):
    """Where a resolved version came from, strongest first."""

    PIN = "pin"
    MODULE_CHANNEL = "module channel"
    RUNTIME_CHANNEL = "runtime channel"


class Inclusion(StrEnum):
    """Why a runtime gets a module."""

    LISTED = "listed"
    MANDATORY = "mandatory"
    DEPENDENCY = "dependency"


@dataclass(frozen=True, slots=True)
class ResolvedModule:
    """One module of a runtime with its version and the reasons for both."""

    name: str
    version: str
    source: VersionSource
    channel: str | None
    inclusion: Inclusion
    strategy: Strategy = Strategy.CREATE_AND_DELETE
    required_by: tuple[str, ...] = ()

    def origin(self) -> str:
        """Where the version came from, e.g. ``channel fast (module override)``."""
        if self.source is VersionSource.PIN:
            return "pinned"
        if self.source is VersionSource.MODULE_CHANNEL:
            return f"channel {self.channel} (module override)"
        return f"channel {self.channel}"

    def reason(self) -> str:
        """Why the runtime gets this module, e.g. ``dependency of api-gateway``."""
        if self.inclusion is Inclusion.DEPENDENCY:
            return "dependency of " + ", ".join(self.required_by)
        return str(self.inclusion)


@dataclass(frozen=True, slots=True)
class ResolveProblem:
    """A reason a runtime cannot be resolved, at a JSON pointer into its document.

    ``channel`` names the channel whose content caused the problem, if any, so the validator
    can drop problems that an error in that channel already explains.
    """

    rule: str
    message: str
    pointer: Pointer
    module: str = ""
    channel: str | None = None


@dataclass(frozen=True, slots=True)
class Resolution:
    """A runtime's modules in dependency order, and the problems found on the way."""

    runtime: Runtime
    modules: tuple[ResolvedModule, ...]
    problems: tuple[ResolveProblem, ...] = ()

    def module(self, name: str) -> ResolvedModule | None:
        """The resolved module called ``name``, if the runtime gets it."""
        return next((m for m in self.modules if m.name == name), None)


class Resolutions:
    """The resolutions made against each repo, by runtime: a repo does not change, so the brake,
    each stage of a sync and the plans ask again for free. An answer holds while the runtime is
    the same object (a new commit gives new ones); a repo's answers are forgotten with the repo,
    and :func:`dataclasses.replace` gives a repo of its own that remembers nothing. Kept beside
    the repo, not on it: the repo stays a frozen value."""

    def __init__(self) -> None:
        self._by_repo: dict[int, dict[str, Resolution]] = {}

    def known(self, repo: ConfigRepo, runtime: Runtime) -> Resolution | None:
        """The resolution of ``runtime`` made against ``repo``, if any."""
        found = self._by_repo.get(id(repo), {}).get(runtime.name)
        return found if found is not None and found.runtime is runtime else None

    def remember(self, repo: ConfigRepo, resolution: Resolution) -> None:
        """Keep ``resolution`` of one of ``repo``'s runtimes until ``repo`` is gone."""
        self._of(repo)[resolution.runtime.name] = resolution

    def share(self, source: ConfigRepo, target: ConfigRepo) -> None:
        """Let ``target`` (the same modules and channels as ``source``) know ``source``'s
        answers: the same questions give the same answers."""
        self._of(target).update(self._by_repo.get(id(source), {}))

    def __len__(self) -> int:
        """How many repos have answers kept."""
        return len(self._by_repo)

    def _of(self, repo: ConfigRepo) -> dict[str, Resolution]:
        known = self._by_repo.get(id(repo))
        if known is None:
            known = self._by_repo[id(repo)] = {}
            weakref.finalize(repo, self._by_repo.pop, id(repo), None)
        return known


#: The one memo of :func:`resolve_runtime` (the validator shares it with the repo it builds).
RESOLUTIONS = Resolutions()


def resolve_runtime(repo: ConfigRepo, runtime: Runtime) -> Resolution:
    """Resolve ``runtime`` against ``repo``; see the module docstring. Remembered
    (:data:`RESOLUTIONS`): the brake, each stage of a sync and the plans ask again."""
    known = RESOLUTIONS.known(repo, runtime)
    if known is not None:
        return known
    resolver = _Resolver(repo, runtime)
    resolver.run()
    ordered = order_by_dependencies(resolver.resolved.values(), repo.modules)
    resolution = Resolution(runtime, tuple(ordered), tuple(resolver.problems))
    RESOLUTIONS.remember(repo, resolution)
    return resolution


def order_by_dependencies(
    modules: Iterable[ResolvedModule], catalog: Mapping[str, Module]
) -> list[ResolvedModule]:
    """Modules after their dependencies, ties by name; members of a cycle last, by name."""
    pending = {m.name: m for m in modules}
    deps = {name: _deps(catalog, name) for name in pending}
    if not any(d in pending for named in deps.values() for d in named):
        return [pending[name] for name in sorted(pending)]  # none waits for another: by name
    done: list[ResolvedModule] = []
    placed: set[str] = set()
    while pending:
        ready = sorted(
            name for name in pending if all(d in placed or d not in pending for d in deps[name])
        )
        batch = ready or sorted(pending)[:1]
        for name in batch:
            done.append(pending.pop(name))
            placed.add(name)
    return done


@functools.lru_cache(maxsize=1 << 14)
def _resolved(
    name: str,
    version: str,
    source: VersionSource,
    channel: str | None,
    inclusion: Inclusion,
    strategy: Strategy,
    required_by: tuple[str, ...],
) -> ResolvedModule:
    """One object for each answer: the runtimes of a fleet resolve to few distinct modules
    (a frozen value, shared; making one costs more than finding it)."""
    return ResolvedModule(name, version, source, channel, inclusion, strategy, required_by)


def _deps(catalog: Mapping[str, Module], name: str) -> tuple[str, ...]:
    module = catalog.get(name)
    return module.depends_on if module is not None else ()


class _Resolver:
    """One resolution; collects modules and problems."""

    def __init__(self, repo: ConfigRepo, runtime: Runtime) -> None:
        self.repo = repo
        self.runtime = runtime
        self.resolved: dict[str, ResolvedModule] = {}
        self.problems: list[ResolveProblem] = []
        self.channel_ok = runtime.channel in repo.channels

    def run(self) -> None:
        if not self.channel_ok:
            message = f"channel '{self.runtime.channel}' does not exist" + did_you_mean(
                self.runtime.channel, self.repo.channels
            )
            problem = ResolveProblem("C2", message, ("spec", "channel"), "", self.runtime.channel)
            self.problems.append(problem)
        listed = {ref.name: (index, ref) for index, ref in enumerate(self.runtime.modules)}
        for index, ref in listed.values():
            self._listed(index, ref)
        for name in sorted(n for n, m in self.repo.modules.items() if m.mandatory):
            if name not in listed:
                self._implicit(name, Inclusion.MANDATORY, ())
        self._add_dependencies(listed)

    def _listed(self, index: int, ref: ModuleRef) -> None:
        at: Pointer = ("spec", "modules", index)
        if ref.name not in self.repo.modules:
            message = f"module '{ref.name}' does not exist" + did_you_mean(
                ref.name, self.repo.modules
            )
            self.problems.append(ResolveProblem("C2", message, (*at, "name"), ref.name))
            return
        if ref.channel is not None and ref.channel not in self.repo.channels:
            message = f"channel '{ref.channel}' does not exist" + did_you_mean(
                ref.channel, self.repo.channels
            )
            problem = ResolveProblem("C2", message, (*at, "channel"), ref.name, ref.channel)
            self.problems.append(problem)
            return
        self._resolve(ref.name, ref, at, Inclusion.LISTED, ())

    def _implicit(self, name: str, inclusion: Inclusion, required_by: tuple[str, ...]) -> None:
        self._resolve(name, ModuleRef(name), ("spec", "channel"), inclusion, required_by)

    def _resolve(
        self,
        name: str,
        ref: ModuleRef,
        at: Pointer,
        inclusion: Inclusion,
        required_by: tuple[str, ...],
    ) -> None:
        module = self.repo.modules[name]
        if ref.version is not None:
            if ref.version not in module.versions:
                self._no_version(module, ref.version, (*at, "version"))
                return
            self._add(
                _resolved(
                    name, ref.version, VersionSource.PIN, None, inclusion, ref.strategy, required_by
                )
            )
            return
        source = VersionSource.MODULE_CHANNEL if ref.channel else VersionSource.RUNTIME_CHANNEL
        channel_name = ref.channel or self.runtime.channel
        channel = self.repo.channels.get(channel_name)
        if channel is None:  # the runtime's channel; reported once in run()
            return
        version = self._channel_version(channel, module, at, inclusion, required_by)
        if version is not None:
            self._add(
                _resolved(name, version, source, channel_name, inclusion, ref.strategy, required_by)
            )

    def _channel_version(
        self,
        channel: Channel,
        module: Module,
        at: Pointer,
        inclusion: Inclusion,
        required_by: tuple[str, ...],
    ) -> str | None:
        version = channel.modules.get(module.name)
        if version is None:
            why = {
                Inclusion.LISTED: "",
                Inclusion.MANDATORY: " (a mandatory module)",
                Inclusion.DEPENDENCY: f" (a dependency of {', '.join(required_by)})",
            }[inclusion]
            message = (
                f"channel '{channel.name}' serves no version of module '{module.name}'{why}; "
                "pin a version or choose a channel that serves it"
            )
            self.problems.append(ResolveProblem("C2", message, at, module.name, channel.name))
            return None
        if version not in module.versions:  # the channel's own error (C3)
            self.problems.append(
                ResolveProblem(
                    "C3",
                    f"channel '{channel.name}' names a missing version",
                    at,
                    module.name,
                    channel.name,
                )
            )
            return None
        return version

    def _no_version(self, module: Module, version: str, at: Pointer) -> None:
        known = ", ".join(sorted_versions(list(module.versions))) or "none"
        message = f"module '{module.name}' has no version {version} (versions: {known})"
        self.problems.append(ResolveProblem("C2", message, at, module.name))

    def _add(self, resolved: ResolvedModule) -> None:
        self.resolved.setdefault(resolved.name, resolved)

    def _add_dependencies(self, listed: Mapping[str, tuple[int, ModuleRef]]) -> None:
        queue = list(self.resolved)
        while queue:
            name = queue.pop(0)
            for dep in _deps(self.repo.modules, name):
                if dep not in self.repo.modules:  # reported at the module (C5)
                    continue
                if dep in self.resolved:
                    self._note_required_by(dep, name)
                    continue
                if dep in listed:  # listed but unresolvable: its own problem is reported
                    continue
                self._implicit(dep, Inclusion.DEPENDENCY, (name,))
                if dep in self.resolved:
                    queue.append(dep)

    def _note_required_by(self, dep: str, by: str) -> None:
        current = self.resolved[dep]
        if current.inclusion is Inclusion.DEPENDENCY and by not in current.required_by:
            updated = ResolvedModule(
                current.name,
                current.version,
                current.source,
                current.channel,
                current.inclusion,
                current.strategy,
                tuple(sorted((*current.required_by, by))),
            )
            self.resolved[dep] = updated
