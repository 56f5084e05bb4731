"""What runs where, for the deletion brake (S5): each runtime's modules and versions as the
inventories in its cluster say, with what the state store knows, and the CRDs each module's
inventory lists.

The brake counts what a sync would delete from here, not from the store alone: a lost,
truncated or new store (a move to PostgreSQL, say) knows nothing, yet the clusters' inventories
still list every module a sync would remove (the inventory is the only thing prune trusts, and
so the only count that matches what is deleted). A runtime in git is read through the access
the repo gives it, one the store knows that left git through the access it was last synced
with. A cluster that cannot be read is counted from what the store knows of it and named in
:attr:`Running.unread` (its own sync fails the same way, deleting nothing).

:func:`fetch_verdict` is the brake's one composition, read, count and judge, for both paths
that delete: ``reconciler sync`` (a run of some runtimes reads and counts theirs alone) and the
daemon judging a commit (with the commit in force's modules and CRDs counted too, and only the
clusters of the runtimes the commit changes read: :func:`reconciler.core.brake.changed_by`).
Callers: the CLI's run scope, the daemon's commit gate.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from reconciler.core.brake import (
    Allowance,
    Limits,
    Verdict,
    changed_by,
    count_deletions,
    judge,
    limits_for,
    shipped_by,
    with_unread,
)
from reconciler.core.inventory import Inventory
from reconciler.core.model import ClusterAccess, ConfigRepo
from reconciler.core.resolve import resolve_runtime
from reconciler.lifecycle.executor import Lifecycle
from reconciler.operations.runner import Connect, recorded_access
from reconciler.operations.store import OperationLedger, RunLedger

#: Runtime -> module -> version.
Modules = dict[str, dict[str, str]]
#: Runtime -> module -> the names of the CRDs its inventory lists.
Crds = dict[str, dict[str, frozenset[str]]]


@dataclass(frozen=True, slots=True)
class Running:
    """Runtime -> module -> version (the inventories', else the store's), the CRDs each
    inventory lists (a chart's are known only so: they depend on the runtime's values), and
    the runtimes whose cluster could not be read, with why."""

    modules: Modules
    unread: Mapping[str, str] = field(default_factory=dict)
    crds: Crds = field(default_factory=dict)


def fetch_running(
    store: RunLedger,
    repo: ConfigRepo,
    connect: Connect,
    *,
    system_namespace: str,
    workers: int = 4,
    release: Callable[[str], None] | None = None,
    only: Collection[str] | None = None,
    reading: Callable[[int], None] | None = None,
    read: Collection[str] | None = None,
) -> Running:
    """Read the inventories of every runtime in ``repo`` and every one the store knows (or
    of those in ``only``: what a run of some runtimes can delete is theirs alone), ``workers``
    clusters at a time, merged with what the store knows; ``read``: the clusters read (the
    others counted from the store alone; default: every one); ``reading`` is told how many
    before the first is read, ``release`` each runtime's name once its cluster was read."""
    known = store.deployed()
    names = sorted(set(repo.runtimes) | set(known) if only is None else set(only))
    to_read = names if read is None else [name for name in names if name in read]
    if reading is not None:
        reading(len(to_read))

    def read_one(name: str) -> tuple[str, dict[str, Inventory] | str]:
        try:
            access = _access(store, repo, name)
            lifecycle = Lifecycle(connect(access, name), system_namespace=system_namespace)
            return name, lifecycle.read_inventories(name)
        except Exception as error:  # one cluster's failure is its own, reported as data
            return name, f"{type(error).__name__}: {error}"
        finally:
            if release is not None:
                release(name)

    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(to_read) or 1))) as pool:
        found = dict(pool.map(read_one, to_read))
    modules: Modules = {}
    unread: dict[str, str] = {}
    crds: Crds = {}
    for name in names:
        merged = dict(known.get(name, {}))
        result = found.get(name)
        if isinstance(result, str):
            unread[name] = result
        elif result is not None:
            merged.update({module: found.version for module, found in result.items()})
            crds[name] = {module: _crds(found) for module, found in result.items()}
        if merged or name in known:
            modules[name] = merged
    return Running(modules, unread, crds)


def _crds(inventory: Inventory) -> frozenset[str]:
    """The CRDs ``inventory`` lists (prune deletes those its module no longer ships)."""
    return frozenset(
        ref.name
        for ref in inventory.objects
        if ref.kind == "CustomResourceDefinition" and ref.group == "apiextensions.k8s.io"
    )


def _access(store: OperationLedger, repo: ConfigRepo, name: str) -> ClusterAccess:
    if name in repo.runtimes:
        return repo.runtimes[name].cluster
    return recorded_access(store, name)


@dataclass(frozen=True, slots=True)
class Judged:
    """What the brake judges: ``repo`` (the repo to carry out), how a held change is let
    through (``allowance``, and ``allow_with`` for the message: :func:`judge`), the limits in
    force (none: the defaults), the commit in force's repo (the daemon: its modules and CRDs
    count as running, and only the clusters of the runtimes ``repo`` changes from it are read),
    and ``only`` (a run of these runtimes: theirs alone are read and counted)."""

    repo: ConfigRepo
    allowance: Allowance
    in_force: Limits | None
    current: ConfigRepo | None = None
    only: Collection[str] | None = None
    allow_with: str | None = None


def fetch_verdict(
    store: RunLedger,
    connect: Connect,
    judged: Judged,
    *,
    workers: int = 4,
    release: Callable[[str], None] | None = None,
    reading: Callable[[int], None] | None = None,
) -> tuple[Verdict, Running]:
    """The deletion brake's verdict on carrying out ``judged`` (S5), counted from what runs
    (:func:`fetch_running`: ``workers``, ``release`` and ``reading`` as there), with what was
    read; the runtimes not read are named in the verdict's message."""
    repo, current = judged.repo, judged.current
    running = fetch_running(
        store,
        repo,
        connect,
        system_namespace=(current or repo).settings.system_namespace,
        workers=workers,
        release=release,
        only=judged.only,
        reading=reading,
        read=changed_by(current, repo) if current is not None else None,
    )
    known, crds = running.modules, _crds_of(running.crds)
    if current is not None:
        _add_in_force(current, known, crds)
    verdict = judge(
        count_deletions(known, repo, judged.only, crds),
        limits_for(repo.settings, judged.in_force),
        judged.allowance,
        Limits.of(repo.settings),
        allow_with=judged.allow_with,
    )
    return with_unread(verdict, running.unread), running


def _add_in_force(
    current: ConfigRepo, known: dict[str, dict[str, str]], crds: dict[str, dict[str, set[str]]]
) -> None:
    """Count the modules of the commit in force (``current``) and the CRDs it ships as running
    too, where nothing else says what runs."""
    for name, runtime in current.runtimes.items():
        modules = known.setdefault(name, {})
        for module in resolve_runtime(current, runtime).modules:
            modules.setdefault(module.name, module.version)
    for name, shipped in shipped_by(current).items():
        for module_name, names in shipped.items():
            crds.setdefault(name, {}).setdefault(module_name, set()).update(names)


def _crds_of(listed: Mapping[str, Mapping[str, frozenset[str]]]) -> dict[str, dict[str, set[str]]]:
    """The CRDs the inventories list (runtime -> module -> names), to add those of the commit in
    force to."""
    return {name: {m: set(c) for m, c in modules.items()} for name, modules in listed.items()}
