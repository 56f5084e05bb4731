"""What runs where, for the deletion brake (S5): each runtime's modules and versions as the
inventories in its cluster say, with what the state store knows.

The brake counts what a sync would delete from here, not from the store alone: a lost,
truncated or new store (a move to PostgreSQL, say) knows nothing, yet the clusters' inventories
still list every module a sync would remove (the inventory is the only thing prune trusts, and
so the only count that matches what is deleted). A runtime in git is read through the access
the repo gives it, one the store knows that left git through the access it was last synced
with. A cluster that cannot be read is counted from what the store knows of it and named in
:attr:`Running.unread` (its own sync fails the same way, deleting nothing). Callers: the CLI's
run scope, the daemon's brake.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from reconciler.core.model import ClusterAccess, ConfigRepo
from reconciler.lifecycle.executor import Lifecycle
from reconciler.operations.runner import Connect, recorded_access
from reconciler.operations.store import StateStore

#: Runtime -> module -> version.
Modules = dict[str, dict[str, str]]


@dataclass(frozen=True, slots=True)
class Running:
    """Runtime -> module -> version (the inventories', else the store's), and the runtimes
    whose cluster could not be read, with why."""

    modules: Modules
    unread: Mapping[str, str] = field(default_factory=dict)


def fetch_running(
    store: StateStore,
    repo: ConfigRepo,
    connect: Connect,
    *,
    system_namespace: str,
    workers: int = 4,
    release: Callable[[str], None] | None = None,
) -> Running:
    """Read the inventories of every runtime in ``repo`` and every one the store knows
    (``workers`` clusters at a time), merged with what the store knows; ``release`` is called
    with each runtime's name once its cluster was read."""
    known = store.deployed()
    names = sorted(set(repo.runtimes) | set(known))

    def read(name: str) -> tuple[str, dict[str, str] | str]:
        try:
            access = _access(store, repo, name)
            lifecycle = Lifecycle(connect(access, name), system_namespace=system_namespace)
            found = lifecycle.read_inventories(name)
            return name, {module: inventory.version for module, inventory in found.items()}
        except Exception as error:  # one cluster's failure is its own, reported as data
            return name, f"{type(error).__name__}: {error}"
        finally:
            if release is not None:
                release(name)

    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(names) or 1))) as pool:
        results = list(pool.map(read, names))
    modules: Modules = {}
    unread: dict[str, str] = {}
    for name, result in results:
        merged = dict(known.get(name, {}))
        if isinstance(result, str):
            unread[name] = result
        else:
            merged.update(result)
        if merged or name in known:
            modules[name] = merged
    return Running(modules, unread)


def _access(store: StateStore, repo: ConfigRepo, name: str) -> ClusterAccess:
    if name in repo.runtimes:
        return repo.runtimes[name].cluster
    return recorded_access(store, name)
