"""The daemon survives a runtime whose reconcile fails in a way nobody planned for: the failure is
logged with the runtime and operation, shown in ``/status`` and counted in the metrics, and the
other runtimes go on."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.model import ClusterAccess
from reconciler.daemon.service import Daemon
from reconciler.errors import AccessError
from reconciler.operations.model import Suspension
from reconciler.operations.store import SqliteStore
from reconciler.source.git import RemoteSource
from tests.support.daemons import WIDGET, Fleet, GitServer, poll_and_reconcile


def test_an_unexpected_failure_of_one_runtime_is_reported_and_the_others_go_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    Fleet(tmp_path)
    server = GitServer(tmp_path)
    server.start()
    clusters: dict[str, InMemoryCluster] = {}

    def connect(access: ClusterAccess, name: str) -> InMemoryCluster:
        if name == "a":
            raise RuntimeError("a bug in a plugin")
        return clusters.setdefault(name, InMemoryCluster())

    source = RemoteSource(server.url, "main", "fleet", tmp_path / "cache")
    daemon = Daemon(source, SqliteStore(tmp_path / "state.db"), connect, lambda: datetime.now(UTC))
    try:
        assert poll_and_reconcile(daemon)
    finally:
        daemon.close()
        server.stop()

    status = {r["runtime"]: r for r in daemon.status()["runtimes"]}
    assert status["a"]["error"].startswith(
        "internal error: RuntimeError: a bug in a plugin (at reconciler/"
    )  # inside a step (Resolve_Kubeconfig): the crash barrier fails the operation only
    assert (status["a"]["state"], status["a"]["reason"]) == ("Error", "InternalError")
    assert clusters["b"].get(WIDGET) is not None
    assert clusters["c"].get(WIDGET) is not None
    logged = [r for r in caplog.records if r.levelname == "ERROR" and "a bug" in r.getMessage()]
    assert logged
    assert getattr(logged[0], "runtime", None) == "a"
    assert getattr(logged[0], "operation", "")  # the operation it happened in
    metrics = daemon.metrics.exposition().decode()
    assert _counted('reconciler_reconcile_failures_total{error="RuntimeError"}', metrics)


def test_a_failed_operation_is_error_in_status_and_metrics_and_counted(tmp_path: Path) -> None:
    """The rule of ``reconciler status`` in ``/status`` and the metrics alike."""
    Fleet(tmp_path)
    server = GitServer(tmp_path)
    server.start()
    clusters: dict[str, InMemoryCluster] = {}

    def connect(access: ClusterAccess, name: str) -> InMemoryCluster:
        if name == "a":
            raise AccessError("runtime a: no kubeconfig file a.yaml in /etc/kubeconfigs")
        return clusters.setdefault(name, InMemoryCluster())

    store = SqliteStore(tmp_path / "state.db")
    store.suspend(Suspension("c", datetime.now(UTC), "incident 9"))
    source = RemoteSource(server.url, "main", "fleet", tmp_path / "cache")
    daemon = Daemon(source, store, connect, lambda: datetime.now(UTC))
    try:
        assert poll_and_reconcile(daemon)
    finally:
        daemon.close()
        server.stop()

    status = {r["runtime"]: r for r in daemon.status()["runtimes"]}
    assert (status["a"]["state"], status["a"]["reason"]) == ("Error", "ClusterAccessFailed")
    assert "no kubeconfig file" in status["a"]["message"]
    assert (status["c"]["state"], status["c"]["suspended"]) == ("Suspended", True)
    metrics = daemon.metrics.exposition().decode()
    assert 'reconciler_runtime_state{runtime="a",state="Error"} 1.0' in metrics
    assert 'reconciler_runtime_state{runtime="b",state="Ready"} 1.0' in metrics
    assert 'reconciler_runtime_state{runtime="c",state="Suspended"} 1.0' in metrics
    assert 'reconciler_runtime_suspended{runtime="c"} 1.0' in metrics
    assert 'reconciler_runtime_suspended{runtime="b"}' not in metrics
    assert _counted('reconciler_reconcile_failures_total{error="AccessError"}', metrics)
    assert _counted('reconciler_operations_total{result="failed",type="provision"}', metrics)


def _counted(series: str, metrics: str) -> bool:
    """Whether ``series`` was counted: once per failed run, and the poll's run of a changed
    runtime may end before ``reconcile_all`` submits it again (a second failed run, counted)."""
    return re.search(rf"^{re.escape(series)} [1-9][0-9]*\.0$", metrics, re.MULTILINE) is not None
