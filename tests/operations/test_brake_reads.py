"""The deletion brake's one composition (:func:`fetch_verdict`): which clusters it reads and
what it counts, for ``sync`` (the runtimes of the run) and the daemon (the runtimes a commit
changes from the one in force), on in-memory clusters and a real SQLite store."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.brake import Allowance, changed_by
from reconciler.core.model import ClusterAccess, ConfigRepo, ModuleRef, Runtime
from reconciler.operations.running import Judged, fetch_verdict
from reconciler.operations.store import SqliteStore
from tests.support.lifecycle_helpers import repo


def _fleet(**modules: tuple[str, ...]) -> ConfigRepo:
    """A repo whose runtimes (on channel ``regular``, each its own cluster) list ``modules``."""
    base = repo()
    runtimes = {
        name: Runtime(name, "regular", ClusterAccess(context=name), tuple(map(ModuleRef, refs)))
        for name, refs in modules.items()
    }
    return replace(base, runtimes=runtimes)


class Connect:
    """In-memory clusters by runtime, and the runtimes whose cluster was asked for."""

    def __init__(self) -> None:
        self.clusters: dict[str, InMemoryCluster] = {}
        self.asked: list[str] = []

    def __call__(self, access: ClusterAccess, name: str) -> InMemoryCluster:
        self.asked.append(name)
        return self.clusters.setdefault(name, InMemoryCluster())


BEFORE = _fleet(a=("widget", "gadget"), b=("widget",), c=("widget",))


def test_a_commit_is_counted_from_the_clusters_of_the_runtimes_it_changes(tmp_path: Path) -> None:
    """The daemon's brake on a commit that drops gadget from runtime a reads a's cluster
    alone: b and c want the same under both commits, so their syncs delete nothing new."""
    after = _fleet(a=("widget",), b=("widget",), c=("widget",))
    connect = Connect()
    judged = Judged(after, Allowance(), None, current=BEFORE)

    verdict, running = fetch_verdict(SqliteStore(tmp_path / "state.db"), connect, judged)

    assert connect.asked == ["a"]
    assert verdict.deletions.modules == ("a/gadget",)  # the commit in force's module counts
    assert not verdict.held
    assert running.unread == {}


def test_with_no_commit_in_force_every_cluster_is_read(tmp_path: Path) -> None:
    connect = Connect()

    fetch_verdict(SqliteStore(tmp_path / "state.db"), connect, Judged(BEFORE, Allowance(), None))

    assert sorted(connect.asked) == ["a", "b", "c"]


def test_a_run_of_some_runtimes_reads_and_counts_theirs_alone(tmp_path: Path) -> None:
    after = _fleet(a=("widget",), b=(), c=())
    connect = Connect()
    judged = Judged(after, Allowance(), None, current=BEFORE, only=["b"])

    verdict, _ = fetch_verdict(SqliteStore(tmp_path / "state.db"), connect, judged)

    assert connect.asked == ["b"]
    assert verdict.deletions.modules == ("b/widget",)  # a's and c's removals are not this run's


def test_what_a_commit_changes_for_the_brake() -> None:
    """Added, removed, moved to another cluster, or given other modules or versions."""
    after = _fleet(a=("widget", "gadget"), b=("widget", "gadget"), d=("widget",))
    moved = replace(BEFORE.runtimes["c"], cluster=ClusterAccess(context="elsewhere"))
    regular = replace(BEFORE.channels["regular"], modules={"widget": "2.0.0", "gadget": "1.0.0"})

    assert changed_by(BEFORE, BEFORE) == set()
    assert changed_by(BEFORE, after) == {"b", "c", "d"}  # b changed, c removed, d added
    assert changed_by(BEFORE, replace(BEFORE, runtimes={**BEFORE.runtimes, "c": moved})) == {"c"}
    assert changed_by(BEFORE, replace(BEFORE, channels={"regular": regular})) == {"a", "b", "c"}
