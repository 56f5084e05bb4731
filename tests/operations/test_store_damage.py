"""A damaged SQLite state store: truncated, garbage, of a newer schema, lacking tables, or damaged
in a page read only later. Every command and the daemon say so in one line naming the file and what
to do, exit 2, and the daemon never starts on it."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.operations.model import (
    Operation,
    OperationState,
    OperationType,
    StageRecord,
    StepRecord,
)
from reconciler.operations.store import SqliteStore
from tests.support.daemons import Fleet, free_port


def _store(path: Path, operations: int = 0) -> Path:
    store = SqliteStore(path)
    created = datetime(2026, 11, 1, tzinfo=UTC)
    for number in range(operations):
        step = StepRecord("Plan_Changes", message="x" * 2000)
        store.save(
            Operation(
                id=f"op{number:010d}",
                runtime=f"rt-{number:04d}",
                type=OperationType.PROVISION,
                state=OperationState.SUCCEEDED,
                created=created,
                deadline=created + timedelta(hours=3),
                stages=[StageRecord("plan", [step])],
            )
        )
    store.close()
    return path


def _truncated(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _garbage(path: Path) -> None:
    path.write_bytes(os.urandom(20_000))


def _newer(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO schema_version VALUES (99)")


def _no_table(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE members")


def _bad_page(path: Path) -> None:
    """A page in the middle overwritten: the file opens, a later read fails."""
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = int(db.execute("PRAGMA page_size").fetchone()[0])
    data = bytearray(path.read_bytes())
    middle = (len(data) // page // 2) * page
    data[middle : middle + page] = os.urandom(page)
    path.write_bytes(bytes(data))


DAMAGES: dict[str, Callable[[Path], None]] = {
    "truncated": _truncated,
    "garbage": _garbage,
    "newer schema": _newer,
    "a table missing": _no_table,
    "a damaged page": _bad_page,
}


@pytest.fixture(params=sorted(DAMAGES))
def damaged(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    path = _store(tmp_path / "state.db", operations=200)
    DAMAGES[request.param](path)
    return path


def _one_line_naming(output: str, path: Path) -> None:
    lines = [line for line in output.splitlines() if line.strip()]
    assert "Traceback" not in output, output
    assert "internal error" not in output, output
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1, output
    assert str(path) in errors[0]
    assert "schema version 99" in errors[0] or "not a usable reconciler state store" in errors[0]


#: A command reads only the pages its query needs, so a damaged page elsewhere goes unseen by it
#: (the daemon checks every page at start: the test below).
READ_AT_OPEN = sorted(name for name in DAMAGES if name != "a damaged page")


@pytest.mark.parametrize("damage", READ_AT_OPEN)
def test_a_command_on_a_damaged_store_says_which_file_and_what_to_do(
    damage: str, tmp_path: Path
) -> None:
    damaged = _store(tmp_path / "state.db", operations=200)
    DAMAGES[damage](damaged)

    result = CliRunner().invoke(cli, ["get", "operations", "--state", f"sqlite:///{damaged}"])
    assert result.exit_code == 2, result.output
    _one_line_naming(result.output, damaged)


def test_the_daemon_refuses_to_start_on_a_damaged_store(damaged: Path, tmp_path: Path) -> None:
    Fleet(tmp_path)
    command = [sys.executable, "-m", "reconciler", "daemon", "--repo", str(tmp_path / "remote.git")]
    command += ["--path", "fleet", "--listen", f"127.0.0.1:{free_port()}"]
    command += ["--state", f"sqlite:///{damaged}", "--snapshot", f"{tmp_path / 'clusters'}/"]
    command += ["--snapshot-create"]
    env = {**os.environ, "HOME": str(tmp_path)}
    finished = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert finished.returncode == 2, finished.stderr
    _one_line_naming(finished.stderr, damaged)
