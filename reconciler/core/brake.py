"""The deletion brake (S5): count what a sync would delete and decide whether it may (pure).

Every path that deletes asks here first: ``reconciler sync`` and the daemon (against what the
clusters' inventories hold, the runtimes and modules the state store knows and, for the daemon,
the commit in force) and ``operations retrigger``. A deletion is a runtime that left git, a
module that left a runtime, a CustomResourceDefinition that a module no longer ships (a
manifest's new version without it, or a chart's or overlay's render for that runtime without
it, by an upgrade or a change of values), or an object a new version may replace (it opts in to
``reconciler.dev/recreate: on-immutable`` and the new version changes it: deleted and created
again if the server refuses the change as immutable): what runs is what each cluster's
inventories list, with what the state store knows (and, for the daemon, what the commit in
force ships). A CRD marked to be kept (``reconciler.dev/prune: disabled``,
``helm.sh/resource-policy: keep``) is released, never deleted, and not counted. More deletions
than ``spec.deletionBrake.maxDeletionsPerSync`` hold the whole sync until an explicit allow; a
repo that removes every runtime the store knows is always held unless the allow names the count
or the runtimes.

A commit never loosens the brake that judges it: its :class:`Limits` are bounded by those in
force (:func:`limits_for`: the last accepted commit's, or the built-in defaults when none is
recorded), so a commit that raises ``maxDeletionsPerSync`` or sets ``allow: true`` has that
effect only once it is itself accepted. Callers: the CLI, the daemon.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from reconciler.core.model import ClusterAccess, ConfigRepo, Settings, keep_mark
from reconciler.core.objects import ObjectRef
from reconciler.core.preflight import recreated_on_immutable
from reconciler.core.resolve import resolve_runtime

#: How many deletions a message names.
SHOWN = 10
_DEFAULTS = Settings()


@dataclass(frozen=True, slots=True)
class Deletions:
    """What a sync would delete: runtimes, ``runtime/module`` removals,
    ``runtime/module/crd`` CRDs dropped by an upgrade and ``runtime/module/Kind/ns/name``
    objects an upgrade may replace (recreate on immutable)."""

    runtimes: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    crds: tuple[str, ...] = ()
    every_runtime: bool = False
    recreates: tuple[str, ...] = ()

    @property
    def count(self) -> int:
        """How many deletions the brake counts."""
        return len(self.runtimes) + len(self.modules) + len(self.crds) + len(self.recreates)

    def items(self) -> list[str]:
        """Every deletion as people read it."""
        return (
            [f"runtime {r}" for r in self.runtimes]
            + [f"module {m}" for m in self.modules]
            + [f"CRD {c}" for c in self.crds]
            + [f"recreate {r}" for r in self.recreates]
        )

    def touched_runtimes(self) -> set[str]:
        """The runtimes these deletions happen in."""
        deletions = self.modules + self.crds + self.recreates
        return set(self.runtimes) | {d.split("/", 1)[0] for d in deletions}

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "count": self.count,
            "runtimes": list(self.runtimes),
            "modules": list(self.modules),
            "crds": list(self.crds),
            "recreates": list(self.recreates),
            "everyRuntime": self.every_runtime,
        }


#: Runtime -> module -> the names of the CRDs it runs (its inventory's, or those the commit in
#: force ships).
RunningCrds = Mapping[str, Mapping[str, Collection[str]]]


def count_deletions(
    known: Mapping[str, Mapping[str, str]],
    repo: ConfigRepo,
    only: Iterable[str] | None = None,
    crds: RunningCrds | None = None,
) -> Deletions:
    """What carrying ``repo`` out deletes, given ``known`` (runtime -> module -> version it runs,
    as the state store or the commit in force says) and ``crds`` (the CRDs each module runs);
    ``only`` limits it to some runtimes."""
    chosen = set(only) if only is not None else None
    runtimes, modules, dropped, recreates = [], [], [], []
    for name in sorted(known):
        if chosen is not None and name not in chosen:
            continue
        if name not in repo.runtimes:
            runtimes.append(name)
            continue
        wanted = {m.name: m.version for m in resolve_runtime(repo, repo.runtimes[name]).modules}
        running = (crds or {}).get(name, {})
        for module, version in sorted(known[name].items()):
            if module not in wanted:
                modules.append(f"{name}/{module}")
                continue
            new = (module, wanted[module])
            gone = dropped_crds(repo, name, new, version, running.get(module, ()))
            dropped += [f"{name}/{module}/{crd}" for crd in gone]
            recreates += [
                f"{name}/{module}/{subject}"
                for subject in recreated(repo, module, version, wanted[module])
            ]
    every = chosen is None and bool(known) and not repo.runtimes
    return Deletions(tuple(runtimes), tuple(modules), tuple(dropped), every, tuple(recreates))


def dropped_crds(
    repo: ConfigRepo,
    runtime: str,
    new: tuple[str, str],
    old: str,
    running: Collection[str] = (),
) -> list[str]:
    """CRDs that module ``new[0]`` runs on ``runtime`` (``running``: its inventory's; and those
    of version ``old`` when it is a manifest) and that ``repo``, giving it version ``new[1]``,
    no longer ships there: a manifest version without them, or a render (chart, overlay) for
    that runtime without them, by an upgrade or a change of values. Deleting one deletes every
    custom resource of its kind, once none is left. One the manifest of ``old`` marks to be
    kept is released, not deleted: not counted."""
    objects = _manifest(repo, new[0], old)
    before = (set(running) | _crd_names(objects)) - _kept_crd_names(objects)
    return sorted(before - shipped_crds(repo, runtime, *new))


def shipped_crds(
    repo: ConfigRepo, runtime: str, module: str, version: str, *, kept: bool = True
) -> set[str]:
    """The CRDs ``repo`` gives ``runtime`` for version ``version`` of ``module``: a templated
    version's render for that runtime, else the version's manifest (without those marked to be
    kept, unless ``kept``)."""
    found = repo.modules[module].versions.get(version)
    if found is None:
        return set()
    objects = found.objects
    if found.kind.templated:
        rendered = repo.rendered.get((runtime, module))
        objects = rendered.objects if rendered is not None else ()
    return _crd_names(objects) - (set() if kept else _kept_crd_names(objects))


def shipped_by(repo: ConfigRepo) -> dict[str, dict[str, set[str]]]:
    """Runtime -> module -> the CRDs ``repo`` gives it (what the commit in force runs), those
    marked to be kept left out (a version that drops one releases it)."""
    return {
        name: {
            m.name: shipped_crds(repo, name, m.name, m.version, kept=False)
            for m in resolve_runtime(repo, runtime).modules
        }
        for name, runtime in repo.runtimes.items()
    }


def changed_by(current: ConfigRepo, repo: ConfigRepo) -> set[str]:
    """The runtimes whose sync under ``repo`` may delete what it would not under ``current``
    (the commit in force): those added or removed, moved to another cluster, or given other
    modules, versions or CRDs. Any other runtime's sync deletes the same under both, so a
    commit's brake reads the clusters of these alone (the others count from the state store
    and the commit in force)."""
    names = set(repo.runtimes) ^ set(current.runtimes)
    for name in set(repo.runtimes) & set(current.runtimes):
        if _wanted(current, name) != _wanted(repo, name):
            names.add(name)
    return names


#: A module's version, the CRDs it ships to a runtime, and those of them not marked to be kept.
_Shipped = tuple[str, frozenset[str], frozenset[str]]


def _wanted(repo: ConfigRepo, name: str) -> tuple[ClusterAccess, dict[str, _Shipped]]:
    """What ``repo`` wants of runtime ``name`` as far as deleting goes: its cluster, and each
    module's version with the CRDs it ships there."""
    runtime = repo.runtimes[name]
    modules = {
        m.name: (
            m.version,
            frozenset(shipped_crds(repo, name, m.name, m.version)),
            frozenset(shipped_crds(repo, name, m.name, m.version, kept=False)),
        )
        for m in resolve_runtime(repo, runtime).modules
    }
    return runtime.cluster, modules


