"""Operations across real processes: a SIGKILL in the middle and a resume, two processes on one
SQLite file, and the plugin example of docs/runtime-operations.md installed with pip.

Each test runs `python -m reconciler sync` in subprocesses against a snapshot folder (saved after
every change, so it survives a kill) and a state store in a temporary folder. Plugin steps are
installed with pip into a folder put on PYTHONPATH, so they are found through the
`reconciler.steps` entry point exactly as a user's would be.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reconciler.cluster.snapshot import load_snapshot
from tests.support.step_plugins import install_step_package, write_step_package

ROOT = Path(__file__).parents[2]
SAMPLE = ROOT / "sample-repo"
SERVER_FIELDS = ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation")

CRASH_STEP = """
import os, signal
from pathlib import Path
from reconciler.operations.model import OperationType, StepResult
from reconciler.operations.steps import Step

class CrashOnce(Step):
    name = "Crash_Once"
    domain = "test"
    description = "Kills its own process with SIGKILL the first time it runs."
    operations = (OperationType.PROVISION, OperationType.UPDATE)
    stage = "apply"
    after = "Apply_Modules"

    def run(self, operation, context):
        marker = Path(os.environ["CRASH_MARKER"])
        if not marker.exists():
            marker.write_text("crashed")
            os.kill(os.getpid(), signal.SIGKILL)
        return StepResult("survived")
"""

KEEP_STEP = """
import os
from pathlib import Path
from reconciler.operations.model import OperationType, StepResult
from reconciler.operations.steps import Step

class OpenTicket(Step):
    name = "Open_Ticket"
    domain = "test"
    description = "Opens a ticket once (a slow external call), keeping its number."
    operations = (OperationType.PROVISION, OperationType.UPDATE)
    stage = "apply"
    after = "Apply_Modules"

    def run(self, operation, context):
        kept = operation.data.kept_by(self.name)
        if "ticket" in kept:
            return StepResult(f"ticket {kept['ticket']} already open")
        calls = Path(os.environ["TICKET_CALLS"])
        with calls.open("a") as log:
            log.write("opened\\n")
        ticket = f"T-{len(calls.read_text().splitlines())}"
        operation.data = operation.data.keeping(self.name, {"ticket": ticket, "attempt": 1})
        return StepResult(f"opened ticket {ticket}")
"""

CRASH_AFTER_TICKET = CRASH_STEP.replace('after = "Apply_Modules"', 'after = "Open_Ticket"')

HOLD_STEP = """
import os, time
from pathlib import Path
from reconciler.operations.model import OperationType, StepResult
from reconciler.operations.steps import Step

class HoldUntilReleased(Step):
    name = "Hold_Until_Released"
    domain = "test"
    description = "Waits (bounded) until the test creates a release file."
    operations = (OperationType.PROVISION, OperationType.UPDATE)
    stage = "apply"
    after = "Apply_Modules"

    def run(self, operation, context):
        folder = os.environ.get("HOLD_DIR")
        if folder:
            Path(folder, "holding").write_text(str(os.getpid()))
            deadline = time.monotonic() + 60
            while not Path(folder, "release").exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        return StepResult("released")
