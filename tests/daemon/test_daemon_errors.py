"""What the daemon logs of an error: a module error with its real cause (its type, transient or
permanent, the delay it asked for), and a source that refuses for good as needing a fix, never as
unreachable. On the in-memory cluster with an injected fault and a fake clock."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.head import Head
from reconciler.core.model import ModuleRef
from reconciler.daemon.service import Daemon
from reconciler.errors import PermanentError, ThrottledError
from reconciler.operations.store import SqliteStore
from tests.support.lifecycle_helpers import repo
from tests.support.runs import Clock, fail_next_apply
from tests.support.sources import UnusedSource


def test_the_daemon_logs_the_real_cause_of_a_module_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cluster, clock = InMemoryCluster(), Clock()
    fail_next_apply(cluster, "widget", ThrottledError("429 Too Many Requests", retry_after=42.0))
    daemon = Daemon(UnusedSource(), SqliteStore(tmp_path / "state.db"), lambda a, n: cluster, clock)
    daemon.state.follow(Head("c0ffee" * 6 + "c0ff"), repo(ModuleRef("widget")))
    try:
        daemon.reconcile("rt")
    finally:
        daemon.close()

    logged = [r.getMessage() for r in caplog.records if "module widget" in r.getMessage()]
    assert logged == [
        "runtime rt: module widget: ThrottledError (transient, retry after 42s): "
        "429 Too Many Requests"
    ]


class _Refusing(UnusedSource):
    def check(self) -> str:
        raise PermanentError("git://127.0.0.1/remote.git: no branch or tag 'mian'")


def test_the_daemon_does_not_call_a_permanent_source_error_unreachable(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    daemon = Daemon(_Refusing(), SqliteStore(tmp_path / "state.db"), None, Clock())  # type: ignore[arg-type]
    try:
        assert not daemon.poll()
    finally:
        daemon.close()

    (record,) = [r for r in caplog.records if r.name == "reconciler.daemon"]
    assert record.levelname == "ERROR"
    assert record.getMessage() == (
        "source failed (PermanentError, permanent: needs a fix), keeping commit nothing: "
        "git://127.0.0.1/remote.git: no branch or tag 'mian'"
    )