def _manifest(repo: ConfigRepo, module: str, version: str) -> Sequence[Mapping[str, Any]]:
    found = repo.modules[module].versions.get(version)
    return found.objects if found is not None and not found.kind.templated else ()


def recreated(repo: ConfigRepo, module: str, old: str, new: str) -> list[str]:
    """``Kind/ns/name`` of the objects version ``new`` of ``module`` may replace: they opt in
    to ``reconciler.dev/recreate: on-immutable`` and differ from ``old``'s (whether the server
    refuses the change as immutable is known only at the sync: the brake counts the worst),
    or the module opts every object in (``spec.recreateOnImmutable``)."""
    definition = repo.modules[module]
    versions = definition.versions
    if old == new or old not in versions or new not in versions:
        return []
    before = {_identity(o): o for o in versions[old].objects}
    return sorted(
        ObjectRef.of(o).subject
        for o in versions[new].objects
        if recreated_on_immutable(o, definition.recreate_on_immutable)
        and before.get(_identity(o), o) != o
    )


def _identity(body: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """An object's group, kind, namespace and name (never its version, L12)."""
    ref = ObjectRef.of(body)
    return ref.group, ref.kind, ref.namespace, ref.name


def _crd_names(objects: Sequence[Mapping[str, Any]]) -> set[str]:
    return {
        str((o.get("metadata") or {}).get("name") or "")
        for o in objects
        if o.get("kind") == "CustomResourceDefinition"
    }


def _kept_crd_names(objects: Sequence[Mapping[str, Any]]) -> set[str]:
    """Names of the CRDs among ``objects`` marked to be kept."""
    return _crd_names([o for o in objects if keep_mark(o) is not None])


@dataclass(frozen=True, slots=True)
class Allowance:
    """An explicit allow (``--allow-deletions``): up to a count, or the runtimes named."""

    count: int | None = None
    names: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, values: Sequence[str]) -> Allowance:
        """``["4"]`` allows up to 4 deletions; ``["prod-eu-1", "dev"]`` those runtimes'."""
        counts = [int(v) for v in values if v.isdigit()]
        names = frozenset(v for v in values if not v.isdigit())
        return cls(max(counts) if counts else None, names)

    def __bool__(self) -> bool:
        return self.count is not None or bool(self.names)

    def covers(self, deletions: Deletions) -> bool:
        """Whether this allow lets ``deletions`` happen."""
        if self.count is not None and deletions.count <= self.count:
            return True
        return bool(self.names) and deletions.touched_runtimes() <= self.names


