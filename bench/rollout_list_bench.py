"""What a list of rollouts costs (``GET /rollouts``, ``/status``, ``reconciler rollout list``):
N rollouts of M runtimes each kept in a SQLite state store (their runtimes in every state),
and the answer of ``GET /rollouts`` (the newest 20, masked, as JSON) made from the whole
rollouts read back (every member decoded: how it was made before) and from their summaries
(no member decoded: how it is made now). Both answers must be the same bytes. Reports the
cost per request of each and their ratio.

    python bench/rollout_list_bench.py --rollouts 50 --runtimes 1000 [--repeat 20]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reconciler.core.model import ClusterAccess, RolloutPolicy, Runtime, WavePolicy  # noqa: E402
from reconciler.core.redaction import mask_all  # noqa: E402
from reconciler.core.rollouts import MemberState, start_rollout  # noqa: E402
from reconciler.operations.rollouts import rollout_document  # noqa: E402
from reconciler.operations.store import SqliteStore  # noqa: E402

POLICY = RolloutPolicy(
    (WavePolicy("canary", percent=2), WavePolicy("early", percent=10), WavePolicy("rest")),
    healthy_for=timedelta(minutes=30),
)
#: The rollouts ``GET /rollouts`` lists.
LISTED = 20


def _fill(store: SqliteStore, rollouts: int, runtimes: int) -> None:
    fleet = [Runtime(f"rt-{i:05d}", "regular", ClusterAccess(context="x")) for i in range(runtimes)]
    bases = {r.name: "b" * 40 for r in fleet}
    states = list(MemberState)
    started = datetime(2026, 11, 1, tzinfo=UTC)
    for index in range(rollouts):
        commit = f"{index:012x}" + "a" * 28  # a rollout's id: its commit's first 12
        made = start_rollout(
            POLICY, commit, fleet, bases, frozenset(), started + timedelta(hours=index)
        )
        assert made is not None
        members = tuple(
            replace(m, state=states[(i + index) % len(states)]) for i, m in enumerate(made.members)
        )
        assert store.put_rollout(replace(made, members=members)) is not None


def _answer_whole(store: SqliteStore) -> bytes:
    items = [rollout_document(r) for r in store.rollouts(limit=LISTED)]
    return json.dumps(mask_all({"items": items})).encode()


def _answer_summaries(store: SqliteStore) -> bytes:
    items = [rollout_document(r) for r in store.rollout_summaries(limit=LISTED)]
    return json.dumps(mask_all({"items": items})).encode()


def _per_request(answer: Callable[[SqliteStore], bytes], store: SqliteStore, repeat: int) -> float:
    answer(store)  # warm: statements prepared, pages cached
    started = time.perf_counter()
    for _ in range(repeat):
        answer(store)
    return (time.perf_counter() - started) / repeat


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its result as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rollouts", type=int, default=50)
    parser.add_argument("--runtimes", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        store = SqliteStore(Path(folder) / "state.db")
        _fill(store, args.rollouts, args.runtimes)
        assert _answer_whole(store) == _answer_summaries(store), "the answers differ"
        whole = _per_request(_answer_whole, store, args.repeat)
        summaries = _per_request(_answer_summaries, store, args.repeat)
        size = len(_answer_summaries(store))
    result: dict[str, Any] = {
        "rollouts_kept": args.rollouts,
        "runtimes_each": args.runtimes,
        "listed": min(LISTED, args.rollouts),
        "answer_bytes": size,
        "whole_rollouts_ms_per_request": round(whole * 1000, 2),
        "summaries_ms_per_request": round(summaries * 1000, 2),
        "ratio": round(whole / summaries, 1),
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
