"""Runtime operations: stages and retryable steps (O1-O5) on the in-memory cluster, with a
fake clock (no sleeping) and a real SQLite store. What every store must do (schema versions,
claims, O3 across connections) is in tests/store_contract, run on SQLite and PostgreSQL."""

from __future__ import annotations

import shutil
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.model import ClusterAccess, ConfigRepo, ModuleRef
from reconciler.core.objects import ObjectRef
from reconciler.errors import PermanentError
from reconciler.operations.engine import Engine, stages_for
from reconciler.operations.model import (
    OperationData,
    OperationState,
    OperationType,
    StepResult,
    StepState,
)
from reconciler.operations.runner import Runner
from reconciler.operations.steps import Step, StepContext
from reconciler.operations.store import SqliteStore
from reconciler.operations.store.codec import decode_data, encode_data
from tests.support.lifecycle_helpers import NAMESPACE, repo
from tests.support.runs import Clock


class AlwaysRetry(Step):
    """A plugin step that keeps asking to retry, every hour (the fake clock jumps to each retry:
    a day's limit is 24 runs, not the 1,440 of a retry every minute)."""

    name = "Always_Retry"
    domain = "test"
    description = "asks to retry, forever"
    operations = (OperationType.PROVISION, OperationType.UPDATE)
    stage = "apply"
    after = "Apply_Modules"

    def run(self, operation: object, context: StepContext) -> StepResult:
        return StepResult("not yet", retry_after=3600)


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    return SqliteStore(tmp_path / "state.db")


def _runner(
    store: SqliteStore,
    config: ConfigRepo,
    cluster: InMemoryCluster,
    clock: Clock,
    plugins: list[type[Step]] | None = None,
) -> Runner:
    engine = Engine(store, clock=clock, plugins=plugins or [])
    return Runner(store, engine, config, lambda access, name: cluster, clock)


def test_provision_then_update_then_deprovision(store: SqliteStore) -> None:
    cluster, clock = InMemoryCluster(), Clock()
    config = repo(ModuleRef("widget"))
    runner = _runner(store, config, cluster, clock)

    first = runner.run(runner.operation_for("rt")).operation
    assert (first.type, first.state) == (OperationType.PROVISION, OperationState.SUCCEEDED)
    assert all(stage.done for stage in first.stages)
    second = runner.run(runner.operation_for("rt")).operation
    assert second.type is OperationType.UPDATE
    assert [r.runtime for r in store.runtimes()] == ["rt"]

    gone = _runner(store, replace(config, runtimes={}), cluster, clock)
    assert gone.removed_runtimes() == ["rt"]
    last = gone.run(gone.operation_for("rt")).operation
    assert (last.type, last.state) == (OperationType.DEPROVISION, OperationState.SUCCEEDED)
    assert store.runtimes() == []
    assert cluster.get(ObjectRef("apps/v1", "Deployment", NAMESPACE, "widget-operator")) is None


def test_a_retry_restarts_the_stage_and_finished_stages_never_repeat(store: SqliteStore) -> None:
    cluster, clock = InMemoryCluster(auto_ready=False), Clock()
    runner = _runner(store, repo(ModuleRef("widget")), cluster, clock)

    waiting = runner.run(runner.operation_for("rt"))

    assert waiting.retry_at == clock.now + timedelta(seconds=10)
    operation = waiting.operation
    assert operation.state is OperationState.IN_PROGRESS
    assert operation.stage("plan").done
    check = operation.stage("apply").steps[-1]
    assert (check.name, check.state) == ("Check_Modules_Ready", StepState.RETRYING)
    assert "widget (WaitingForOperator)" in check.message

    cluster.set_status(
        ObjectRef("apps/v1", "Deployment", NAMESPACE, "widget-operator"),
        {"observedGeneration": 1, "availableReplicas": 1},
    )
    clock.advance(10)
    done = runner.run(store.unfinished("rt") or operation).operation

    assert done.state is OperationState.SUCCEEDED
    attempts = {(s.name, t.name): t.attempts for s in done.stages for t in s.steps}
    assert attempts[("plan", "Plan_Changes")] == 1  # finished stage not repeated
    assert attempts[("apply", "Apply_Modules")] == 2  # the stage started again from its start
    assert attempts[("apply", "Check_Modules_Ready")] == 2


