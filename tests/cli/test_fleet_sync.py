"""Fleet-scale ``sync``: runtimes in parallel, each printed as it finishes, progress and a summary
on standard error, store work per runtime that does not grow with the fleet, and snapshot saves that
cost the objects a write changed."""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.cli.progress import Progress
from reconciler.cli.workers import RampUp
from reconciler.cluster.snapshot import load_snapshot
from reconciler.operations.store.base import Parameters, Statements
from tests.support.fleet_generator import generate_fleet


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


# -- ramp-up -------------------------------------------------------------------------------------


def test_the_width_grows_by_one_per_finished_runtime_and_per_step_up_to_the_limit() -> None:
    clock = FakeClock()
    ramp = RampUp(4, clock, step=1.0)
    assert ramp.width() == 1  # the first runtime alone: its result is not held up by others

    with ramp.slot():
        pass
    assert ramp.width() == 2
    clock.now = 1.0
    assert ramp.width() == 3  # a step passed: I/O-bound work does not wait for a first result
    clock.now = 60.0
    assert ramp.width() == 4


def test_a_second_runtime_waits_for_the_first_to_finish_before_a_step_passed() -> None:
    asked = threading.Event()  # the second runtime's thread looked at the clock: it is waiting

    def clock() -> float:
        if threading.current_thread().name == "second":
            asked.set()
        return 0.0  # no step ever passes

    ramp = RampUp(8, clock, step=3600.0)
    started = threading.Event()
    order: list[str] = []

    def second() -> None:
        with ramp.slot():
            order.append("second started")
            started.set()

    with ramp.slot():
        thread = threading.Thread(target=second, name="second")
        thread.start()
        assert asked.wait(30)
        assert not started.is_set()
        order.append("first finished")
    assert started.wait(30)
    thread.join()
    assert order == ["first finished", "second started"]


# -- progress ------------------------------------------------------------------------------------


def test_progress_off_a_terminal_is_a_line_every_period_then_the_summary() -> None:
    stream, out, clock = io.StringIO(), io.StringIO(), FakeClock()
    progress = Progress(4, stream, clock, terminal=False, every=10.0)

    clock.now = 2.0
    progress.finished("done", "runtime a: ok\n", out)
    clock.now = 11.0
    progress.finished("failed", "runtime b: failed\n", out)
    clock.now = 12.0
    progress.finished("waiting", "", out)
    clock.now = 16.0
    progress.finished("done", "", out)
    progress.close()

    assert out.getvalue() == "runtime a: ok\nruntime b: failed\n"
    assert stream.getvalue().splitlines() == [
        "progress: 2/4 runtimes: 1 done, 1 failed, 0 waiting, 0.2/s, about 11.0s left",
        "synced 4 of 4 runtimes in 16.0s: 2 done, 1 failed, 1 waiting",
    ]


def test_progress_on_a_terminal_is_one_line_redrawn_under_the_output() -> None:
    stream, clock = io.StringIO(), FakeClock()
    progress = Progress(2, stream, clock, terminal=True)

    clock.now = 1.0
    progress.finished("done", "runtime a: ok\n", stream)
    clock.now = 2.0
    progress.finished("done", "runtime b: ok\n", stream)
    progress.close()

    text = stream.getvalue()
    assert text.startswith("runtime a: ok\n\r\x1b[2K1/2 runtimes: 1 done")
    assert "\r\x1b[2Kruntime b: ok\n" in text
    assert text.endswith("\r\x1b[2Ksynced 2 of 2 runtimes in 2.0s: 2 done, 0 failed, 0 waiting\n")


# -- the command -------------------------------------------------------------------------------


def _sync(fleet: Path, tmp: Path, *extra: str) -> Any:
    snapshots = tmp / "clusters"
    args = ["sync", str(fleet), "--snapshot", f"{snapshots}/", "--snapshot-create"]
    args += ["--state", f"sqlite:///{tmp}/s.db"]
    return CliRunner().invoke(cli, [*args, *extra])


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fleet") / "repo"
    generate_fleet(root, runtimes=12, modules=4, versions=2, seed=3)
    return root


