"""Fault benchmark: the scenario of tests/support/scenarios.py under injected API faults, many
seeds.

For each fault rate, ``--seeds`` runs of the six phases (install, upgrade, removal blocked and
finished, deprovision blocked and finished) through a seeded FaultyCluster (429s, 5xx, timeouts,
lost responses), up to ``--faulty-rounds`` rounds per phase with faults, then without faults
until each phase's goal holds; every phase end is checked and compared with the fault-free run.

    python bench/fault_bench.py --seeds 1000 --rates 0.02 0.08 0.2

Exit status 0 when every seed converged to the fault-free result with no problem.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reconciler.cluster.memory import InMemoryCluster  # noqa: E402
from tests.support.scenarios import (  # noqa: E402
    PHASES,
    Clock,
    fault_summary,
    memory_store,
    new_world,
    run_phases,
    run_seeds,
)


def main() -> int:
    """Run every rate and print the counts."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=1000)
    parser.add_argument("--rates", type=float, nargs="+", default=[0.08])
    parser.add_argument("--faulty-rounds", type=int, default=30)
    parser.add_argument("--calm-rounds", type=int, default=25)
    options = parser.parse_args()

    world = new_world(InMemoryCluster(), memory_store(), Clock(), 0)
    _, reference = run_phases(world, PHASES)
    clean = True
    for rate in options.rates:
        began = time.perf_counter()
        outcomes = run_seeds(
            range(options.seeds),
            PHASES,
            reference,
            rate,
            options.faulty_rounds,
            options.calm_rounds,
        )
        print(f"-- rate {rate:.0%}, {time.perf_counter() - began:.1f} s")
        print(fault_summary(outcomes, len(PHASES), rate))
        clean = clean and all(not o.problems for o in outcomes)
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