def test_past_its_time_limit_an_operation_fails_naming_the_step(store: SqliteStore) -> None:
    cluster, clock = InMemoryCluster(), Clock()
    runner = _runner(store, repo(ModuleRef("widget")), cluster, clock, plugins=[AlwaysRetry])
    outcome = runner.run(runner.operation_for("rt"))
    while outcome.retry_at is not None:
        clock.now = outcome.retry_at
        outcome = runner.run(outcome.operation)

    operation = outcome.operation
    assert operation.state is OperationState.FAILED
    assert operation.message.startswith("timed out after 1 day, 0:00:00: step Always_Retry")
    assert "(not yet)" in operation.message
    assert clock.now >= operation.deadline


def test_an_operation_past_its_limit_before_a_step_ran_says_so(store: SqliteStore) -> None:
    """It said the step was "still asking to retry (no message)", though it never asked."""
    cluster, clock = InMemoryCluster(), Clock()
    runner = _runner(store, repo(ModuleRef("widget")), cluster, clock)
    operation = runner.operation_for("rt")
    clock.now = operation.deadline + timedelta(seconds=1)

    failed = runner.run(operation).operation

    assert failed.state is OperationState.FAILED
    assert failed.message.startswith("timed out after 1 day, 0:00:00, before step ")
    assert "still asking to retry" not in failed.message


def test_deprovision_skips_a_step_past_its_own_limit_then_fails_naming_what_is_left(
    store: SqliteStore,
) -> None:
    cluster, clock = InMemoryCluster(), Clock()
    config = repo(ModuleRef("widget"))
    setup = _runner(store, config, cluster, clock)
    setup.run(setup.operation_for("rt"))
    mine = {
        "apiVersion": "example.io/v1",
        "kind": "Widget",
        "metadata": {"name": "mine", "namespace": NAMESPACE},
    }
    cluster.apply(mine, field_manager="kubectl")
    runner = _runner(store, replace(config, runtimes={}), cluster, clock)

    outcome = runner.run(runner.operation_for("rt"))
    while outcome.retry_at is not None:
        clock.now = outcome.retry_at
        outcome = runner.run(outcome.operation)

    operation = outcome.operation
    assert operation.state is OperationState.FAILED  # never "succeeded" with widget left
    ((stage, skipped),) = operation.skipped_steps()
    assert (stage, skipped.name) == ("resources", "Wait_For_Managed_Resources")
    assert "Widget/widget-system/mine" in skipped.message
    assert operation.message.startswith("step Remove_Runtime_Record failed: left in the cluster")
    assert "widget (deletion of widget waits for 1 object(s)" in operation.message
    assert "Widget/widget-system/mine" in operation.message
    assert cluster.get(ObjectRef("apps/v1", "Deployment", NAMESPACE, "widget-operator")) is not None
    (record,) = store.runtimes()
    assert (record.state, record.reason) == ("Deleting", "WaitingForResources")
    assert "Widget/widget-system/mine" in record.message
    assert runner.removed_runtimes() == ["rt"]  # so the next sync deprovisions again

    cluster.delete(ObjectRef.of(mine))
    again = runner.operation_for("rt")
    assert again.type is OperationType.DEPROVISION
    assert again.id != operation.id
    final = runner.run(again).operation
    assert final.state is OperationState.SUCCEEDED
    assert final.skipped_steps() == []
    assert store.runtimes() == []
    assert cluster.get(ObjectRef("apps/v1", "Deployment", NAMESPACE, "widget-operator")) is None
    assert runner.engine.retrigger() == []


