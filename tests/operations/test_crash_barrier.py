"""The crash barrier: an exception nobody planned for fails an operation or a command, with one
line for people and the traceback only on request, never the process or the daemon.

Exceptions are injected at our boundaries: a cluster whose method raises (the in-memory
cluster's fault injection), a plugin step found through the ``reconciler.steps`` entry point of
a distribution on PYTHONPATH (run as a real ``python -m reconciler`` process), and a command
added to the CLI group for the test.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.cluster.memory import Fault, InMemoryCluster
from reconciler.core.model import ModuleRef
from reconciler.core.objects import ObjectRef
from reconciler.operations.engine import Engine
from reconciler.operations.model import OperationState, StepState
from reconciler.operations.runner import Runner
from reconciler.operations.store import SqliteStore
from tests.support.lifecycle_helpers import NAMESPACE, repo

ROOT = Path(__file__).parents[2]
SAMPLE = ROOT / "sample-repo"
DEPLOYMENT = ObjectRef("apps/v1", "Deployment", NAMESPACE, "widget-operator")
PLACE = re.compile(r"\(at (reconciler/[\w/]+\.py):(\d+)\)")

EXPLODING_STEP = """
from reconciler.operations.model import OperationType, StepResult
from reconciler.operations.steps import Step


class Explode(Step):
    name = "Explode"
    domain = "test"
    description = "Raises an exception no step should raise."
    operations = (OperationType.PROVISION, OperationType.UPDATE)
    stage = "apply"
    after = "Apply_Modules"

    def run(self, operation, context):
        raise RuntimeError("the plugin broke:\\n  42 is not a size")
"""


def _clock() -> datetime:
    return datetime(2026, 11, 18, 12, 0, tzinfo=UTC)


def _line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_an_exception_in_a_step_fails_that_operation_only(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "state.db")
    cluster = InMemoryCluster()
    boom = RuntimeError("no such thing as a widget")
    cluster.faults.append(Fault("apply", boom, match=lambda ref: ref == DEPLOYMENT))
    engine = Engine(store, clock=_clock, plugins=[])
    runner = Runner(store, engine, repo(ModuleRef("widget")), lambda a, n: cluster, _clock)

    crashed = runner.run(runner.operation_for("rt")).operation

    assert crashed.state is OperationState.FAILED
    failed = [t for s in crashed.stages for t in s.steps if t.state is StepState.FAILED]
    assert [t.name for t in failed] == ["Apply_Modules"]
    found = PLACE.search(failed[0].message)
    assert found is not None
    assert failed[0].message.startswith("internal error: RuntimeError: no such thing as a widget")
    memory = ROOT / "reconciler" / "cluster" / "memory.py"
    assert found.groups() == ("reconciler/cluster/memory.py", str(_line_of(memory, "raise fault")))
    assert crashed.message == f"step Apply_Modules failed: {failed[0].message}"
    record = store.runtime("rt")
    assert record is not None
    assert (record.state, record.reason) == ("Error", "InternalError")
    assert crashed.id in record.message
    assert engine.crashes[crashed.id].error is boom

    again = runner.run(runner.operation_for("rt")).operation  # the fault was used up

    assert again.state is OperationState.SUCCEEDED
    record = store.runtime("rt")
    assert record is not None
    assert record.state == "Ready"


# -- a plugin step that raises, in a real process -------------------------------------------------


@pytest.fixture(scope="module")
def plugins(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The exploding step as an installed distribution with a ``reconciler.steps`` entry point."""
    folder = tmp_path_factory.mktemp("plugins")
    (folder / "explode_step.py").write_text(EXPLODING_STEP)
    info = folder / "reconciler_explode_step-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: reconciler-explode-step\nVersion: 0.1.0\n"
    )
    (info / "entry_points.txt").write_text("[reconciler.steps]\nexplode = explode_step:Explode\n")
    return folder


