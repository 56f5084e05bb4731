"""``reconciler reconcile RUNTIME [--wait]``: one runtime now, here or through the running daemon
(which polls git first), and with ``--wait`` until its operation has finished.

The daemon case runs a real daemon on a real git server and its HTTP port on 127.0.0.1; the
command's look at ``/status`` waits through :data:`reconciler.cli.reconcile.pause`, which the
test makes wait for the daemon's work to finish (a condition, not a sleep).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.cli import reconcile as reconcile_module
from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.model import ClusterAccess
from reconciler.daemon.http import HttpServer, serve
from reconciler.daemon.service import Daemon
from reconciler.errors import AccessError
from reconciler.operations.store import SqliteStore
from reconciler.source.git import RemoteSource
from tests.support.daemons import Fleet as GitFleet
from tests.support.daemons import GitServer
from tests.support.sample_fleet import Fleet


def test_reconcile_runs_one_runtime_here_and_waits_for_it(tmp_path: Path) -> None:
    fleet = Fleet(tmp_path)
    where = ["--snapshot", f"{fleet.clusters}/", *fleet.state]

    done = fleet.run("reconcile", "prod-eu-1", str(fleet.repo), "--wait", *where)
    listed = fleet.document("operations", "list", *fleet.state)

    assert done.splitlines()[0].startswith("runtime prod-eu-1: provision ")
    assert done.splitlines()[0].endswith(" succeeded: 4 installed")
    assert [o["runtime"] for o in listed["items"]] == ["prod-eu-1"]  # that runtime only


def test_wait_fails_when_the_operation_is_still_under_way(tmp_path: Path) -> None:
    fleet = Fleet(tmp_path).synced()
    where = ["--snapshot", f"{fleet.clusters}/", *fleet.state]
    runtime = fleet.repo / "runtimes" / "prod-eu-1.yaml"
    runtime.write_text(runtime.read_text().replace("    - name: serverless\n", ""))
    with (fleet.clusters / "prod-eu-1.yaml").open("a") as snapshot:  # a user's Serverless
        snapshot.write(
            "---\napiVersion: operator.kyma-project.io/v1alpha1\nkind: Serverless\n"
            "metadata: {name: mine, namespace: kyma-system}\n"
        )

    result = CliRunner().invoke(
        cli, ["reconcile", "prod-eu-1", str(fleet.repo), "--wait", "--timeout", "1s", *where]
    )

    assert result.exit_code == 1, result.output
    assert "Deleting" in result.stdout
    assert "still under way after 1s" in result.stderr
    assert "(reconciler operations show " in result.stderr


def test_an_unknown_runtime_is_one_line_and_exit_2(tmp_path: Path) -> None:
    fleet = Fleet(tmp_path)

    result = CliRunner().invoke(cli, ["reconcile", "nowhere", str(fleet.repo), *fleet.state])

    assert result.exit_code == 2
    assert result.output.strip() == "error: runtime 'nowhere' does not exist"


class DaemonWorld:
    """A daemon following a real git server, serving HTTP on 127.0.0.1."""

    def __init__(self, root: Path) -> None:
        self.fleet = GitFleet(root)
        self.git = GitServer(root)
        self.git.start()
        self.clusters: dict[str, InMemoryCluster] = {}
        #: Runtimes whose cluster cannot be reached (no kubeconfig).
        self.broken: set[str] = set()
        source = RemoteSource(self.git.url, "main", "fleet", root / "cache")
        store = SqliteStore(root / "state.db")
        self.daemon = Daemon(source, store, self.connect, lambda: datetime.now(UTC))
        self.http: HttpServer = serve(
            self.daemon, "127.0.0.1", 0, None, allow_unauthenticated_sync=True
        )
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"

    def connect(self, access: ClusterAccess, name: str) -> InMemoryCluster:
        if name in self.broken:
            raise AccessError(f"runtime {name}: no kubeconfig file {name}.yaml")
        return self.clusters.setdefault(name, InMemoryCluster())

    def settle(self, seconds: float) -> None:
        """What the command's pause becomes: wait for the daemon's sync job and its runs."""
        for thread in threading.enumerate():
            if thread.name.startswith("sync"):
                thread.join()
        self.daemon.wait_idle()

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()
        self.daemon.wait_idle()
        self.daemon.close()
        self.git.stop()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[DaemonWorld]:
    made = DaemonWorld(tmp_path)
    yield made
    made.close()


def test_through_the_daemon_it_polls_git_then_reconciles_that_runtime(
    world: DaemonWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reconcile_module, "pause", world.settle)
    world.daemon.poll()  # the first commit: every runtime is reconciled once
    world.settle(0)
    store = world.daemon.store
    before = {name: len(store.operations(runtime=name)) for name in "abc"}
    newest = world.fleet.commit("a change the daemon has not polled yet")

    result = CliRunner().invoke(cli, ["reconcile", "a", "--daemon", world.url, "--wait"])

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"daemon at {world.url}: reconcile of a requested (202)"
    assert lines[1].startswith("runtime a: Ready ")
    after = {name: len(store.operations(runtime=name)) for name in "abc"}
    assert before == {"a": 1, "b": 1, "c": 1}
    assert after["a"] >= 2  # a again
    assert world.daemon.state.commit is not None
    assert world.daemon.state.commit.config == newest  # git was polled first


def test_wait_ends_with_the_operation_it_asked_for_and_exit_1_when_it_failed(
    world: DaemonWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--wait`` ends when the operation it asked for ends, not after its whole timeout with "the
    daemon goes on with it"."""
    looks: list[float] = []

    def settle(seconds: float) -> None:
        looks.append(seconds)
        world.settle(seconds)

    monkeypatch.setattr(reconcile_module, "pause", settle)
    world.daemon.poll()
    world.settle(0)
    world.broken.add("a")

    result = CliRunner().invoke(
        cli, ["reconcile", "a", "--daemon", world.url, "--wait", "--timeout", "1h"]
    )

    assert result.exit_code == 1, result.output
    assert result.stdout.splitlines()[1].startswith("runtime a: Error ClusterAccessFailed: ")
    assert "no kubeconfig file a.yaml" in result.stdout
    assert "goes on with it" not in result.stderr
    assert len(looks) <= 2  # once the run asked for ended, not at the timeout


def test_a_bad_runtime_name_or_an_absent_daemon_is_one_line(world: DaemonWorld) -> None:
    bad = CliRunner().invoke(cli, ["reconcile", "A_B", "--daemon", world.url])
    nowhere = CliRunner().invoke(cli, ["reconcile", "a", "--daemon", "http://127.0.0.1:9"])

    assert bad.exit_code == 2
    assert "refused: 400 ?runtime= needs a runtime name" in bad.output
    assert nowhere.exit_code == 2
    assert nowhere.output.startswith("error: cannot reach the daemon at http://127.0.0.1:9")
