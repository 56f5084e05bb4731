"""Pruning by hand: ``reconciler operations prune`` removes what the daemon's pruning job would
(the same retention flags and defaults), ``--dry-run`` lists it by runtime without removing
anything, and a big store tells its progress. Against SQLite always, a real PostgreSQL server
when RECONCILER_TEST_POSTGRES is set (see conftest.py); a real state store file or database,
the real command line. Times are fixed values, never the wall clock."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.cli.daemon import daemon
from reconciler.cli.operations import operations_prune
from reconciler.cli.options import Duration
from reconciler.operations.model import (
    NO_CHANGE,
    Operation,
    OperationState,
    OperationType,
    Retention,
    StageRecord,
    StepRecord,
    StepState,
)
from reconciler.operations.store import StateStore
from reconciler.operations.store.base import SqlBase
from tests.store_contract.conftest import Backend

T0 = datetime(2026, 11, 18, 12, 0, tzinfo=UTC)
#: Long before any run of these tests: a failure then is past every ``--keep-failures``.
LONG_AGO = datetime(2020, 1, 1, tzinfo=UTC)
OK, FAILED = OperationState.SUCCEEDED, OperationState.FAILED


def _operation(
    operation_id: str,
    runtime: str,
    created: datetime,
    state: OperationState = OK,
    message: str = NO_CHANGE,
) -> Operation:
    steps = [StepRecord("Plan_Changes", StepState.DONE, 1), StepRecord("Apply_Modules")]
    return Operation(
        id=operation_id,
        runtime=runtime,
        type=OperationType.UPDATE,
        state=state,
        created=created,
        deadline=created + timedelta(hours=3),
        stages=[StageRecord("plan", steps)],
        message=message,
    )


def _fleet(store: StateStore, base: datetime = T0) -> None:
    """Three runtimes from ``base`` on, a minute apart: ``busy`` with runs of no-change
    resyncs between changes, an old failure and one in progress; ``quiet`` with two
    operations; ``failing`` with young failures and an old one."""
    minutes = iter(range(1000))

    def at() -> datetime:
        return base + timedelta(minutes=next(minutes))

    history = [
        _operation("b00", "busy", at(), message="2 installed"),
        *(_operation(f"b{n:02d}", "busy", at()) for n in range(1, 6)),
        _operation("b06", "busy", at(), message="1 upgraded"),
        _operation("b07", "busy", LONG_AGO, FAILED, "step Apply_Modules failed: forbidden"),
        *(_operation(f"b{n:02d}", "busy", at()) for n in range(8, 12)),
        _operation("b12", "busy", at(), OperationState.IN_PROGRESS, ""),
        _operation("q00", "quiet", at(), message="1 installed"),
        _operation("q01", "quiet", at()),
        *(_operation(f"f{n:02d}", "failing", at(), FAILED, "timed out") for n in range(4)),
        _operation("f04", "failing", LONG_AGO, FAILED, "timed out"),
    ]
    for operation in history:
        store.save(operation)


def _ids(store: StateStore) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for operation in store.operations(limit=1000):
        found.setdefault(operation.runtime, set()).add(operation.id)
    return found


def _rows(store: StateStore) -> tuple[int, int, int]:
    """Rows of the operations, stages and steps tables."""
    assert isinstance(store, SqlBase)
    (counts,) = store.query(
        "SELECT (SELECT count(*) FROM operations) AS o, (SELECT count(*) FROM stages) AS s, "
        "(SELECT count(*) FROM steps) AS t"
    )
    return int(counts["o"]), int(counts["s"]), int(counts["t"])


def test_prunable_counts_by_runtime_exactly_what_prune_then_removes(backend: Backend) -> None:
    store = backend.open()
    _fleet(store)
    retention, now = Retention(3, timedelta(days=7)), T0 + timedelta(days=1)
    before = _ids(store)

    counts = store.prunable(retention, now)
    removed = store.prune(retention, now)

    after = _ids(store)
    gone = {r: len(before[r] - after.get(r, set())) for r in before}
    assert counts == {r: n for r, n in gone.items() if n}
    assert removed == sum(counts.values())
    # busy: the no-change runs merged into their newest (b01-b04, b08-b10), then beyond the
    # newest 3 (b12 in progress, b11, b06): b05, b00 and the old failure b07; failing: the young
    # failures stay, the old one goes
    assert counts == {"busy": 10, "failing": 1}
    assert after == {
        "busy": {"b12", "b11", "b06"},
        "quiet": {"q00", "q01"},
        "failing": {"f00", "f01", "f02", "f03"},
    }
    assert _rows(store) == (9, 9, 18)  # their stages and steps went with them
    assert store.prunable(retention, now) == {}


def test_prune_tells_its_progress_after_each_batch(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = backend.open()
    _fleet(store)
    monkeypatch.setattr("reconciler.operations.store.operations.PRUNE_BATCH", 4)
    told: list[int] = []

    removed = store.prune(Retention(1, timedelta(days=7)), T0 + timedelta(days=1), told.append)

    assert removed == 14
    assert told == [4, 7, 11, 14]  # a transaction each: 7 merged, then 7 expired
    assert store.prunable(Retention(1, timedelta(days=7)), T0 + timedelta(days=1)) == {}


def _recent_fleet(backend: Backend) -> None:
    """:func:`_fleet` from a day ago: its young failures are younger than ``--keep-failures``'s
    default (the command prunes at the time it runs)."""
    _fleet(backend.open(), datetime.now(UTC) - timedelta(days=1))


def _prune(backend: Backend, *args: str, env: dict[str, str] | None = None) -> tuple[str, str]:
    environment = {"RECONCILER_STATE": backend.url, **(env or {})}  # a password: never argv
    result = CliRunner().invoke(cli, ["operations", "prune", *args], env=environment)
    assert result.exit_code == 0, result.output
    return result.stdout, result.stderr


def test_dry_run_lists_operations_per_runtime_and_the_total_and_removes_nothing(
    backend: Backend,
) -> None:
    _recent_fleet(backend)
    before = _ids(backend.open())

    out, _ = _prune(backend, "--dry-run", "--keep-operations", "3")

    assert out.splitlines() == [
        "RUNTIME  OPERATIONS",
        "busy     10",
        "failing  1",
        "would prune 11 operations of 2 runtimes (keeping the newest 3 per runtime, failures "
        "for 168h); nothing removed (--dry-run)",
    ]
    assert _ids(backend.open()) == before


def test_prune_removes_what_the_retention_flags_do_not_keep(backend: Backend) -> None:
    _recent_fleet(backend)

    out, _ = _prune(backend, "--keep-operations", "1", "--keep-failures", "1h")

    assert out == "pruned 17 operations (keeping the newest 1 per runtime, failures for 1h)\n"
    assert _ids(backend.open()) == {"busy": {"b12"}, "quiet": {"q01"}, "failing": {"f03"}}
    again, _ = _prune(backend, "--dry-run")
    assert again.startswith("would prune 0 operations of 0 runtimes")  # no table of nothing


def test_the_flags_come_from_the_environment_as_the_daemons_do(backend: Backend) -> None:
    _recent_fleet(backend)
    env = {"RECONCILER_KEEP_OPERATIONS": "2", "RECONCILER_KEEP_FAILURES": "1h"}

    out, _ = _prune(backend, "--dry-run", env=env)

    assert "(keeping the newest 2 per runtime, failures for 1h)" in out


def test_a_big_prune_says_how_far_it_got_on_stderr(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    _recent_fleet(backend)
    monkeypatch.setattr("reconciler.operations.store.operations.PRUNE_BATCH", 2)
    monkeypatch.setattr("reconciler.cli.operations.PROGRESS_EVERY", 5)

    out, err = _prune(backend, "--keep-operations", "1")

    # batches of 2 removed 2, 4, 6, 7 (merged), then 9, 11, 13, 14: told past 5 and past 10
    assert err.splitlines() == [
        "pruning: 6 operations removed so far",
        "pruning: 11 operations removed so far",
    ]
    assert out.startswith("pruned 14 operations ")


def test_a_store_that_does_not_exist_is_not_created(tmp_path: Path) -> None:
    path = tmp_path / "none" / "state.db"

    result = CliRunner().invoke(cli, ["operations", "prune", "--state", f"sqlite:///{path}"])

    assert result.exit_code == 0
    assert result.stdout == "nothing to prune: no state store there yet\n"
    assert not path.parent.exists()


def _retention_flags(command: click.Command) -> dict[str, tuple[object, ...]]:
    return {
        str(p.name): (p.opts, p.default, p.envvar, getattr(p, "help", None), p.type.name)
        for p in command.params
        if p.name in ("keep_operations", "keep_failures")
    }


def test_prune_and_the_daemon_share_one_definition_of_the_retention_flags() -> None:
    prune = _retention_flags(operations_prune)

    assert prune == _retention_flags(daemon)
    defaults = Retention()
    assert prune["keep_operations"][1] == defaults.keep_per_runtime
    seconds = Duration().convert(prune["keep_failures"][1], None, None)
    assert seconds == defaults.keep_failures_for.total_seconds()
    listing = CliRunner().invoke(cli, ["operations", "--help"]).stdout
    assert re.search(r"^\s+prune\s+Remove the finished operations", listing, re.MULTILINE)
