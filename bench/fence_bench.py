"""Fencing benchmark (issue 23): pause trials of a daemon replica, and the residual window.

Runs ``--trials`` pause trials of tests/support/fence_trials.py round-robin over the pause points
``save`` (right before an operation save's statement, its fence check passed), ``flush`` (right
before a snapshot file's save of writes the fence let through before) and ``external`` (SIGSTOP
from outside after a random delay once the operation runs, as the finding's trials did), on a
SQLite file and, with ``--postgres URL`` (or RECONCILER_TEST_POSTGRES), on PostgreSQL in turns.
In each, member A is stopped, member B takes the runtime over and finishes it, A is resumed;
the spy counts A's writes that landed after B had fenced A's epoch (to the store, to the
snapshot file) and A's refused ones.

Then it measures the residual window of cluster writes: the time from the fence check of
:class:`~reconciler.daemon.membership.FencedCluster` to the API server receiving the request,
through the real Kubernetes adapter and client against a local HTTP server (same host, one
monotonic clock), at the default client rate and with every request waiting for the rate
limiter.

    python bench/fence_bench.py --trials 50

Exit status 0 when no write of a fenced replica landed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reconciler.cluster.kube import KubeCluster, connect  # noqa: E402
from reconciler.core.model import ClientRate, ClusterAccess  # noqa: E402
from reconciler.daemon.membership import FencedCluster  # noqa: E402
from tests.support.fence_trials import (  # noqa: E402
    Findings,
    Trial,
    install_plugin,
    make_remote,
    new_state_url,
)
from tests.support.http_fakes import Answer, JsonServer, discovery, write_kubeconfig  # noqa: E402

POINTS = ("save", "flush", "external")
NAMESPACES = [{"name": "namespaces", "kind": "Namespace", "namespaced": False, "verbs": ["*"]}]


def run_trials(count: int, postgres: str, folder: Path) -> list[tuple[str, Findings]]:
    """``count`` pause trials, round-robin over the points (and the stores)."""
    remote, plugins = make_remote(folder), install_plugin(folder)
    stores = ["sqlite", "postgresql"] if postgres else ["sqlite"]
    found: list[tuple[str, Findings]] = []
    for index in range(count):
        point, store = POINTS[index % len(POINTS)], stores[(index // len(POINTS)) % len(stores)]
        trial_folder = folder / f"trial-{index}"
        trial_folder.mkdir()
        url = new_state_url(trial_folder, postgres if store == "postgresql" else "")
        findings = Trial(trial_folder, remote, plugins, url, point, seed=index).run()
        found.append((store, findings))
        print(f"trial {index:2d} {store:10s} {point:8s} {_line(findings)}", flush=True)
    return found


def _line(findings: Findings) -> str:
    outcome = findings.outcome
    held = "" if outcome is None else f"held write: {outcome.get('error') or 'WRITTEN'}; "
    return (
        f"{held}fenced writes landed: store {len(findings.fenced_store_writes)}, "
        f"file {len(findings.fenced_file_writes)}; refused after the fence: "
        f"{len(findings.refused)}; kept: store {findings.store_kept}, file {findings.file_kept}"
    )


def summary(found: list[tuple[str, Findings]]) -> bool:
    """Print the table of the trials; whether no fenced write landed."""
    print(
        "\n| store | point | trials | fenced writes landed (store) | (file) "
        "| new owner's work overwritten | refused |"
    )
    print("|---|---|---|---|---|---|---|")
    rows: dict[tuple[str, str], list[Findings]] = {}
    for store, findings in found:
        rows.setdefault((store, findings.point), []).append(findings)
    clean = True
    for (store, point), group in sorted(rows.items()):
        store_writes = sum(len(f.fenced_store_writes) for f in group)
        file_writes = sum(len(f.fenced_file_writes) for f in group)
        lost = sum(1 for f in group if not (f.store_kept and f.file_kept))
        clean = clean and store_writes == 0 and file_writes == 0 and lost == 0
        refusals = Counter(r.split(": ")[1] for f in group for r in f.refused)
        told = ", ".join(f"{n} {kind}" for kind, n in sorted(refusals.items())) or "0"
        print(
            f"| {store} | {point} | {len(group)} | {store_writes} | {file_writes} | {lost} "
            f"| {told} |"
        )
    return clean


def measure_window(folder: Path, requests: int, rate: ClientRate) -> list[float]:
    """Seconds from each write's fence check to the server receiving it."""
    received: list[float] = []

    def route(method: str, path: str, body: dict[str, Any]) -> Answer:
        if method == "PATCH":
            received.append(time.monotonic())
            return 200, {**body, "metadata": {**body.get("metadata", {}), "uid": "u"}}
        return discovery(path, {"v1": NAMESPACES}) or (404, {"kind": "Status", "code": 404})

    server = JsonServer(route)
    checked: list[float] = []
    lock = threading.Lock()

    def fence() -> str | None:
        with lock:
            checked.append(time.monotonic())
        return None

    try:
        write_kubeconfig(folder, server.url)
        kube = connect(
            ClusterAccess(kubeconfig_file="k"),
            name=f"window-{rate.qps}-{rate.burst}",
            kubeconfig_dir=folder,
            rate=rate,
        )
        assert isinstance(kube, KubeCluster)
        cluster = FencedCluster(kube, fence)
        for index in range(requests):
            body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"n{index}"}}
            cluster.apply(body, field_manager="fence-bench")
    finally:
        server.close()
    return [got - check for check, got in zip(checked, received, strict=True)]


def describe(window: list[float]) -> str:
    """p50, p99 and max, in milliseconds."""
    ordered = sorted(window)
    p99 = ordered[max(0, int(len(ordered) * 0.99) - 1)]
    return (
        f"p50 {statistics.median(ordered) * 1000:.2f} ms, p99 {p99 * 1000:.2f} ms, "
        f"max {ordered[-1] * 1000:.2f} ms ({len(ordered)} writes)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--postgres", default=os.environ.get("RECONCILER_TEST_POSTGRES", ""))
    parser.add_argument("--requests", type=int, default=300)
    arguments = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fence-bench-") as temporary:
        folder = Path(temporary)
        found = run_trials(arguments.trials, arguments.postgres, folder / "trials")
        clean = summary(found)
        print(f"\n{len(found)} trials in {time.monotonic() - started:.0f} s")
        for label, rate in (
            ("default rate (50/s, burst 300)", ClientRate()),
            ("rate-limited (50/s, burst 1)", ClientRate(qps=50.0, burst=1)),
        ):
            window_folder = folder / f"window-{rate.burst}"
            window_folder.mkdir()
            window = measure_window(window_folder, arguments.requests, rate)
            print(f"residual window, {label}: {describe(window)}")
    print("no write of a fenced replica landed" if clean else "A FENCED WRITE LANDED")
    return 0 if clean else 1


if __name__ == "__main__":
    raise SystemExit(main())