WIDGETS = ObjectRef("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets.example.io")


def _deprovision_with_a_held_crd(store: SqliteStore) -> tuple[Runner, InMemoryCluster, Clock]:
    """Runtime ``rt`` provisioned with widget, its CRD held by a finalizer of someone else's,
    then gone from git: the runner that deprovisions it."""
    cluster, clock = InMemoryCluster(), Clock()
    config = repo(ModuleRef("widget"))
    setup = _runner(store, config, cluster, clock)
    setup.run(setup.operation_for("rt"))
    held = {
        "apiVersion": WIDGETS.api_version,
        "kind": WIDGETS.kind,
        "metadata": {"name": WIDGETS.name, "finalizers": ["x/y"]},
    }
    cluster.apply(held, field_manager="kubectl")
    return _runner(store, replace(config, runtimes={}), cluster, clock), cluster, clock


def test_a_deprovision_asks_again_for_a_crd_the_server_still_deletes(store: SqliteStore) -> None:
    runner, cluster, clock = _deprovision_with_a_held_crd(store)

    waiting = runner.run(runner.operation_for("rt"))  # never waits within the pass

    assert waiting.retry_at == clock.now + timedelta(seconds=10)
    step = waiting.operation.stage("modules").steps[1]
    assert (step.name, step.state) == ("Delete_Module_Manifests", StepState.RETRYING)
    assert step.message == "waiting for the server to delete what widget left"
    cluster.patch(WIDGETS, {"metadata": {"finalizers": None}})  # its deletion finishes
    clock.advance(1)  # woken (the daemon) or asked again (sync) before the retry
    done = runner.run(waiting.operation).operation
    assert done.state is OperationState.SUCCEEDED
    assert store.runtimes() == []
    assert cluster.get(WIDGETS) is None


def test_a_crd_still_deleted_after_10_s_is_left_for_a_new_deprovision(store: SqliteStore) -> None:
    runner, _, clock = _deprovision_with_a_held_crd(store)

    outcome = runner.run(runner.operation_for("rt"))
    while outcome.retry_at is not None:
        clock.now = outcome.retry_at
        outcome = runner.run(outcome.operation)

    assert clock.now == outcome.operation.created + timedelta(seconds=10)  # asked up to 10 s
    assert outcome.operation.state is OperationState.FAILED
    assert "left in the cluster: widget" in outcome.operation.message
    assert "finalizers x/y" in outcome.operation.message


def test_optional_steps_can_be_switched_off_and_plugins_are_checked() -> None:
    class Optional(Step):
        name = "Optional_Check"
        optional = True
        operations = (OperationType.UPDATE,)
        stage = "plan"
        after = "Resolve_Kubeconfig"

    stages = dict(stages_for(OperationType.UPDATE, [Optional]))
    assert [s.name for s in stages["plan"]][:2] == ["Resolve_Kubeconfig", "Optional_Check"]
    off = dict(stages_for(OperationType.UPDATE, [Optional], frozenset({"Optional_Check"})))
    assert "Optional_Check" not in [s.name for s in off["plan"]]

    class Lost(Step):
        name = "Lost"
        operations = (OperationType.UPDATE,)
        stage = "nowhere"

    with pytest.raises(Exception, match="no stage 'nowhere'"):
        stages_for(OperationType.UPDATE, [Lost])


