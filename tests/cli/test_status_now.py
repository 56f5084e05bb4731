"""``reconciler status`` and ``/status`` tell the truth: a runtime's state comes from its newest
operation, finished or not, with the last finished result beside it. One rule for every view
(``RuntimeStatus.of``): a failed operation leaves its runtime in Error with the failing step's
reason until one succeeds, a first one too; an unreachable API server is Error while the operation
retries; a suspended runtime says Suspended.

Operations run through the runner on the in-memory cluster and a real SQLite store; ``status``
then reads that store as a user would.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.cluster.memory import Fault, InMemoryCluster
from reconciler.core.model import ClusterAccess, ConfigRepo, ModuleRef
from reconciler.core.objects import ObjectRef
from reconciler.daemon.service import Daemon
from reconciler.errors import AccessError, ReconcilerError, ServerError
from reconciler.operations.engine import Engine
from reconciler.operations.model import OperationState, OperationType, Suspension
from reconciler.operations.report import STATUS_COLUMNS
from reconciler.operations.runner import Connect, Runner
from reconciler.operations.store import SqliteStore
from tests.support.lifecycle_helpers import repo
from tests.support.runs import runner_on
from tests.support.scenarios import USER_GADGET, Clock
from tests.support.sources import UnusedSource


def _runner(store: SqliteStore, config: ConfigRepo, cluster: InMemoryCluster) -> Runner:
    clock = Clock()
    return Runner(
        store, Engine(store, clock=clock, plugins=[]), config, lambda a, n: cluster, clock
    )


def _status(db: Path) -> tuple[list[dict[str, Any]], str]:
    url = f"sqlite:///{db}"
    document = CliRunner().invoke(cli, ["status", "--state", url, "--format", "json"])
    text = CliRunner().invoke(cli, ["status", "--state", url])
    assert document.exit_code == text.exit_code == 0, document.output + text.output
    parsed = json.loads(document.stdout)
    assert (parsed["apiVersion"], parsed["kind"]) == ("reconciler.dev/v1", "RuntimeStatusList")
    found: list[dict[str, Any]] = parsed["items"]
    return found, text.stdout


def _row(text: str, name: str) -> list[str]:
    """The cells of the status row called ``name`` (cells are two or more spaces apart)."""
    line = next(line for line in text.splitlines() if line.strip().startswith(name))
    return re.split(r"\s{2,}", line.strip())


def test_a_first_operation_that_waits_for_the_operator_shows_as_processing(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "state.db")
    runner = _runner(store, repo(ModuleRef("widget")), InMemoryCluster(auto_ready=False))

    waiting = runner.run(runner.operation_for("rt"))

    assert waiting.operation.state is OperationState.IN_PROGRESS
    (runtime,), text = _status(tmp_path / "state.db")
    assert (runtime["state"], runtime["reason"]) == ("Processing", "WaitingForOperator")
    assert runtime["operation"]["id"] == waiting.operation.id
    assert runtime["operation"]["state"] == "in progress"
    assert runtime["lastFinished"]["reason"] == "Provisioning"
    assert text.splitlines()[0].split() == list(STATUS_COLUMNS)
    assert _row(text, "rt")[:4] == ["rt", "Processing", "-", "WaitingForOperator"]
    under_way = _row(text, "(operation)")
    assert under_way[:4] == ["(operation)", "in progress", "-", "provision"]
    assert under_way[-1].startswith(f"{waiting.operation.id}: ")
    assert _row(text, "widget")[:2] == ["widget", "Processing"]


def test_a_removal_blocked_by_a_users_resource_shows_as_deleting(tmp_path: Path) -> None:
    store, cluster = SqliteStore(tmp_path / "state.db"), InMemoryCluster()
    both = _runner(store, repo(ModuleRef("widget"), ModuleRef("gadget")), cluster)
    assert both.run(both.operation_for("rt")).operation.state is OperationState.SUCCEEDED
    apps = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}}
    for body in (apps, USER_GADGET):
        cluster.apply(body, field_manager="kubectl")
    (before,), _ = _status(tmp_path / "state.db")
    assert (before["state"], before["operation"], before["lastFinished"]) == ("Ready", None, None)
    one = _runner(store, repo(ModuleRef("widget")), cluster)

    blocked = one.run(one.operation_for("rt"))

    assert blocked.operation.state is OperationState.IN_PROGRESS
    (runtime,), text = _status(tmp_path / "state.db")
    assert runtime["state"] == "Deleting"
    gadget = next(m for m in runtime["modules"] if m["module"] == "gadget")
    assert gadget["state"] == "Deleting"
    assert "Gadget/apps/mine" in gadget["message"]
    assert runtime["lastFinished"]["state"] == "Ready"
    assert _row(text, "rt")[:2] == ["rt", "Deleting"]
    assert _row(text, "(last finished)")[:2] == ["(last finished)", "Ready"]


def test_a_resumed_operation_that_finishes_is_followed_by_one_for_the_current_repo(
    tmp_path: Path,
) -> None:
    """A module removed from git while the first operation waited is removed by the same sync that
    finishes that operation, not by a second one."""
    store, cluster = SqliteStore(tmp_path / "state.db"), InMemoryCluster(auto_ready=False)
    first = _runner(store, repo(ModuleRef("widget"), ModuleRef("gadget")), cluster)
    waiting = first.run(first.operation_for("rt")).operation
    assert waiting.state is OperationState.IN_PROGRESS
    for body in cluster.list_objects("apps/v1", "Deployment"):
        cluster.set_status(ObjectRef.of(body), READY)
    again = _runner(store, repo(ModuleRef("widget")), cluster)

    resumed = again.run(again.operation_for("rt")).operation
    follow_up = again.follow_up(resumed)

    assert resumed.id == waiting.id
    assert resumed.state is OperationState.SUCCEEDED
    assert follow_up is not None
    assert follow_up.type is OperationType.UPDATE
    assert again.run(follow_up).operation.state is OperationState.SUCCEEDED
    modules = {o["metadata"]["labels"].get("reconciler.dev/module") for o in _ours(cluster)}
    assert modules == {"widget"}
    assert again.follow_up(follow_up) is None  # created by this runner: nothing more to do


READY = {
    "observedGeneration": 1,
    "replicas": 1,
    "readyReplicas": 1,
    "availableReplicas": 1,
    "updatedReplicas": 1,
}


def _ours(cluster: InMemoryCluster) -> list[dict[str, Any]]:
    return [
        o
        for o in cluster.list_objects("apps/v1", "Deployment")
        if (o["metadata"].get("labels") or {}).get("reconciler.dev/module")
    ]


def test_a_resumed_operation_whose_plan_is_still_current_is_not_followed(tmp_path: Path) -> None:
    store, cluster = SqliteStore(tmp_path / "state.db"), InMemoryCluster(auto_ready=False)
    first = _runner(store, repo(ModuleRef("widget")), cluster)
    assert first.run(first.operation_for("rt")).operation.state is OperationState.IN_PROGRESS
    for body in cluster.list_objects("apps/v1", "Deployment"):
        cluster.set_status(ObjectRef.of(body), READY)
    again = _runner(store, repo(ModuleRef("widget")), cluster)

    resumed = again.run(again.operation_for("rt")).operation

    assert resumed.state is OperationState.SUCCEEDED
    assert again.follow_up(resumed) is None


def test_reading_commands_never_create_a_store(tmp_path: Path) -> None:
    db = tmp_path / "nowhere" / "state.db"
    url = f"sqlite:///{db}"

    status = CliRunner().invoke(cli, ["status", "--state", url])
    listed = CliRunner().invoke(cli, ["operations", "list", "--state", url])
    shown = CliRunner().invoke(cli, ["operations", "show", "abc", "--state", url])

    assert (status.exit_code, listed.exit_code, shown.exit_code) == (2, 0, 2)
    assert "no operation with id (prefix) 'abc'" in shown.output
    assert not db.exists()
    assert not db.parent.exists()


def test_status_of_a_named_store_that_does_not_exist_names_its_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "nowhere" / "state.db"

    given = CliRunner().invoke(cli, ["status", "--state", f"sqlite:///{db}"])
    monkeypatch.setenv("RECONCILER_STATE", f"sqlite:///{db}")
    from_env = CliRunner().invoke(cli, ["status"])

    for result in (given, from_env):
        assert result.exit_code == 2
        assert result.output.splitlines() == [
            f"error: no state store at {db}: name the store a sync wrote (--state or "
            "RECONCILER_STATE), or run reconciler sync to create it"
        ]
    assert not db.parent.exists()


def test_the_readmes_relative_store_from_another_folder_names_where_it_was_looked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "fleet" / "clusters").mkdir(parents=True)
    SqliteStore(tmp_path / "fleet" / "clusters" / "reconciler-state.db").close()
    monkeypatch.setenv("RECONCILER_STATE", "sqlite:///clusters/reconciler-state.db")
    monkeypatch.chdir(tmp_path / "fleet")
    assert CliRunner().invoke(cli, ["status"]).exit_code == 0

    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["status"])

    assert result.exit_code == 2
    assert (
        f"no state store at clusters/reconciler-state.db (read from {tmp_path}: "
        f"{tmp_path / 'clusters' / 'reconciler-state.db'})" in result.output
    )


def test_status_of_the_default_store_not_yet_created_says_nothing_is_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RECONCILER_STATE")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))

    result = CliRunner().invoke(cli, ["status"])

    assert result.exit_code == 0
    assert "no runtime recorded yet" in result.output
    assert not (tmp_path / "state").exists()


# -- status that never lies ------------------------------------------------------------------------


def _connect_failing(cluster: InMemoryCluster, error: ReconcilerError | None) -> Connect:
    """A connection that raises ``error`` (when one is given), else gives ``cluster``."""

    def connect(access: ClusterAccess, name: str) -> InMemoryCluster:
        if error is not None:
            raise error
        return cluster

    return connect


def test_a_failed_operation_leaves_the_runtime_in_error_until_one_succeeds(
    tmp_path: Path,
) -> None:
    store, cluster, clock = SqliteStore(tmp_path / "state.db"), InMemoryCluster(), Clock()
    config = repo(ModuleRef("widget"))
    engine = Engine(store, clock=clock, plugins=[])
    good = Runner(store, engine, config, _connect_failing(cluster, None), clock)
    assert good.run(good.operation_for("rt")).operation.state is OperationState.SUCCEEDED
    broken = AccessError("clusters/rt.yaml: cannot read the snapshot: not YAML")
    bad = Runner(store, engine, config, _connect_failing(cluster, broken), clock)

    failed = bad.run(bad.operation_for("rt")).operation

    assert failed.state is OperationState.FAILED
    (runtime,), text = _status(tmp_path / "state.db")
    assert (runtime["state"], runtime["reason"]) == ("Error", "ClusterAccessFailed")
    assert runtime["message"].startswith(f"update {failed.id} failed: step Resolve_Kubeconfig ")
    assert "cannot read the snapshot" in runtime["message"]
    assert [m["state"] for m in runtime["modules"]] == ["Ready"]  # what still runs there
    assert _row(text, "rt")[:4] == ["rt", "Error", "-", "ClusterAccessFailed"]
    waiting = bad.operation_for("rt")  # a new operation, created and not run yet: still Error
    (runtime,), _ = _status(tmp_path / "state.db")
    assert (runtime["state"], runtime["operation"]["id"]) == ("Error", waiting.id)

    assert good.run(waiting).operation.state is OperationState.SUCCEEDED
    (runtime,), _ = _status(tmp_path / "state.db")
    assert (runtime["state"], runtime["reason"]) == ("Ready", "Ready")


def test_a_first_operation_that_fails_is_error_not_processing(tmp_path: Path) -> None:
    store, clock = SqliteStore(tmp_path / "state.db"), Clock()
    engine = Engine(store, clock=clock, plugins=[])
    missing = AccessError("runtime rt: no kubeconfig file rt.yaml in /etc/kubeconfigs")
    runner = Runner(store, engine, repo(), _connect_failing(InMemoryCluster(), missing), clock)

    assert runner.run(runner.operation_for("rt")).operation.state is OperationState.FAILED

    (runtime,), _ = _status(tmp_path / "state.db")
    assert (runtime["state"], runtime["reason"]) == ("Error", "ClusterAccessFailed")
    assert "no kubeconfig file" in runtime["message"]
    errors = CliRunner().invoke(
        cli, ["get", "runtimes", "--state-selector", "Error", "--state", f"sqlite:///{store.path}"]
    )
    assert _names(errors.stdout) == ["rt"]


def test_an_unreachable_api_server_is_error_while_the_operation_retries(tmp_path: Path) -> None:
    store, clock = SqliteStore(tmp_path / "state.db"), Clock()
    cluster = InMemoryCluster()
    refused = ServerError("cannot reach the API server https://10.0.0.7:6443: connection refused")
    cluster.faults.append(Fault("list", refused, times=99))
    runner = Runner(
        store, Engine(store, clock=clock, plugins=[]), repo(), lambda a, n: cluster, clock
    )

    outcome = runner.run(runner.operation_for("rt"))

    assert outcome.retry_at is not None  # the daemon tries again
    (runtime,), _ = _status(tmp_path / "state.db")
    assert (runtime["state"], runtime["reason"]) == ("Error", "ClusterUnreachable")
    assert "connection refused" in runtime["message"]
    assert runtime["operation"]["state"] == "in progress"


def test_a_suspended_runtime_says_suspended_and_keeps_its_modules(tmp_path: Path) -> None:
    store, cluster, clock = SqliteStore(tmp_path / "state.db"), InMemoryCluster(), Clock()
    config = repo(ModuleRef("widget"))
    runner = Runner(
        store, Engine(store, clock=clock, plugins=[]), config, lambda a, n: cluster, clock
    )
    assert runner.run(runner.operation_for("rt")).operation.state is OperationState.SUCCEEDED
    store.suspend(Suspension("rt", clock(), "incident 7"))

    assert runner.run(runner.operation_for("rt")).operation.state is OperationState.SUCCEEDED

    (runtime,), text = _status(tmp_path / "state.db")
    assert (runtime["state"], runtime["reason"], runtime["suspended"]) == (
        "Suspended",
        "Suspended",
        True,
    )
    assert runtime["message"].endswith(": incident 7")
    assert [m["state"] for m in runtime["modules"]] == ["Ready"]  # not "0 of 1"
    assert _row(text, "rt")[:4] == ["rt", "Suspended", "-", "Suspended"]
    in_git = replace(config.runtimes["rt"], suspend=True)
    by_git = replace(config, runtimes={"rt": in_git})
    store.resume("rt")
    again = Runner(
        store, Engine(store, clock=clock, plugins=[]), by_git, lambda a, n: cluster, clock
    )
    assert again.run(again.operation_for("rt")).operation.state is OperationState.SUCCEEDED
    (runtime,), _ = _status(tmp_path / "state.db")
    assert (runtime["state"], runtime["message"]) == ("Suspended", "suspended (spec.suspend)")
    assert [m["state"] for m in runtime["modules"]] == ["Ready"]


def _names(text: str) -> list[str]:
    return [line.split()[0] for line in text.splitlines()[1:] if line.strip()]


# -- one value for the CLI and the daemon ----------------------------------------------------------


def test_status_json_is_one_value_for_the_cli_and_the_daemon(tmp_path: Path) -> None:
    cluster, clock = InMemoryCluster(), Clock()
    store = SqliteStore(tmp_path / "state.db")
    runner = runner_on(store, repo(ModuleRef("widget"), ModuleRef("gadget")), cluster, clock)
    runner.run(runner.operation_for("rt"))
    daemon = Daemon(UnusedSource(), store, None, clock)  # type: ignore[arg-type]
    try:
        served = daemon.status()["runtimes"]
    finally:
        daemon.close()

    printed = CliRunner().invoke(
        cli, ["status", "--state", f"sqlite:///{tmp_path / 'state.db'}", "--format", "json"]
    )

    assert printed.exit_code == 0, printed.output
    # what only a daemon knows: it never beat here, and no watch of its saw drift
    unwatched: dict[str, list[object]] = {"narrowed": [], "refused": []}
    daemon_only = {"error": "", "owner": "", "drift": [], "watches": unwatched}
    assert [r | daemon_only for r in json.loads(printed.output)["items"]] == served
    assert served[0] | {"updated": "-"} == {
        "runtime": "rt",
        "state": "Ready",
        "reason": "Install",
        "message": "2 modules",
        "commit": "c0ffee",
        "updated": "-",
        "operation": None,
        "lastFinished": None,
        "modules": [
            {
                "module": m,
                "state": "Ready",
                "reason": "Install",
                "message": f"{m} 1.0.0 is Ready",
                "version": "1.0.0",
            }
            for m in ("widget", "gadget")
        ],
        "suspension": None,
        "suspended": False,
        "error": "",
        "owner": "",
        "drift": [],
        "watches": {"narrowed": [], "refused": []},
    }
