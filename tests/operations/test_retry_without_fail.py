"""O5's limit is configurable: a step that retries without fail (``Wait_For_Managed_Resources``)
is skipped after the limit ``spec.operations.retryWithoutFail`` sets for its name, or as the
default, instead of after 5 minutes, and ``operations show`` says which limit skipped it. On the
in-memory cluster with a clock moved by hand (no sleeping) and a real SQLite store; then once
through ``reconciler sync`` on the sample repo, from ``reconciler.yaml`` to the skipped step."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

import reconciler.cli.clusters
from reconciler.cli import cli
from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.model import ModuleRef, RetryLimits
from reconciler.operations.engine import Engine
from reconciler.operations.model import Operation, StepRecord, StepState
from reconciler.operations.runner import Runner
from reconciler.operations.steps import (
    DEFAULT_RETRY_WITHOUT_FAIL,
    SkipLimit,
    Step,
    WaitForManagedResources,
    skip_limit,
)
from reconciler.operations.store import SqliteStore
from tests.support.lifecycle_helpers import NAMESPACE, repo
from tests.support.runs import Clock

WAIT = "Wait_For_Managed_Resources"
ROOT = Path(__file__).parents[2]


def _wait_step(operation: Operation) -> StepRecord:
    return next(t for s in operation.stages for t in s.steps if t.name == WAIT)


def _blocked_deprovision(
    tmp_path: Path, limits: RetryLimits
) -> tuple[Runner, Clock, list[tuple[timedelta, StepState]]]:
    """A runtime provisioned, a user's Widget blocking its module, the runtime gone from git and
    its deprovision run (each retry at its time) until it ends; the step's state after each run,
    by the time since the step first started."""
    cluster, clock = InMemoryCluster(), Clock()
    store = SqliteStore(tmp_path / "state.db")
    config = repo(ModuleRef("widget"))
    config = replace(config, settings=replace(config.settings, retry_limits=limits))
    engine = Engine(store, clock=clock, plugins=[], retry_limits=limits)
    setup = Runner(store, engine, config, lambda a, n: cluster, clock)
    setup.run(setup.operation_for("rt"))
    mine = {"apiVersion": "example.io/v1", "kind": "Widget"}
    cluster.apply(
        {**mine, "metadata": {"name": "mine", "namespace": NAMESPACE}}, field_manager="kubectl"
    )
    runner = Runner(store, engine, replace(config, runtimes={}), lambda a, n: cluster, clock)
    outcome = runner.run(runner.operation_for("rt"))
    seen = []
    while True:
        step = _wait_step(outcome.operation)
        assert step.first_started is not None
        seen.append((clock.now - step.first_started, step.state))
        if outcome.retry_at is None:
            return runner, clock, seen
        clock.now = outcome.retry_at
        outcome = runner.run(outcome.operation)


def _skipped_at(seen: list[tuple[timedelta, StepState]]) -> timedelta:
    return next(since for since, state in seen if state is StepState.SKIPPED)


def test_a_step_named_in_the_settings_is_skipped_after_its_limit_not_the_default(
    tmp_path: Path,
) -> None:
    limits = RetryLimits(steps={WAIT: timedelta(minutes=15)})

    runner, _, seen = _blocked_deprovision(tmp_path, limits)

    limit = limits.steps[WAIT]
    past_default = [s for since, s in seen if DEFAULT_RETRY_WITHOUT_FAIL <= since < limit]
    assert past_default, "runs between 5 and 15 minutes"
    assert set(past_default) == {StepState.RETRYING}  # past the default: still waiting
    assert timedelta(minutes=15) <= _skipped_at(seen) < timedelta(minutes=15, seconds=30)
    (operation,) = [o for o in runner.store.operations() if o.type == "deprovision"]
    assert _wait_step(operation).message.startswith(
        "skipped after 15m (retry-without-fail limit, spec.operations.retryWithoutFail.steps."
        "Wait_For_Managed_Resources): waiting for widget: 1 object(s), e.g. Widget/"
    )


def test_the_configured_default_replaces_five_minutes(tmp_path: Path) -> None:
    _, _, seen = _blocked_deprovision(tmp_path, RetryLimits(default=timedelta(minutes=1)))

    assert timedelta(minutes=1) <= _skipped_at(seen) < timedelta(minutes=1, seconds=30)


def test_without_settings_the_step_is_skipped_after_five_minutes(tmp_path: Path) -> None:
    runner, _, seen = _blocked_deprovision(tmp_path, RetryLimits())

    assert timedelta(minutes=5) <= _skipped_at(seen) < timedelta(minutes=5, seconds=30)
    (operation,) = [o for o in runner.store.operations() if o.type == "deprovision"]
    assert "(retry-without-fail limit, the default)" in _wait_step(operation).message


class OwnLimit(Step):
    """A plugin step with a limit of its own."""

    name = "Own_Limit"
    retry_without_fail = 90.0


class Marked(Step):
    """A plugin step that takes the configured limit."""

    name = "Marked"
    retry_without_fail = True


class Never(Step):
    """A step that is never skipped, whatever the settings name."""

    name = "Never"


def test_which_limit_applies_to_which_step() -> None:
    minute, hour = timedelta(minutes=1), timedelta(hours=1)
    setting = "spec.operations.retryWithoutFail"
    default_only = RetryLimits(default=hour)
    named = RetryLimits(default=hour, steps={"Own_Limit": minute, "Never": minute})

    assert skip_limit(WaitForManagedResources, RetryLimits()) == SkipLimit(
        timedelta(minutes=5), "the default"
    )
    assert skip_limit(Marked, default_only) == SkipLimit(hour, f"{setting}.default")
    assert skip_limit(OwnLimit, default_only) == SkipLimit(timedelta(seconds=90), "the step's own")
    assert skip_limit(OwnLimit, named) == SkipLimit(minute, f"{setting}.steps.Own_Limit")
    assert skip_limit(Never, named) is None  # validate refuses the name; the engine never skips


def test_operations_show_names_the_limit_that_skipped_a_step(tmp_path: Path) -> None:
    limits = RetryLimits(steps={WAIT: timedelta(minutes=15)})
    runner, _, _ = _blocked_deprovision(tmp_path, limits)
    (operation,) = [o for o in runner.store.operations() if o.type == "deprovision"]

    state = f"sqlite:///{tmp_path / 'state.db'}"
    shown = CliRunner().invoke(cli, ["operations", "show", operation.id, "--state", state])

    assert shown.exit_code == 0, shown.output
    (line,) = [x for x in shown.stdout.splitlines() if WAIT in x]
    assert "[-] Wait_For_Managed_Resources skipped, attempts " in line
    assert (
        ": skipped after 15m (retry-without-fail limit, spec.operations.retryWithoutFail." in line
    )


class _MovedClock:
    """The command line's clock, ``ahead`` of the real one."""

    def __init__(self) -> None:
        self.ahead = timedelta()

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.ahead