def test_a_plugin_may_follow_another_plugins_step_whatever_their_order() -> None:
    class First(Step):
        name = "First_Plugin"
        operations = (OperationType.UPDATE,)
        stage = "apply"
        after = "Apply_Modules"

    class Second(Step):
        name = "Second_Plugin"
        operations = (OperationType.UPDATE,)
        stage = "apply"
        after = "First_Plugin"

    class Orphan(Step):
        name = "Orphan"
        operations = (OperationType.UPDATE,)
        stage = "apply"
        after = "Not_Installed"

    for plugins in ([First, Second], [Second, First]):
        names = [s.name for s in dict(stages_for(OperationType.UPDATE, plugins))["apply"]]
        assert names[names.index("Apply_Modules") :][:3] == [
            "Apply_Modules",
            "First_Plugin",
            "Second_Plugin",
        ]
    with pytest.raises(Exception, match="step Orphan: no step 'Not_Installed' in stage apply"):
        stages_for(OperationType.UPDATE, [First, Orphan])


def test_a_step_keeps_json_data_and_never_a_secret() -> None:
    data = OperationData().keeping("Open_Ticket", {"ticket": "T-1", "ids": [1, 2]})
    assert data.kept_by("Open_Ticket") == {"ticket": "T-1", "ids": [1, 2]}
    assert data.kept_by("Other") == {}
    assert decode_data(encode_data(data)) == data  # as the store keeps it
    assert data.keeping("Open_Ticket", {}).kept_by("Open_Ticket") == {}
    with pytest.raises(PermanentError, match="step Open_Ticket: its data is not JSON"):
        data.keeping("Open_Ticket", {"when": object()})
    with pytest.raises(PermanentError, match=r"holds a GitHub token at \.token"):
        data.keeping("Open_Ticket", {"token": "ghp_" + "a" * 36})
    with pytest.raises(PermanentError, match="over 65536"):
        data.keeping("Open_Ticket", {"blob": "x" * 70_000})


def test_no_secret_reaches_the_store(store: SqliteStore, tmp_path: Path) -> None:
    cluster, clock = InMemoryCluster(), Clock()
    config = repo(ModuleRef("widget"))
    runtime = replace(config.runtimes["rt"], cluster=ClusterAccess(kubeconfig_secret="rt-kc"))
    runner = _runner(store, replace(config, runtimes={"rt": runtime}), cluster, clock)
    runner.run(runner.operation_for("rt"))

    raw = b"".join(p.read_bytes() for p in tmp_path.glob("state.db*"))
    assert b"rt-kc" in raw  # the Secret's name, a reference
    assert b"BEGIN" not in raw
    assert b"token" not in raw


def test_blocked_deletion_is_named_by_operations_show(tmp_path: Path) -> None:
    sample = Path(__file__).parents[2] / "sample-repo"
    clusters, state = tmp_path / "clusters", f"sqlite:///{tmp_path / 'state.db'}"
    runner = CliRunner()
    args = ["--runtime", "prod-eu-1", "--snapshot", f"{clusters}/", "--state", state]
    assert runner.invoke(cli, ["sync", str(sample), *args, "--snapshot-create"]).exit_code == 0
    fleet = tmp_path / "fleet"
    shutil.copytree(sample, fleet)
    shutil.copytree(sample.parent / "channels", tmp_path / "channels")
    runtime = fleet / "runtimes" / "prod-eu-1.yaml"
    dropped = "    - name: serverless\n      strategy: CreateAndDelete\n"
    runtime.write_text(runtime.read_text().replace(dropped, ""))
    users_resource = (
        "---\napiVersion: operator.kyma-project.io/v1alpha1\nkind: Serverless\n"
        "metadata: {name: mine, namespace: kyma-system}\n"
    )
    with (clusters / "prod-eu-1.yaml").open("a") as snapshot:
        snapshot.write(users_resource)

    result = runner.invoke(cli, ["sync", str(fleet), *args])
    listing = runner.invoke(
        cli, ["operations", "list", "--runtime", "prod-eu-1", "--no-headers", "--state", state]
    )
    newest = listing.stdout.split()[0]
    shown = runner.invoke(cli, ["operations", "show", newest[:6], "--state", state])

    assert "Deleting" in result.stdout
    assert "Remove_Modules retrying" in shown.stdout
    assert "Serverless/kyma-system/mine" in shown.stdout
