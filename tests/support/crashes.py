"""SIGKILL trials of the scenario of :mod:`tests.support.scenarios`, on files, in real processes.

:func:`prepare` runs the scenario once without faults on a snapshot-file cluster
(:class:`DurableCluster`: a snapshot file saved after every change, as a real API server keeps
every write it answered) and a
SQLite store file, keeping a copy of both at the start of every phase and counting the API calls
each phase makes. :func:`trial` copies a phase's start, forks a child that does the phase's work
(Runner and Engine, as ``reconciler sync`` does) and kills it with SIGKILL: at a chosen API call
(the child stops there, before or after the call reaches the cluster, and the parent kills it;
deterministic) or after a delay (the kill lands anywhere, also in the middle of a file write).
A second child, a fresh process, then loads the files and drives the rest of the scenario to
the end without faults; its findings (the invariants of :mod:`tests.support.scenarios`, and the
comparison with the fault-free run at every phase end) come back through a pipe as JSON.
Used by tests/processes/test_crashes.py and bench/crash_bench.py.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

from reconciler.cluster.snapshot import SnapshotFileCluster
from reconciler.core.objects import ObjectRef
from reconciler.operations.store import SqliteStore
from tests.support.scenarios import (
    Clock,
    Outcome,
    Phase,
    Reference,
    World,
    drive,
    new_world,
    run_phases,
)

CLUSTER_FILE = "cluster.yaml"
STORE_FILE = "state.db"
CLOCK_FILE = "clock.txt"
#: A process that resumes after a kill starts this much later than the phase did: past every
#: round the killed process could have run, so time never goes backwards.
RESUME_AFTER_SECONDS = 3600.0
CALM_ROUNDS = 25


@dataclass(frozen=True, slots=True)
class Start:
    """Where a phase starts: a folder with the cluster, the store and the clock; and how many
    API calls the phase makes without faults."""

    phase: int
    folder: Path
    calls: int
    seconds: float


class DurableCluster(SnapshotFileCluster):
    """A snapshot file that keeps every write at once, as a real API server does (the product's
    snapshot cluster keeps them at each step's end): a kill after any call finds it there."""

    def apply(
        self,
        body: Mapping[str, Any],
        *,
        field_manager: str,
        force: bool = True,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """Apply, then save."""
        result = super().apply(body, field_manager=field_manager, force=force, dry_run=dry_run)
        self.flush()
        return result

    def patch(self, ref: ObjectRef, merge_patch: Mapping[str, Any]) -> dict[str, Any]:
        """Patch, then save."""
        result = super().patch(ref, merge_patch)
        self.flush()
        return result

    def delete(self, ref: ObjectRef, *, propagation: str = "Background") -> bool:
        """Delete, then save."""
        result = super().delete(ref, propagation=propagation)
        self.flush()
        return result


def open_world(folder: Path, seed: int = 0, later: float = 0.0) -> World:
    """A world on the files of ``folder``; its clock ``later`` seconds after the saved one."""
    now = datetime.fromisoformat((folder / CLOCK_FILE).read_text(encoding="utf-8"))
    clock = Clock(now)
    clock.advance(later)
    cluster = DurableCluster(folder / CLUSTER_FILE)
    return new_world(cluster, SqliteStore(folder / STORE_FILE), clock, seed)


def close_world(world: World, folder: Path) -> None:
    """Save the clock and close the store (its WAL is folded into the file)."""
    (folder / CLOCK_FILE).write_text(world.clock().isoformat(), encoding="utf-8")
    store = world.store
    assert isinstance(store, SqliteStore)
    store.close()


def prepare(folder: Path, phases: Sequence[Phase]) -> list[Start]:
    """Run ``phases`` without faults on files under ``folder``, each in a process of its own
    (as the trials do), keeping each phase's start."""
    work = folder / "work"
    work.mkdir(parents=True)
    (work / CLOCK_FILE).write_text(Clock()().isoformat(), encoding="utf-8")
    starts = []
    for index, phase in enumerate(phases):
        keep = folder / f"phase-{index}"
        shutil.copytree(work, keep)
        measured = _in_child(partial(_prepare_phase, work, phase))
        assert measured.get("converged"), f"{phase.name} did not converge: {measured}"
        starts.append(Start(index, keep, int(measured["calls"]), float(measured["seconds"])))
    return starts


def _prepare_phase(work: Path, phase: Phase) -> dict[str, Any]:
    world = open_world(work)
    began = time.perf_counter()
    converged = bool(drive(world, phase, 0.0, 0, CALM_ROUNDS))
    seconds = time.perf_counter() - began
    for action in phase.user:
        action.apply(world.cluster)
    close_world(world, work)
    return {"converged": converged, "calls": world.faulty.total, "seconds": seconds}


@dataclass
class TrialResult:
    """One kill and what the fresh process found after it."""

    phase: str
    kill: str
    killed: bool
    outcome: dict[str, Any] = field(default_factory=dict)

    @property
    def problems(self) -> list[str]:
        """Everything wrong after the recovery."""
        found: list[str] = self.outcome.get("problems", ["the recovering process crashed"])
        return found

    def count(self, word: str) -> int:
        """Problems whose text contains ``word``."""
        return sum(word in p for p in self.problems)


def trial(
    start: Start,
    phases: Sequence[Phase],
    work: Path,
    reference: Reference | None,
    *,
    kill_at: int = 0,
    position: str = "after",
    delay: float = 0.0,
    then: Sequence[Phase] | None = None,
) -> TrialResult:
    """Kill a child doing ``phases[start.phase]`` (at API call ``kill_at``, ``position`` its
    request, or after ``delay`` seconds), then finish ``then`` (default: the rest of
    ``phases``) in a fresh process and check."""
    shutil.copytree(start.folder, work)
    phase = phases[start.phase]
    kill = f"call {kill_at} {position}" if kill_at else f"after {delay * 1000:.0f} ms"
    killed = _killed_child(work, phase, kill_at, position, delay)
    run, first = (phases, start.phase) if then is None else (then, 0)
    outcome = _in_child(partial(_recover, work, run, first, reference))
    return TrialResult(phase.name, kill, killed, outcome)


def _killed_child(work: Path, phase: Phase, kill_at: int, position: str, delay: float) -> bool:
    """Fork a child doing ``phase`` and SIGKILL it; whether it was killed before it finished."""
    ready_r, ready_w = os.pipe()
    hold_r, hold_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(ready_r)
        os.close(hold_w)
        _child_work(work, phase, kill_at, position, ready_w, hold_r)
    os.close(ready_w)
    os.close(hold_r)
    try:
        if kill_at:
            reached = os.read(ready_r, 1) == b"k"  # empty: the child finished first
        else:
            time.sleep(delay)  # the point of this mode: a kill at an arbitrary moment
            reached = True
        if reached:
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(ready_r)
        os.close(hold_w)
    return os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL


def _child_work(
    work: Path, phase: Phase, kill_at: int, position: str, ready: int, hold: int
) -> None:
    code = 0
    try:
        world = open_world(work)

        def stop(number: int, method: str, where: str) -> None:
            if number == kill_at and where == position:
                os.write(ready, b"k")
                os.read(hold, 1)  # blocks until the parent's SIGKILL

        world.faulty.on_call = stop
        drive(world, phase, 0.0, 0, CALM_ROUNDS)
    except BaseException:
        traceback.print_exc()
        code = 1
    os._exit(code)


def _recover(
    work: Path, phases: Sequence[Phase], first: int, reference: Reference | None
) -> dict[str, Any]:
    world = open_world(work, later=RESUME_AFTER_SECONDS)
    outcome, _ = run_phases(
        world,
        phases,
        first=first,
        calm_rounds=CALM_ROUNDS,
        reference=reference,
        outcome=Outcome(0),
    )
    return {"problems": outcome.problems, "converged": outcome.converged}


def _in_child(work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run ``work`` in a forked child (a fresh process); its JSON result."""
    result_r, result_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(result_r)
        code = 0
        try:
            document = work()
        except BaseException:
            document = {"problems": [f"recovery crashed: {traceback.format_exc()}"]}
            code = 1
        with os.fdopen(result_w, "w", encoding="utf-8") as out:
            json.dump(document, out)
        os._exit(code)
    os.close(result_w)
    with os.fdopen(result_r, encoding="utf-8") as answer:
        text = answer.read()
    os.waitpid(pid, 0)
    found: dict[str, Any] = json.loads(text) if text else {}
    return found


def plan_trials(
    starts: Sequence[Start], count: int, seed: int, timed: float = 0.0
) -> list[dict[str, Any]]:
    """``count`` kill points, round-robin over the phases: a random API call of the phase and
    a side of it (its request sent or not), or, for a share ``timed`` of them, a random delay
    within the phase's duration."""
    rng = random.Random(seed)
    chosen = []
    for number in range(count):
        start = starts[number % len(starts)]
        if rng.random() < timed:
            chosen.append({"start": start, "delay": rng.uniform(0.0, start.seconds * 1.5)})
        else:
            position = rng.choice(("before", "after"))
            chosen.append(
                {"start": start, "kill_at": rng.randint(1, start.calls), "position": position}
            )
    return chosen


def crash_summary(results: Sequence[TrialResult]) -> str:
    """Counts over the trials, by phase, and the first problems."""
    by_phase: dict[str, int] = {}
    for result in results:
        by_phase[result.phase] = by_phase.get(result.phase, 0) + 1
    bad = [r for r in results if r.problems]
    lines = [
        f"trials {len(results)} ({', '.join(f'{p} {n}' for p, n in by_phase.items())}), "
        f"killed before finishing {sum(r.killed for r in results)}, "
        f"converged {sum(not r.count('did not reach') for r in results)}",
        f"orphans {sum(r.count('orphan') for r in results)}, "
        f"stuck {sum(r.count('stuck') for r in results)}, "
        f"user objects lost {sum(r.count('user object') for r in results)}, "
        f"succeeded with leftovers {sum(r.count('succeeded but left') for r in results)}, "
        f"trials differing from the fault-free run {len(bad)}",
    ]
    lines += [f"{r.phase} killed at {r.kill}: {p}" for r in bad[:10] for p in r.problems[:4]]
    return "\n".join(lines)
