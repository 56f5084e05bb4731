"""What runs where, for the deletion brake (S5): each runtime's modules and versions as the
inventories in its cluster say, with what the state store knows, and the CRDs each module's
inventory lists.

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

from collections.abc import Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from reconciler.core.inventory import Inventory
from reconciler.core.model import ClusterAccess, ConfigRepo
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
) -> Running:
    """Read the inventories of every runtime in ``repo`` and every one the store knows (or
    of those in ``only``: what a run of some runtimes can delete is theirs alone), ``workers``
    clusters at a time, merged with what the store knows; ``reading`` is told how many before
    the first is read, ``release`` each runtime's name once its cluster was read."""
    known = store.deployed()
    names = sorted(set(repo.runtimes) | set(known) if only is None else set(only))
    if reading is not None:
        reading(len(names))

    def read(name: str) -> tuple[str, dict[str, Inventory] | str]:
        try:
            access = _access(store, repo, name)
            lifecycle = Lifecycle(connect(access, name), system_namespace=system_namespace)
            return name, lifecycle.read_inventories(name)
        except Exception as error:  # one cluster's failure is its own, reported as data
            return name, f"{type(error).__name__}: {error}"
        finally:
            if release is not None:
                release(name)

    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(names) or 1))) as pool:
        results = list(pool.map(read, names))
    modules: Modules = {}
    unread: dict[str, str] = {}
    crds: Crds = {}
    for name, result in results:
        merged = dict(known.get(name, {}))
        if isinstance(result, str):
            unread[name] = result
        else:
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
