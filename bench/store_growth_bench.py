"""State store growth benchmark: a day of resyncs without drift of a 1,000-runtime fleet.

One real operation makes the template: the sample repo's ``dev-sandbox`` (six modules) is
provisioned on an in-memory cluster, then resynced once through the engine, which records an
``update`` that changed nothing, as the daemon does on every resync. The bench then saves that
operation again for every runtime and every resync of the simulated day (new ids, runtimes and
times; the same stages, steps and data), on a real SQLite store file, pruning it every hour as
the daemon's pruning job does, and prints the file's size after each hour.
``--before`` records as before issue 24 (every object's ``unchanged`` entry kept, nothing ever
pruned), for the comparison.

    python bench/store_growth_bench.py --runtimes 1000 --hours 24
    python bench/store_growth_bench.py --runtimes 1000 --hours 2 --before
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reconciler.cli.loading import load_valid_repo  # noqa: E402
from reconciler.cli.options import DEFAULT_MAX_FILE_SIZE, RepoInput  # noqa: E402
from reconciler.cluster.memory import InMemoryCluster  # noqa: E402
from reconciler.daemon.pruning import PRUNE_EVERY  # noqa: E402
from reconciler.operations.engine import Engine  # noqa: E402
from reconciler.operations.model import Operation, OperationData, Retention  # noqa: E402
from reconciler.operations.runner import Runner  # noqa: E402
from reconciler.operations.store import SqliteStore  # noqa: E402

START = datetime(2026, 11, 18, 0, 0, tzinfo=UTC)
RUNTIME = "dev-sandbox"


def template(before: bool) -> tuple[Operation, Operation]:
    """A real provision of ``dev-sandbox`` and a real no-change resync of it, as the engine
    records them."""
    if before:  # as before issue 24: the unchanged objects kept
        OperationData.compacted = lambda self: self  # type: ignore[method-assign]
    config = load_valid_repo(RepoInput(ROOT / "sample-repo", None, DEFAULT_MAX_FILE_SIZE))
    clock = iter(START + timedelta(seconds=i) for i in range(10_000))
    now = lambda: next(clock)  # noqa: E731
    with tempfile.TemporaryDirectory() as folder:
        store = SqliteStore(Path(folder) / "template.db")
        cluster = InMemoryCluster()
        runner = Runner(store, Engine(store, clock=now), config, lambda a, n: cluster, now)
        provision = runner.run(runner.operation_for(RUNTIME)).operation
        return provision, runner.run(runner.operation_for(RUNTIME)).operation


def simulate(args: argparse.Namespace, path: Path) -> list[tuple[int, int, int]]:
    """(hour, operations kept, file bytes) after each simulated hour."""
    provision, operation = template(args.before)
    store = SqliteStore(path)
    for index in range(args.runtimes):
        name = f"rt-{index:05d}"
        store.save(replace(provision, id=f"p{index:06d}", runtime=name, created=START))
    retention = Retention(args.keep)
    resync = timedelta(minutes=args.resync_minutes)
    per_hour = int(PRUNE_EVERY / resync)
    hours: list[tuple[int, int, int]] = []
    moment = START
    for hour in range(1, args.hours + 1):
        for _ in range(per_hour):
            moment += resync
            for index in range(args.runtimes):
                copy = replace(operation, id=f"{hour:04d}{moment:%H%M}{index:06d}")
                store.save(replace(copy, runtime=f"rt-{index:05d}", created=moment))
        if not args.before:
            store.prune(retention, moment)
        count = store.query("SELECT count(*) AS n FROM operations")[0]["n"]
        store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        hours.append((hour, int(count), path.stat().st_size))
        print(f"hour {hour:2d}: {count:7d} operations, {path.stat().st_size / 1e6:8.1f} MB")
    return hours


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtimes", type=int, default=1000)
    parser.add_argument("--hours", type=int, default=24)
    parser.add_argument("--resync-minutes", type=int, default=10, help="the daemon's default")
    parser.add_argument("--keep", type=int, default=Retention().keep_per_runtime)
    parser.add_argument("--before", action="store_true", help="no compaction, no pruning")
    args = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as folder:
        hours = simulate(args, Path(folder) / "state.db")
    last = hours[-1]
    first = hours[0]
    print(
        f"{args.runtimes} runtimes, resync every {args.resync_minutes} min, {args.hours} h: "
        f"{last[1]} operations, {last[2] / 1e6:.1f} MB (after hour 1: {first[2] / 1e6:.1f} MB); "
        f"{time.monotonic() - started:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
