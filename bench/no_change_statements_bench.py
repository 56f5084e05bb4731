"""What a no-change sync costs the state store (issue 43): SQL statements per runtime (an
``sqlite3`` trace callback on every connection) and the process's CPU time, for a sync of a
generated fleet on snapshot clusters that a first sync provisioned, in this process.

    python bench/no_change_statements_bench.py --runtimes 200 [--workdir bench/out]

Runs on whichever ``reconciler`` is imported (a checkout of another commit measures that one).
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import time
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from reconciler.cli import cli
from tests.support.fleet_generator import generate_fleet

ROOT = Path(__file__).resolve().parent.parent
STATEMENTS = [0]
_connect = sqlite3.connect


def _counted(*args: Any, **kwargs: Any) -> sqlite3.Connection:
    connection: sqlite3.Connection = _connect(*args, **kwargs)
    connection.set_trace_callback(lambda _sql: STATEMENTS.__setitem__(0, STATEMENTS[0] + 1))
    return connection


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtimes", type=int, default=200)
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench" / "out")
    args = parser.parse_args()
    count = args.runtimes
    clusters = args.workdir / f"statements-clusters-{count}"
    shutil.rmtree(clusters, ignore_errors=True)
    clusters.mkdir(parents=True)
    fleet = args.workdir / f"statements-fleet-{count}"
    generate_fleet(fleet, runtimes=count)
    command = ["sync", str(fleet), "--snapshot", f"{clusters}/", "--snapshot-create"]
    first = CliRunner().invoke(cli, command, catch_exceptions=False)
    assert first.exit_code == 0, first.output
    sqlite3.connect = _counted  # type: ignore[assignment]
    start = time.process_time()
    again = CliRunner().invoke(cli, command, catch_exceptions=False)
    cpu = time.process_time() - start
    assert again.exit_code == 0, again.output
    print(f"no-change sync of {count} runtimes: {STATEMENTS[0] / count:.1f}")
    print(f"  SQL statements per runtime, {cpu / count * 1000:.1f} ms CPU per runtime")


if __name__ == "__main__":
    main()
