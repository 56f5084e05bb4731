"""``reconciler sync`` over a generated fleet on snapshot clusters (issue 13): total time,
runtimes per second, time to the first runtime's output and the command's peak memory, for a
first sync (every runtime provisioned) and a second one (nothing changes).

    python bench/fleet_sync_bench.py --runtimes 5000 --parallel 16 [--workdir bench/out]

Each sync is a fresh ``reconciler`` process (``python -m reconciler``), as a user runs it.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tests.support.fleet_generator import generate_fleet

ROOT = Path(__file__).resolve().parent.parent


def timed_sync(fleet: Path, clusters: Path, parallel: int) -> dict[str, float]:
    """One ``reconciler sync`` run: seconds in all, seconds to the first line, and the summary."""
    command = [sys.executable, "-m", "reconciler", "sync", str(fleet), "--snapshot", f"{clusters}/"]
    command.append("--snapshot-create")
    command += ["--parallel", str(parallel), "--state", f"sqlite:///{clusters}/state.db"]
    start = time.monotonic()
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT
    )
    assert process.stdout is not None
    first = process.stdout.readline()
    first_at = time.monotonic() - start
    for _ in process.stdout:  # drain, as a terminal would
        pass
    errors = process.stderr.read() if process.stderr is not None else ""
    code = process.wait()
    total = time.monotonic() - start
    if code != 0 or not first:
        raise SystemExit(f"sync failed ({code}): {errors[-500:]}")
    summary = errors.strip().splitlines()[-1]
    print(f"  {summary}")
    return {"total": total, "first": first_at}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtimes", type=int, default=5000)
    parser.add_argument("--parallel", type=int, default=16)
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench" / "out")
    args = parser.parse_args()
    fleet = args.workdir / f"sync-fleet-{args.runtimes}"
    clusters = args.workdir / f"sync-clusters-{args.runtimes}"
    generate_fleet(fleet, runtimes=args.runtimes)
    shutil.rmtree(clusters, ignore_errors=True)
    clusters.mkdir(parents=True)
    for label in ("first sync (provision)", "second sync (no change)"):
        print(f"{label}:")
        result = timed_sync(fleet, clusters, args.parallel)
        rate = args.runtimes / result["total"]
        print(
            f"  {result['total']:.1f} s, {rate:.1f} runtimes/s, "
            f"first output after {result['first']:.2f} s"
        )
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"peak memory of one sync process: {peak:.0f} MB")


if __name__ == "__main__":
    main()
