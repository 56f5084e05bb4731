"""Rollout bookkeeping against a plain sync of the same fleet (issue 29): a generated fleet of N
runtimes on in-memory clusters, synced once by the daemon (every runtime provisioned); then,
on the same store and commit, the bookkeeping of a rollout of every runtime in three waves:
planning and saving it, one gating look-up per runtime reconcile, and a rollout job tick per
wave (the released runtimes' statuses read, the rollout moved and saved), the waves moved by
``promote``. The rollout is of the commit in force with every base on it, so a look-up costs
what it costs for a released runtime or a held-back one whose base repo is in memory (a base
commit is read from git once per commit, not per runtime). Reports both times and their ratio
(target: under 5%).

    python bench/rollout_bench.py --runtimes 1000 [--latency 0.002] [--workers 16]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.fleet_setup import (  # noqa: E402
    add_fleet_arguments,
    commit_generated_fleet,
    fresh_workdir,
    start_bench_daemon,
)
from reconciler.core.model import RolloutPolicy, WavePolicy  # noqa: E402
from reconciler.core.rollout_steps import RolloutCommand  # noqa: E402
from reconciler.core.rollouts import start_rollout  # noqa: E402
from reconciler.operations.rollouts import command_rollout  # noqa: E402

POLICY = RolloutPolicy(
    (WavePolicy("canary", percent=2), WavePolicy("early", percent=10), WavePolicy("rest")),
    healthy_for=timedelta(minutes=30),
)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; the result also goes to ``<workdir>/rollout.json``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_fleet_arguments(parser, ROOT / "bench" / "out")
    args = parser.parse_args(argv)
    work = fresh_workdir(args.workdir / f"rollout-{args.runtimes}")
    fleet = work / "fleet"
    commit_generated_fleet(fleet, args.runtimes, args.modules)
    daemon = start_bench_daemon(work, fleet, args.latency, args.workers).daemon
    started = time.perf_counter()
    daemon.poll()
    daemon.reconcile_all(wait=True)
    sync = time.perf_counter() - started

    repo, head = daemon.state.repo, daemon.state.commit
    assert repo is not None
    assert head is not None
    started = time.perf_counter()
    names = sorted(repo.runtimes)
    bases = dict.fromkeys(names, head.text)
    now = datetime.now(UTC)
    made = start_rollout(
        POLICY, head.text, [repo.runtimes[n] for n in names], bases, frozenset(), now
    )
    assert made is not None
    saved = daemon.store.put_rollout(made)
    assert saved is not None
    daemon.rollouts.refresh()
    for wave in range(len(saved.waves)):
        for name in names:  # one gating look-up per runtime reconcile
            daemon.rollouts.desired(name, repo, head)
        daemon.rollouts.tick()
        if wave + 1 < len(saved.waves):
            command_rollout(daemon.store, saved.id, RolloutCommand.PROMOTE, datetime.now(UTC))
            daemon.rollouts.refresh()
    bookkeeping = time.perf_counter() - started
    daemon.wait_idle()
    daemon.close()
    result = {
        "runtimes": args.runtimes,
        "modules": args.modules,
        "latency_s": args.latency,
        "sync_s": round(sync, 3),
        "rollout_bookkeeping_s": round(bookkeeping, 3),
        "ratio": round(bookkeeping / sync, 4),
    }
    (work / "rollout.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
