"""Which cluster a run reaches (:class:`ClusterIdentity`): kept as text at the store's edge
only, read back to the same value, and compared by kind, not by the text's prefix."""

from __future__ import annotations

import pytest

from reconciler.cluster.api import NO_IDENTITY, AccessKind, ClusterIdentity
from reconciler.cluster.memory import InMemoryCluster

SERVER = ClusterIdentity.server("https://10.0.0.1:6443")
OTHER_SERVER = ClusterIdentity.server("https://10.9.9.9:6443")
SNAPSHOT = ClusterIdentity.snapshot("/tmp/x.yaml")
OTHER_SNAPSHOT = ClusterIdentity.snapshot("/srv/y.yaml")
REACHED = ClusterIdentity.reached_by("secret kc[config]")


@pytest.mark.parametrize("identity", [SERVER, SNAPSHOT, REACHED, NO_IDENTITY])
def test_the_stored_text_reads_back_to_the_same_identity(identity: ClusterIdentity) -> None:
    assert ClusterIdentity.parse(identity.describe()) == identity


def test_the_text_names_the_kind_and_where() -> None:
    assert SERVER.describe() == "server https://10.0.0.1:6443"
    assert SNAPSHOT.describe() == "snapshot /tmp/x.yaml"
    assert REACHED.describe() == "secret kc[config]"
    assert ClusterIdentity.parse("in-cluster").kind is AccessKind.UNLOCATED
    assert ClusterIdentity.parse("snapshot").kind is AccessKind.UNLOCATED  # no path: not one
    assert not NO_IDENTITY
    assert SERVER


@pytest.mark.parametrize(
    ("now", "recorded", "other"),
    [
        (SNAPSHOT, SERVER, True),
        (SERVER, SNAPSHOT, True),
        (OTHER_SERVER, SERVER, True),
        (REACHED, SERVER, True),
        (OTHER_SNAPSHOT, SNAPSHOT, False),  # both rehearsals
        (SERVER, SERVER, False),
        (SERVER, NO_IDENTITY, False),  # never synced
    ],
)
def test_another_cluster_is_told_by_kind_and_place(
    now: ClusterIdentity, recorded: ClusterIdentity, other: bool
) -> None:
    assert now.is_other_than(recorded) is other


def test_an_in_memory_cluster_says_nothing_unless_told() -> None:
    assert InMemoryCluster().identity is NO_IDENTITY
    assert InMemoryCluster(identity=SERVER).identity == SERVER


def test_a_fenced_cluster_is_the_cluster_it_wraps() -> None:
    from reconciler.daemon.membership import FencedCluster

    fenced = FencedCluster(InMemoryCluster(identity=SNAPSHOT), lambda: None)

    assert fenced.identity == SNAPSHOT
