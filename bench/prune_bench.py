"""Pruning by hand: ``reconciler operations prune`` on a store of 1,000 runtimes x 50 operations.

The store is a real SQLite file filled with the real operations of ``store_growth_bench``'s
template (a provision of the sample repo's ``dev-sandbox`` and a no-change resync of it, five
stages and their steps each): per runtime a provision, then resyncs a minute apart, every tenth
one an upgrade and every 25th a failure (older than a week), as a store that ``reconciler sync``
filled for a while. Then the real command runs in a process of its own, ``--dry-run`` first and
then for real, with the daemon's defaults (the newest 10 per runtime, failures for 7 days); the
bench prints each one's time and the rows of the operations, stages and steps tables before and
after.

    python bench/prune_bench.py --runtimes 1000 --operations 50
    bash tests/pg_server.sh sh -c 'python bench/prune_bench.py --state "$RECONCILER_TEST_POSTGRES"'

``--state URL`` names an empty store to fill instead of a temporary SQLite file (PostgreSQL:
the database of tests/pg_server.sh, thrown away after).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.store_growth_bench import START, template  # noqa: E402
from reconciler.operations.model import OperationState  # noqa: E402
from reconciler.operations.store import open_store  # noqa: E402
from reconciler.operations.store.base import SqlBase  # noqa: E402

TABLES = ("operations", "stages", "steps")


def fill(url: str, runtimes: int, operations: int) -> None:
    """``operations`` per runtime: a provision, then resyncs (every 10th an upgrade, every
    25th an old failure)."""
    provision, resync = template(before=False)
    store = open_store(url)
    old = START - timedelta(days=30)
    for index in range(runtimes):
        name = f"rt-{index:05d}"
        store.save(replace(provision, id=f"p{index:06d}", runtime=name, created=START))
        for n in range(1, operations):
            created = START + timedelta(minutes=n)
            copy = replace(resync, id=f"{n:03d}{index:06d}", runtime=name, created=created)
            if n % 25 == 0:
                copy = replace(copy, state=OperationState.FAILED, created=old, message="failed")
            elif n % 10 == 0:
                copy = replace(copy, message="1 upgraded")
            store.save(copy)
    _close(store)


def rows(url: str) -> dict[str, int]:
    """Rows of each table."""
    store = open_store(url)
    assert isinstance(store, SqlBase)
    try:
        return {t: int(store.query(f"SELECT count(*) AS n FROM {t}")[0]["n"]) for t in TABLES}
    finally:
        _close(store)


def _close(store: object) -> None:
    """Close a store's connection (both dialects have ``close``; the contract does not)."""
    getattr(store, "close")()  # noqa: B009 (not on the StateStore protocol)


def run_prune(url: str, *args: str) -> tuple[float, str]:
    """``reconciler operations prune ARGS`` in a process of its own: seconds and what it printed
    on stdout (its progress goes to stderr)."""
    env = {**os.environ, "RECONCILER_STATE": url}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "reconciler", "operations", "prune", *args],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return time.perf_counter() - started, done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtimes", type=int, default=1000)
    parser.add_argument("--operations", type=int, default=50, help="per runtime")
    parser.add_argument("--state", default="", help="an empty store to fill (default: SQLite)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        url = args.state or f"sqlite:///{Path(folder) / 'state.db'}"
        started = time.perf_counter()
        fill(url, args.runtimes, args.operations)
        before = rows(url)
        print(f"filled in {time.perf_counter() - started:.0f} s: {before}")
        took, output = run_prune(url, "--dry-run")
        print(f"--dry-run: {took:.2f} s; {output.splitlines()[-1]}")
        took, output = run_prune(url)
        after = rows(url)
        print(f"prune: {took:.2f} s; {output.strip().splitlines()[-1]}")
        for table in TABLES:
            gone = before[table] - after[table]
            print(f"  {table:<10} {before[table]:>8} -> {after[table]:>7} ({gone} removed)")
        removed = before["operations"] - after["operations"]
        print(f"per operation removed: {took / max(removed, 1) * 1e6:.0f} us (process included)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