def test_sync_skips_after_the_limit_of_reconciler_yaml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = _MovedClock()
    monkeypatch.setattr(reconciler.cli.clusters, "now", clock)
    fleet = tmp_path / "sample-repo"
    shutil.copytree(ROOT / "sample-repo", fleet)
    shutil.copytree(ROOT / "channels", tmp_path / "channels")
    with (fleet / "reconciler.yaml").open("a", encoding="utf-8") as settings:
        settings.write(f"  operations:\n    retryWithoutFail: {{steps: {{{WAIT}: 20m}}}}\n")
    snapshot, state = tmp_path / "clusters", f"sqlite:///{tmp_path / 'state.db'}"
    common = ["--runtime", "dev-sandbox", "--snapshot", f"{snapshot}/", "--state", state]
    runner = CliRunner()
    provisioned = runner.invoke(cli, ["sync", str(fleet), *common, "--snapshot-create"])
    assert provisioned.exit_code == 0, provisioned.output
    cluster = json.loads((snapshot / "dev-sandbox.yaml").read_text())
    cluster["items"].append(
        {
            "apiVersion": "operator.kyma-project.io/v1alpha1",
            "kind": "Serverless",
            "metadata": {"name": "mine", "namespace": "default"},
            "spec": {},
        }
    )
    (snapshot / "dev-sandbox.yaml").write_text(json.dumps(cluster))
    (fleet / "runtimes" / "dev-sandbox.yaml").unlink()
    deprovision = ["sync", str(fleet), *common, "--allow-deletions", "dev-sandbox"]

    states = []
    for minutes in (0, 6, 21):  # the default's 5 minutes passed; then the configured 20
        clock.ahead = timedelta(minutes=minutes)
        runner.invoke(cli, deprovision)
        listed = runner.invoke(cli, ["operations", "list", "--state", state, "-o", "json"])
        latest = json.loads(listed.stdout)["items"][0]
        step = next(t for s in latest["stages"] for t in s["steps"] if t["name"] == WAIT)
        states.append(step["state"])

    assert states == ["retrying", "retrying", "skipped"]
    assert step["message"].startswith(
        "skipped after 20m (retry-without-fail limit, spec.operations.retryWithoutFail.steps."
        "Wait_For_Managed_Resources): waiting for serverless: 1 object(s), e.g. "
        "Serverless/default/mine"
    )