def _sync(
    tmp: Path, plugins: Path, *options: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable,
        "-m",
        "reconciler",
        *options,
        "sync",
        str(SAMPLE),
        "--runtime",
        "prod-eu-1",
        "--snapshot",
        f"{tmp / 'clusters'}/",
        "--snapshot-create",
        "--state",
        f"sqlite:///{tmp / 'state.db'}",
    ]
    inherited = {k: v for k, v in os.environ.items() if k != "RECONCILER_DEBUG"}
    environment = {**inherited, "PYTHONPATH": str(plugins), **(env or {})}
    return subprocess.run(
        command, env=environment, capture_output=True, text=True, timeout=120, check=False
    )


def test_a_crashing_step_is_one_line_exit_1_and_recorded(tmp_path: Path, plugins: Path) -> None:
    done = _sync(tmp_path, plugins)

    assert done.returncode == 1, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    found = re.fullmatch(
        r"runtime prod-eu-1: operation (\w+) failed: internal error: RuntimeError: the plugin "
        r"broke: 42 is not a size \(at reconciler/operations/engine\.py:\d+\); "
        r"details: reconciler operations show (\w+)",
        lines[0],
    )
    assert found is not None, lines[0]
    assert found.group(1) == found.group(2)
    state = f"sqlite:///{tmp_path / 'state.db'}"
    shown = CliRunner().invoke(cli, ["operations", "show", found.group(1), "--state", state])
    assert shown.exit_code == 0
    assert "state:    failed: step Explode failed: internal error: RuntimeError" in shown.stdout
    assert "[!] Explode failed, attempts 1" in shown.stdout
    assert "the plugin broke: 42 is not a size (at reconciler/operations/engine.py:" in (
        shown.stdout
    )
    status = CliRunner().invoke(cli, ["status", "--state", state])
    assert re.search(r"prod-eu-1\s+Error\s+-\s+InternalError", status.stdout), status.stdout


@pytest.mark.parametrize(
    ("options", "env"), [(("--debug",), {}), ((), {"RECONCILER_DEBUG": "1"})], ids=["flag", "env"]
)
def test_debug_shows_the_traceback_of_a_crashing_step(
    tmp_path: Path, plugins: Path, options: tuple[str, ...], env: dict[str, str]
) -> None:
    done = _sync(tmp_path, plugins, *options, env=env)

    assert done.returncode == 1
    assert "Traceback (most recent call last)" in done.stderr
    assert re.search(r'explode_step\.py", line \d+, in run\n\s+raise RuntimeError', done.stderr)
    assert done.stderr.rstrip().splitlines()[-1].startswith("runtime prod-eu-1: operation ")


# -- an unexpected exception outside the steps ----------------------------------------------------


@pytest.fixture
def exploding_command() -> Iterator[str]:
    @click.command("explode-for-test")
    def explode() -> None:
        raise KeyError("no-such-key")

    cli.add_command(explode)
    try:
        yield "explode-for-test"
    finally:
        cli.commands.pop("explode-for-test")


def test_an_internal_error_of_a_command_is_one_line_and_exit_2(exploding_command: str) -> None:
    result = CliRunner().invoke(cli, [exploding_command], env={"RECONCILER_DEBUG": None})

    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == (
        "error: internal error: KeyError: 'no-such-key' (run with --debug for the traceback)\n"
    )


@pytest.mark.parametrize(
    ("args", "env"),
    [(["--debug"], {"RECONCILER_DEBUG": None}), ([], {"RECONCILER_DEBUG": "1"})],
    ids=["flag", "env"],
)
def test_debug_shows_the_traceback_of_an_internal_error(
    exploding_command: str, args: list[str], env: dict[str, str | None]
) -> None:
    result = CliRunner().invoke(cli, [*args, exploding_command], env=env)

    assert result.exit_code == 2
    assert result.stderr.startswith("Traceback (most recent call last)")
    assert 'raise KeyError("no-such-key")' in result.stderr
    assert result.stderr.endswith("error: internal error: KeyError: 'no-such-key'\n")


def test_errors_we_raise_and_usage_errors_are_unchanged(tmp_path: Path) -> None:
    state = f"sqlite:///{tmp_path / 'state.db'}"
    missing = CliRunner().invoke(cli, ["operations", "show", "nope", "--state", state])
    usage = CliRunner().invoke(cli, ["sync", "--no-such-option"])

    assert missing.exit_code == 2
    assert "internal error" not in missing.stderr
    assert usage.exit_code == 2
    assert "No such option" in usage.stderr
