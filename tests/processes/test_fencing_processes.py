"""Fencing holds at the write, with real processes: a ``reconciler daemon`` stopped (SIGSTOP) right
before a write whose fence check had passed, taken over by a second daemon while stopped, and
resumed (SIGCONT) once the store shows the other's operation finished: the write is refused and the
store and the snapshot file keep the new owner's work. On a SQLite file always, and on PostgreSQL
when RECONCILER_TEST_POSTGRES is set (``bash tests/pg_server.sh pytest
tests/processes/test_fencing_processes.py``). The pause points and the spy are in
:mod:`tests.support.fence_trials`; bench/fence_bench.py runs 50 such trials."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.fence_trials import Trial, install_plugin, make_remote, new_state_url

POSTGRES = os.environ.get("RECONCILER_TEST_POSTGRES", "")


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The fleet's git remote and the plugin, made once."""
    folder = tmp_path_factory.mktemp("fence")
    return make_remote(folder), install_plugin(folder)


def _stores() -> list[str]:
    return ["sqlite", "postgresql"] if POSTGRES else ["sqlite"]


@pytest.mark.parametrize("store", _stores())
@pytest.mark.parametrize(
    ("point", "refusal"),
    [("save", "LostOwnershipError"), ("flush", "FencedError")],
)
def test_a_replica_paused_before_a_write_writes_nothing_once_taken_over(
    prepared: tuple[Path, Path], tmp_path: Path, store: str, point: str, refusal: str
) -> None:
    remote, plugins = prepared
    url = new_state_url(tmp_path, POSTGRES if store == "postgresql" else "")
    trial = Trial(tmp_path, remote, plugins, url, point)

    findings = trial.run()

    assert findings.outcome is not None
    assert (findings.outcome["written"], findings.outcome.get("error")) == (False, refusal)
    assert findings.store_kept  # the new owner's finished operation, as it left it
    assert findings.file_kept  # the new owner's snapshot file, as it left it
    assert findings.fenced_store_writes == []
    assert findings.fenced_file_writes == []
