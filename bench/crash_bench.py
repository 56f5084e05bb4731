"""Crash benchmark: SIGKILLs at random points of install, upgrade, removal and deprovision.

Runs the scenario of tests/support/scenarios.py once without faults on files (snapshot-file cluster,
SQLite store) to record where each phase starts, then ``--trials`` trials round-robin over the
six phases: a child process doing the phase is SIGKILLed at a random API call (before or after
its request reaches the cluster) or, for a share ``--timed`` of the trials, after a random delay
within the phase's duration (the kill may land anywhere: in a SQLite transaction, in the middle
of writing the snapshot file). A fresh process then finishes the scenario without faults; every
phase end is checked (orphans, modules stuck without a real blocker, user objects lost,
operations that succeeded with leftovers) and compared with the fault-free run.
``--left-git N`` adds N trials of a provision killed and then the runtime removed from git.

    python bench/crash_bench.py --trials 240 --timed 0.5

Exit status 0 when every trial converged with no problem (the ``--left-git`` trials are
reported apart).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reconciler.cluster.memory import InMemoryCluster  # noqa: E402
from tests.support.crashes import TrialResult, crash_summary, plan_trials, prepare, trial  # noqa: E402
from tests.support.scenarios import (  # noqa: E402
    PHASES,
    Clock,
    Phase,
    memory_store,
    new_world,
    run_phases,
    scenario_repo,
)


def main() -> int:
    """Run the trials and print the counts."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=240)
    parser.add_argument("--timed", type=float, default=0.5, help="share of kills after a delay")
    parser.add_argument("--left-git", type=int, default=0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "crash.json")
    options = parser.parse_args()

    shm = Path("/dev/shm")
    folder = Path(tempfile.mkdtemp(prefix="crash-bench-", dir=shm if shm.is_dir() else None))
    try:
        began = time.perf_counter()
        world = new_world(InMemoryCluster(), memory_store(), Clock(), 0)
        _, reference = run_phases(world, PHASES)
        starts = prepare(folder / "phases", PHASES)
        results = [
            trial(
                point["start"],
                PHASES,
                folder / f"trial-{number}",
                reference,
                kill_at=point.get("kill_at", 0),
                position=point.get("position", "after"),
                delay=point.get("delay", 0.0),
            )
            for number, point in enumerate(
                plan_trials(starts, options.trials, options.seed, options.timed)
            )
        ]
        seconds = time.perf_counter() - began
        gone = Phase("deprovisioned", scenario_repo(None, {}), PHASES[-1].goal)
        left_git = [
            trial(
                starts[0],
                PHASES,
                folder / f"gone-{number}",
                None,
                kill_at=1 + number * starts[0].calls // max(options.left_git, 1),
                then=(gone,),
            )
            for number in range(options.left_git)
        ]
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    timed = sum(r.kill.startswith("after") for r in results)
    print(f"{len(results)} trials ({timed} after a random delay) in {seconds:.1f} s")
    print(crash_summary(results))
    if left_git:
        print("\nprovision killed, then the runtime removed from git:")
        print(crash_summary(left_git))
    _save(options.out, results, left_git)
    return 0 if all(not r.problems for r in results) else 1


def _save(path: Path, results: list[TrialResult], left_git: list[TrialResult]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "trials": [
            {"phase": r.phase, "kill": r.kill, "killed": r.killed, "problems": r.problems}
            for r in results
        ],
        "leftGit": [{"kill": r.kill, "problems": r.problems} for r in left_git],
    }
    path.write_text(json.dumps(document, indent=1), encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
