"""The daemon survives a runtime whose reconcile fails in a way nobody planned for (issue 11):
the failure is logged with the runtime and operation, shown in ``/status`` and counted in the
metrics, and the other runtimes go on."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.model import ClusterAccess
from reconciler.daemon.service import Daemon
from reconciler.operations.store import SqliteStore
from reconciler.source.git import RemoteSource
from tests.test_daemon import WIDGET, Fleet, GitServer, _poll


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
        assert _poll(daemon)
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
    assert 'reconciler_reconcile_failures_total{error="RuntimeError"} 1.0' in metrics
