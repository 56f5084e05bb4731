"""SIGKILLs at random API calls of install, upgrade, removal and deprovision: a fresh process
finishes the work and the result is the fault-free one.

Each trial (see :mod:`tests.support.crashes`) starts from the files a phase of
:mod:`tests.support.scenarios` starts from (a snapshot-file cluster saved after every change, a
SQLite store file), forks a child doing that phase's work, and SIGKILLs it at a random API call,
before or after the request reaches the cluster; a second fresh process then drives the rest of the
scenario without faults. Checked at every phase end: 0 orphans, 0 modules stuck without a real
blocker, 0 user objects lost, the same objects as the fault-free run; and no operation that ended
"succeeded" left anything. ``bench/crash_bench.py`` runs 240 trials (also with kills after random
delays).

The files live in /dev/shm when there is one: SQLite's fsyncs on a loaded disk would make each
trial ten times slower, and a SIGKILL (unlike a power cut) does not care where the page cache
goes.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from reconciler.cluster.memory import InMemoryCluster
from reconciler.cluster.snapshot import SnapshotFileCluster, load_snapshot
from tests.support.crashes import Start, crash_summary, plan_trials, prepare, trial
from tests.support.scenarios import (
    PHASES,
    Clock,
    Phase,
    Reference,
    memory_store,
    new_world,
    run_phases,
    scenario_repo,
)

TRIALS = 36  # 6 per phase


@pytest.fixture(scope="module")
def folder() -> Iterator[Path]:
    shm = Path("/dev/shm")
    where = tempfile.mkdtemp(prefix="reconciler-crash-", dir=shm if shm.is_dir() else None)
    yield Path(where)
    shutil.rmtree(where, ignore_errors=True)


@pytest.fixture(scope="module")
def reference() -> Reference:
    world = new_world(InMemoryCluster(), memory_store(), Clock(), 0)
    outcome, states = run_phases(world, PHASES)
    assert outcome.problems == []
    return states


@pytest.fixture(scope="module")
def starts(folder: Path) -> list[Start]:
    return prepare(folder / "phases", PHASES)


def test_sigkills_at_random_api_calls_converge_to_the_fault_free_result(
    folder: Path, starts: list[Start], reference: Reference
) -> None:
    """Slow by nature (about 5 s, more on a loaded machine): 36 forked children, each SIGKILLed
    and followed by a fresh process on the same files; the 240-trial run is the benchmark."""
    results = [
        trial(
            point["start"],
            PHASES,
            folder / f"trial-{number}",
            reference,
            kill_at=point["kill_at"],
            position=point["position"],
        )
        for number, point in enumerate(plan_trials(starts, TRIALS, seed=10))
    ]

    report = crash_summary(results)
    print(report)
    assert all(r.killed for r in results), report  # every child died by SIGKILL mid-phase
    assert all(not r.problems for r in results), report
    assert {r.phase for r in results} == {p.name for p in PHASES}


def test_a_provision_killed_then_the_runtime_leaving_git_deletes_everything(
    folder: Path, starts: list[Start]
) -> None:
    gone = Phase("deprovisioned", scenario_repo(None, {}), PHASES[-1].goal)
    install = starts[0]
    results = [
        trial(
            install,
            PHASES,
            folder / f"gone-{kill_at}",
            None,
            kill_at=kill_at,
            position="before",  # a call that raises (a missing kind) has no "after"
            then=(gone,),
        )
        for kill_at in (5, install.calls // 2, install.calls - 1)
    ]

    assert all(r.killed for r in results), [(r.killed, r.problems) for r in results]
    assert [p for r in results for p in r.problems] == []


@pytest.mark.parametrize("moment", ["write_text", "replace"])
def test_the_snapshot_file_is_whole_when_its_writer_is_killed_mid_save(
    folder: Path, moment: str
) -> None:
    """SIGKILL a process in the middle of saving its snapshot file (half of the text written,
    or all of it but not yet renamed): the file still loads, exactly as it was before."""
    path = folder / f"atomic-{moment}" / "cluster.yaml"
    path.parent.mkdir()
    before = InMemoryCluster()
    before.apply(_namespace(), field_manager="t")
    for number in range(20):
        before.apply(_config_map(f"old-{number}"), field_manager="t")
    path.write_text(yaml.safe_dump_all(before.snapshot()), encoding="utf-8")

    assert _killed_while_saving(path, moment)

    after = load_snapshot(path)
    assert sorted(o["metadata"]["name"] for o in after.objects()) == sorted(
        o["metadata"]["name"] for o in before.objects()
    )


def _namespace() -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "big"}}


def _config_map(name: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "big"},
        "data": {"v": "x" * 100},
    }


def _killed_while_saving(path: Path, moment: str) -> bool:
    """A child applies one ConfigMap to the snapshot-file cluster of ``path``; its save stops at
    ``moment`` (``write_text``: after half of the text; ``replace``: before the rename) and the
    parent SIGKILLs it there. Whether it was killed at that moment."""
    ready_r, ready_w = os.pipe()
    hold_r, hold_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ready_r)
        os.close(hold_w)

        def stop() -> None:
            os.write(ready_w, b"k")
            os.read(hold_r, 1)  # until the SIGKILL

        def half_written(self: Path, data: str, encoding: str | None = None) -> int:
            with self.open("w", encoding=encoding) as out:
                out.write(data[: len(data) // 2])
            stop()
            return 0

        def before_rename(self: Path, target: Path) -> Path:
            stop()
            return target

        try:
            cluster = SnapshotFileCluster(path)
            if moment == "write_text":
                Path.write_text = half_written  # type: ignore[assignment,method-assign]
            else:
                Path.replace = before_rename  # type: ignore[assignment,method-assign]
            cluster.apply(_config_map("new"), field_manager="t")
            cluster.flush()
        finally:
            os._exit(0)
    os.close(ready_w)
    os.close(hold_r)
    reached = os.read(ready_r, 1) == b"k"
    if reached:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    os.close(ready_r)
    os.close(hold_w)
    return reached and os.WIFSIGNALED(status)
