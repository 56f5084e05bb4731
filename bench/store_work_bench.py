"""The state store's own work in a sync of one runtime, alone: CPU seconds for N runtimes.

One real operation makes the template (a provision of ``widget`` on an in-memory cluster through
the engine). For each runtime the bench then does what a sync asks of the store: save the new
operation, claim it, save it at each step's start and end (one step row changing each time),
read the unfinished one, save it finished and record the runtime. Best and median of several
rounds, each on a new SQLite file; the operations are copied before the clock starts. Runs on
any checkout whose store offers the public ``StateStore`` calls (before and after issue 25).

    python bench/store_work_bench.py --runtimes 300 --rounds 9
"""

from __future__ import annotations

import argparse
import copy
import sys
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reconciler.cluster.memory import InMemoryCluster  # noqa: E402
from reconciler.core.model import ModuleRef  # noqa: E402
from reconciler.operations.engine import Engine  # noqa: E402
from reconciler.operations.model import (  # noqa: E402
    Operation,
    OperationState,
    RuntimeRecord,
    StepState,
)
from reconciler.operations.runner import Runner  # noqa: E402
from reconciler.operations.store import SqliteStore  # noqa: E402
from tests.support.lifecycle_helpers import repo  # noqa: E402

T0 = datetime(2026, 11, 18, 12, 0, tzinfo=UTC)


def _template(folder: Path) -> tuple[Operation, RuntimeRecord]:
    """A provision run through the engine, and the runtime record it left."""
    store = SqliteStore(folder / "template.db")
    engine = Engine(store, clock=lambda: T0, plugins=[])
    cluster = InMemoryCluster()
    runner = Runner(store, engine, repo(ModuleRef("widget")), lambda a, n: cluster, lambda: T0)
    operation = runner.run(runner.operation_for("rt")).operation
    record = store.runtime("rt")
    assert record is not None
    return operation, record


def _one_round(store: SqliteStore, operations: list[Operation], record: RuntimeRecord) -> None:
    for operation in operations:
        steps = [step for stage in operation.stages for step in stage.steps]
        for step in steps:
            step.state = StepState.PENDING
        store.save(operation)
        store.claim(operation.id, "me", T0, T0 + timedelta(minutes=5), lambda owner: True)
        operation.state, operation.owner = OperationState.IN_PROGRESS, "me"
        for step in steps:
            step.state = StepState.RUNNING
            store.save(operation)
            step.state = StepState.DONE
            store.save(operation)
        store.unfinished(operation.runtime)
        operation.state = OperationState.SUCCEEDED
        store.save(operation)
        store.put_runtime(replace(record, runtime=operation.runtime))


def _copies(template: Operation, runtimes: int, round_: int) -> list[Operation]:
    made = []
    for index in range(runtimes):
        operation = copy.deepcopy(template)
        operation.id = f"{round_:02x}{index:06x}" + "0" * 24
        operation.runtime = f"rt-{index:05d}"
        operation.state, operation.owner = OperationState.PENDING, ""
        made.append(operation)
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtimes", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="store-work-"))
    template, record = _template(folder)
    times = []
    for round_ in range(args.rounds):
        store = SqliteStore(folder / f"round-{round_}.db")
        operations = _copies(template, args.runtimes, round_)
        started = time.process_time()
        _one_round(store, operations, record)
        times.append(time.process_time() - started)
        store.close()
    times.sort()
    steps = sum(len(stage.steps) for stage in template.stages)
    print(
        f"{args.runtimes} runtimes ({steps} steps each): best {times[0]:.3f} s, "
        f"median {times[len(times) // 2]:.3f} s CPU"
    )


if __name__ == "__main__":
    main()