"""


def _command(
    tmp: Path, plugins: Path | None, extra_env: dict[str, str], *args: str
) -> tuple[list[str], dict[str, str]]:
    env = {**os.environ, "RECONCILER_STATE": f"sqlite:///{tmp / 'state.db'}", **extra_env}
    if plugins is not None:
        env["PYTHONPATH"] = str(plugins)
    command = [
        sys.executable,
        "-m",
        "reconciler",
        "sync",
        str(SAMPLE),
        "--runtime",
        "prod-eu-1",
        "--snapshot",
        f"{tmp / 'clusters'}/",
        "--snapshot-create",
        "--format",
        "json",
        *args,
    ]
    return command, env


def _sync(
    tmp: Path, plugins: Path | None, extra_env: dict[str, str], *args: str
) -> subprocess.CompletedProcess[str]:
    command, env = _command(tmp, plugins, extra_env, *args)
    return subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def _start(tmp: Path, plugins: Path | None, extra_env: dict[str, str]) -> subprocess.Popen[str]:
    command, env = _command(tmp, plugins, extra_env)
    return subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _objects(path: Path) -> list[dict[str, Any]]:
    objects = load_snapshot(path).snapshot()
    for body in objects:
        for name in SERVER_FIELDS:
            body["metadata"].pop(name, None)
        body.get("status", {}).pop("observedGeneration", None)
    return sorted(
        objects,
        key=lambda o: (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]),
    )


def _operations(tmp: Path) -> list[dict[str, Any]]:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "reconciler",
            "operations",
            "list",
            "--format",
            "json",
            "--state",
            f"sqlite:///{tmp / 'state.db'}",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    document = json.loads(done.stdout)
    assert document["kind"] == "OperationList"
    found: list[dict[str, Any]] = document["items"]
    return found


def _until(condition: Callable[[], bool], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_sigkill_mid_operation_then_resume(tmp_path: Path) -> None:
    """Slow by nature (about 4 s, more on a loaded machine): pip installs the crashing step, then
    three `reconciler sync` and two `reconciler operations` processes start Python afresh."""
    plugins = tmp_path / "plugins"
    install_step_package(
        write_step_package(tmp_path, "crash_step", CRASH_STEP, "CrashOnce"), plugins
    )
    env = {"CRASH_MARKER": str(tmp_path / "crashed")}

    killed = _sync(tmp_path, plugins, env)

    assert killed.returncode == -signal.SIGKILL
    (operation,) = _operations(tmp_path)
    assert operation["state"] == "in progress"
    stages = {s["name"]: s for s in operation["stages"]}
    assert stages["plan"]["done"]
    assert not stages["apply"]["done"]

    resumed = _sync(tmp_path, plugins, env)

    assert resumed.returncode == 0, resumed.stderr
    (final,) = _operations(tmp_path)
    assert final["id"] == operation["id"]  # resumed, not started again
    assert final["state"] == "succeeded"
    attempts = {(s["name"], t["name"]): t["attempts"] for s in final["stages"] for t in s["steps"]}
    assert attempts[("starting", "Starting")] == 1
    assert attempts[("plan", "Plan_Changes")] == 1  # a finished stage is never repeated
    assert attempts[("apply", "Apply_Modules")] == 2  # the unfinished stage starts again
    assert attempts[("apply", "Crash_Once")] == 2

    reference = tmp_path / "reference"
    reference.mkdir()
    _sync(reference, None, {})
    assert _objects(tmp_path / "clusters" / "prod-eu-1.yaml") == _objects(
        reference / "clusters" / "prod-eu-1.yaml"
    )


def test_a_step_keeps_its_own_data_and_does_not_repeat_its_call_after_a_sigkill(
    tmp_path: Path,
) -> None:
    """A plugin step opens a ticket (a call not to repeat) and keeps its number in the
    operation; the next step kills the process; the resumed operation runs the unfinished stage
    again from its first step, and the ticket step finds its number instead of calling again."""
    plugins = tmp_path / "plugins"
    for module, source, entry in (
        ("ticket_step", KEEP_STEP, "OpenTicket"),
        ("crash_step", CRASH_AFTER_TICKET, "CrashOnce"),
    ):
        install_step_package(write_step_package(tmp_path, module, source, entry), plugins)
    calls = tmp_path / "calls.log"
    env = {"CRASH_MARKER": str(tmp_path / "crashed"), "TICKET_CALLS": str(calls)}

    killed = _sync(tmp_path, plugins, env)
    assert killed.returncode == -signal.SIGKILL
    resumed = _sync(tmp_path, plugins, env)
    assert resumed.returncode == 0, resumed.stderr

    assert calls.read_text() == "opened\n"  # once, not again at the resume
    (final,) = _operations(tmp_path)
    steps = {t["name"]: t for s in final["stages"] for t in s["steps"]}
    assert steps["Open_Ticket"]["attempts"] == 2
    assert steps["Open_Ticket"]["message"] == "ticket T-1 already open"
    assert steps["Open_Ticket"]["data"] == {"ticket": "T-1", "attempt": 1}


def test_two_processes_never_run_two_operations_of_one_runtime(tmp_path: Path) -> None:
    """Slow by nature (about 3 s, more on a loaded machine): pip installs the holding step, then
    two `reconciler sync` processes race for one runtime, each a fresh Python."""
    plugins = tmp_path / "plugins"
    install_step_package(
        write_step_package(tmp_path, "hold_step", HOLD_STEP, "HoldUntilReleased"), plugins
    )
    hold = tmp_path / "hold"
    hold.mkdir()

    first = _start(tmp_path, plugins, {"HOLD_DIR": str(hold)})
    _until(lambda: (hold / "holding").exists())
    second = _sync(tmp_path, plugins, {})
    (during,) = _operations(tmp_path)
    (hold / "release").write_text("go")
    first.communicate(timeout=120)

    assert second.returncode == 0
    report = json.loads(second.stdout)
    message = report["operations"][0]["message"]
    assert message.startswith(f"waiting: operation {during['id']} of ")
    assert str(first.pid) in message
    assert first.returncode == 0
    (final,) = _operations(tmp_path)
    assert final["state"] == "succeeded"
    assert all(t["attempts"] == 1 for s in final["stages"] for t in s["steps"])


def test_the_documented_plugin_works_as_written(tmp_path: Path) -> None:
    """Slow by nature (about 3 s): pip builds and installs the documented example, then a real
    `reconciler sync` loads it through its entry point."""
    example = ROOT / "docs" / "examples" / "announce-step"
    page = (ROOT / "docs" / "runtime-operations.md").read_text()
    for name in ("announce_step.py", "pyproject.toml"):
        assert (example / name).read_text().strip() in page, f"{name} differs from the docs"
    plugins = tmp_path / "plugins"
    copy = tmp_path / "example"  # building writes build/ next to the sources: not in the repo
    shutil.copytree(example, copy)
    install_step_package(copy, plugins)
    announcements = tmp_path / "announcements.log"

    done = _sync(tmp_path, plugins, {"RECONCILER_ANNOUNCE_FILE": str(announcements)})

    assert done.returncode == 0
    lines = announcements.read_text().splitlines()
    assert sorted(lines) == [
        "prod-eu-1 api-gateway 1.0.0 Ready",
        "prod-eu-1 istio 1.0.0 Ready",
        "prod-eu-1 serverless 1.1.0 Ready",
        "prod-eu-1 telemetry 1.0.0 Ready",
    ]
    (operation,) = _operations(tmp_path)
    apply = next(s for s in operation["stages"] if s["name"] == "apply")
    assert [t["name"] for t in apply["steps"]][2:4] == ["Apply_Modules", "Announce_Modules"]
    shutil.rmtree(plugins)