def test_parallel_sync_prints_every_runtime_once_and_a_summary(fleet: Path, tmp_path: Path) -> None:
    result = _sync(fleet, tmp_path, "--parallel", "4")

    assert result.exit_code == 0, result.output
    headlines = [line for line in result.stdout.splitlines() if line.startswith("runtime ")]
    assert sorted(h.split(":")[0] for h in headlines) == [f"runtime rt-{i:05d}" for i in range(12)]
    assert all(" provision " in h and " succeeded: " in h for h in headlines)
    assert result.stderr.splitlines()[-1].startswith("synced 12 of 12 runtimes in ")
    assert result.stderr.splitlines()[-1].endswith(": 12 done, 0 failed, 0 waiting")


def test_parallel_and_one_at_a_time_leave_the_same_clusters(fleet: Path, tmp_path: Path) -> None:
    one, many = tmp_path / "one", tmp_path / "many"
    one.mkdir()
    many.mkdir()

    assert _sync(fleet, one, "--parallel", "1").exit_code == 0
    assert _sync(fleet, many, "--parallel", "6").exit_code == 0

    for path in sorted((one / "clusters").glob("*.yaml")):
        assert _objects(path) == _objects(many / "clusters" / path.name), path.name


def _objects(path: Path) -> list[tuple[str, str, str]]:
    documents = load_snapshot(path).objects()
    return sorted(
        (d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]) for d in documents
    )


def test_the_json_document_lists_operations_by_runtime(fleet: Path, tmp_path: Path) -> None:
    result = _sync(fleet, tmp_path, "--parallel", "4", "--format", "json")

    document = json.loads(result.stdout)
    runtimes = [o["runtime"] for o in document["operations"]]
    assert runtimes == sorted(runtimes)
    assert len(runtimes) == 12


def test_store_work_per_runtime_does_not_grow_with_the_fleet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Linear cost: the statements a sync sends to the store, per runtime, are the same for a
    fleet of 4 and of 16 (the first sync, then a second that changes nothing)."""
    counted: list[int] = []
    real = Statements.run

    def counting(statements: Statements, sql: str, parameters: Parameters = ()) -> Any:
        counted.append(1)
        return real(statements, sql, parameters)

    monkeypatch.setattr(Statements, "run", counting)
    per_runtime = {}
    for size in (4, 16):
        fleet = tmp_path / f"fleet-{size}"
        generate_fleet(fleet, runtimes=size, modules=3, versions=2, seed=5)
        work = tmp_path / f"work-{size}"
        work.mkdir()
        assert _sync(fleet, work, "--parallel", "1").exit_code == 0
        counted.clear()
        assert _sync(fleet, work, "--parallel", "1").exit_code == 0
        per_runtime[size] = len(counted) / size

    assert per_runtime[16] <= per_runtime[4] * 1.1, per_runtime


# -- diff over the fleet -----------------------------------------------------------------------


def _diff(fleet: Path, tmp: Path, *extra: str) -> Any:
    snapshots = tmp / "clusters"
    snapshots.mkdir(exist_ok=True)  # recorded, empty: a --snapshot that does not exist is refused
    args = ["diff", str(fleet), "--snapshot", f"{snapshots}/", "--state", f"sqlite:///{tmp}/s.db"]
    return CliRunner().invoke(cli, [*args, *extra])


def test_a_parallel_diff_prints_the_runtimes_in_order_whatever_finishes_first(
    fleet: Path, tmp_path: Path
) -> None:
    one = _diff(fleet, tmp_path, "--parallel", "1")
    many = _diff(fleet, tmp_path, "--parallel", "6")

    assert one.exit_code == many.exit_code == 1  # nothing synced yet: changes
    assert one.stdout == many.stdout
    headlines = [line.split(":")[0] for line in many.stdout.splitlines() if line[:1] == "r"]
    assert headlines == [f"runtime rt-{i:05d}" for i in range(12)]
    assert many.stderr.splitlines()[-1].startswith("planned 12 of 12 runtimes in ")


def test_a_runtime_that_cannot_be_planned_is_named_at_once_and_the_rest_go_on(
    fleet: Path, tmp_path: Path
) -> None:
    clusters = tmp_path / "clusters"
    clusters.mkdir()
    (clusters / "rt-00003.yaml").write_text("- not: [a snapshot\n")

    result = _diff(fleet, tmp_path, "--parallel", "4")

    assert result.exit_code == 2
    assert "runtime rt-00003: error: " in result.stderr
    headlines = [line.split(":")[0] for line in result.stdout.splitlines() if line[:1] == "r"]
    assert len(headlines) == 11
    assert result.stderr.splitlines()[-1].endswith(": 11 done, 1 failed, 0 waiting")
