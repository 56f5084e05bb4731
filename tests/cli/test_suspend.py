"""``reconciler suspend``/``resume``: recorded in the state store, honoured by sync (nothing
changes, deletions included), shown by status; git's spec.suspend still wins."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.model import ModuleRef
from reconciler.core.reasons import Reason
from reconciler.core.status import ModuleState
from reconciler.operations.engine import Engine
from reconciler.operations.model import OperationState, RuntimeRecord
from reconciler.operations.runner import Runner
from reconciler.operations.store import SqliteStore
from tests.support.lifecycle_helpers import repo
from tests.support.scenarios import Clock


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def _runner(store: SqliteStore, cluster: InMemoryCluster, *modules: str) -> Runner:
    clock = Clock()
    config = repo(*(ModuleRef(m) for m in modules))
    return Runner(
        store, Engine(store, clock=clock, plugins=[]), config, lambda a, n: cluster, clock
    )


def test_a_suspended_runtime_is_not_changed_until_resumed(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    store, cluster = SqliteStore(db), InMemoryCluster()
    first = _runner(store, cluster, "widget", "gadget")
    assert first.run(first.operation_for("rt")).operation.state is OperationState.SUCCEEDED
    writes = cluster.writes

    code, output = _invoke("suspend", "rt", "--reason", "incident 42", "--state", f"sqlite:///{db}")
    assert code == 0, output
    assert "runtime rt: suspended" in output
    held = _runner(store, cluster, "widget")  # gadget left git while rt is suspended
    done = held.run(held.operation_for("rt")).operation

    assert done.state is OperationState.SUCCEEDED
    assert cluster.writes == writes  # nothing applied, nothing deleted
    code, output = _invoke("status", "--state", f"sqlite:///{db}")
    assert "rt: suspended since " in output
    assert ": incident 42 (reconciler resume rt)" in output
    code, output = _invoke("status", "--state", f"sqlite:///{db}", "--format", "json")
    (runtime,) = json.loads(output)["items"]
    assert runtime["suspension"]["reason"] == "incident 42"
    assert runtime["reason"] == "Suspended"

    code, output = _invoke("resume", "rt", "--state", f"sqlite:///{db}")
    assert (code, output.strip()) == (
        0,
        "runtime rt: resumed; the next sync or daemon run reconciles it",
    )
    again = _runner(store, cluster, "widget")
    again.run(again.operation_for("rt"))

    assert cluster.writes > writes  # gadget is removed now
    assert (
        json.loads(_invoke("status", "--state", f"sqlite:///{db}", "--format", "json")[1])["items"][
            0
        ]["suspension"]
        is None
    )


def test_resuming_a_runtime_that_is_not_suspended_says_so(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    first = _runner(store, InMemoryCluster(), "widget")
    first.run(first.operation_for("rt"))

    code, output = _invoke("resume", "rt", "--state", f"sqlite:///{tmp_path / 's.db'}")

    assert (code, output.strip()) == (0, "runtime rt: was not suspended by 'reconciler suspend'")


def test_a_runtime_that_is_neither_in_the_store_nor_in_the_repo_is_refused(
    tmp_path: Path,
) -> None:
    """A mistyped runtime is refused with the closest name, never "suspended" while the real one
    goes on syncing."""
    db = tmp_path / "state.db"
    store = SqliteStore(db)
    store.put_runtime(RuntimeRecord("rt-one", ModuleState.READY, Reason.READY, "", None, Clock()()))
    state = ("--state", f"sqlite:///{db}", str(tmp_path))

    for command in (("suspend", "rt-on"), ("resume", "rt-on"), ("status", "--runtime", "rt-on")):
        code, output = _invoke(*command, *state[:2], *(state[2:] if command[0] != "status" else ()))
        assert code == 2, (command, output)
        assert output.strip() == (
            f"error: runtime 'rt-on' is not in the state store sqlite:///{db}; "
            "did you mean 'rt-one'?"
        )
    assert store.suspensions() == {}
    repo = tmp_path / "fleet"
    (repo / "runtimes").mkdir(parents=True)
    (repo / "runtimes" / "rt-new.yaml").write_text("kind: Runtime\n")
    code, output = _invoke("suspend", "rt-new", *state[:2], str(repo))  # in git, never synced
    assert code == 0, output
    assert list(store.suspensions()) == ["rt-new"]


def test_a_bad_runtime_name_is_one_line_and_exit_2(tmp_path: Path) -> None:
    code, output = _invoke("suspend", "Not_A_Name", "--state", f"sqlite:///{tmp_path / 's.db'}")

    assert code == 2
    assert len(output.strip().splitlines()) == 1
    assert "is not a runtime name" in output