@dataclass(frozen=True, slots=True)
class Limits:
    """The brake's settings (``spec.deletionBrake``): the most deletions one sync may carry out,
    and whether syncs over it go ahead (``allow``; never one that removes every runtime)."""

    max_deletions: int = _DEFAULTS.max_deletions_per_sync
    allow: bool = _DEFAULTS.allow_deletions

    @classmethod
    def of(cls, settings: Settings) -> Limits:
        """The limits ``settings`` ask for."""
        return cls(settings.max_deletions_per_sync, settings.allow_deletions)

    def stricter(self, other: Limits) -> Limits:
        """The lower limit of the two, and ``allow`` only when both allow."""
        return Limits(min(self.max_deletions, other.max_deletions), self.allow and other.allow)


def limits_for(wanted: Settings, in_force: Limits | None) -> Limits:
    """The limits that judge a commit whose settings are ``wanted``: the stricter of its own
    and those ``in_force`` (the last accepted commit's; the built-in defaults when none is
    known, as with a new state store). A commit's looser limits apply from the next commit on,
    once it is accepted."""
    return Limits.of(wanted).stricter(in_force if in_force is not None else Limits())


@dataclass(frozen=True, slots=True)
class Verdict:
    """The brake's decision on a sync; ``asked`` is the limit the judged commit itself sets
    (above :attr:`limit` when it raises one that is not in force yet)."""

    deletions: Deletions
    limit: int
    held: bool
    message: str
    asked: int | None = None
    #: Runtimes whose cluster's inventories could not be read for the count.
    unread: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """JSON form (``/status``, ``diff -o json``)."""
        return {
            "held": self.held,
            "limit": self.limit,
            "message": self.message,
            **self.deletions.to_json(),
        }


def judge(
    deletions: Deletions,
    limits: Limits,
    allowance: Allowance,
    asked: Limits | None = None,
    *,
    allow_with: str | None = None,
) -> Verdict:
    """Hold ``deletions`` over the limit (or of every runtime) unless explicitly allowed; the
    setting ``spec.deletionBrake.allow`` lifts the limit but never passes "every runtime".
    ``asked``: the judged commit's own limits, named in the message when looser than
    ``limits``. ``allow_with``: how the caller lets a held change through, for the message
    (default: the command line's ``--allow-deletions COUNT``; the daemon takes a commit)."""
    limit = limits.max_deletions
    over = deletions.every_runtime or deletions.count > limit
    allowed = allowance.covers(deletions) or (limits.allow and not deletions.every_runtime)
    held = deletions.count > 0 and over and not allowed
    how = allow_with or f"--allow-deletions {deletions.count} (or name the runtimes)"
    message = _message(deletions, limit, held, allowed and over, how)
    looser = asked is not None and asked != asked.stricter(limits)
    if held and looser and asked is not None:
        message += f"; {_not_yet(asked, limits)}"
    asked_limit = asked.max_deletions if asked is not None else None
    return Verdict(deletions, limit, held, message, asked_limit)


def with_unread(verdict: Verdict, unread: Iterable[str]) -> Verdict:
    """``verdict``, its message naming the runtimes whose cluster could not be read (counted
    from what the state store knows of them)."""
    names = sorted(unread)
    if not names:
        return verdict
    note = f"; not read, counted from the state store: {_listed(names)}"
    return replace(verdict, message=verdict.message + note, unread=tuple(names))


def _not_yet(asked: Limits, limits: Limits) -> str:
    """Why a commit's own looser limits did not judge it."""
    what = (
        "allow: true"
        if asked.allow and not limits.allow
        else (f"maxDeletionsPerSync {asked.max_deletions}")
    )
    return (
        f"this commit's {what} applies once it is accepted (the limit in force is "
        f"{limits.max_deletions}): commit that change alone first"
    )


def _message(deletions: Deletions, limit: int, held: bool, allowed: bool, how: str) -> str:
    if not deletions.count:
        return "deletion brake: nothing is deleted"
    shown = _listed(deletions.items())
    what = (
        f"removes every runtime ({deletions.count} deletions)"
        if deletions.every_runtime
        else f"{deletions.count} deletion(s), limit {limit}"
    )
    if held:
        return (
            f"deletion brake: held: {what}: {shown}; nothing is deleted; allow this once with {how}"
        )
    verdict = "allowed explicitly" if allowed else "within the limit"
    return f"deletion brake: {verdict}: {what}: {shown}"


def _listed(items: Sequence[str]) -> str:
    """The first :data:`SHOWN` of ``items``, and how many more."""
    more = f" and {len(items) - SHOWN} more" if len(items) > SHOWN else ""
    return ", ".join(items[:SHOWN]) + more
