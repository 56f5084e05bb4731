"""Text output as kubectl prints it: tables with a header row that ``--no-headers`` drops, more
columns with ``-o wide``; and a reader that goes away early (``reconciler status | head``) stops the
command quietly."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.cli.output import Column, table_lines
from reconciler.core.reasons import Reason
from reconciler.core.status import ModuleState, ModuleStatus
from reconciler.operations.model import RuntimeRecord
from reconciler.operations.store import SqliteStore
from tests.support.sample_fleet import Fleet

T0 = datetime(2026, 11, 25, 3, tzinfo=UTC)


def test_a_table_aligns_its_columns_under_a_header() -> None:
    columns = [Column("NAME"), Column("STATE"), Column("MORE", wide=True)]
    rows = [("prod-eu-1", "Ready", "x"), ("dev", "Processing", "y")]

    assert table_lines(columns, rows) == [
        "NAME       STATE",
        "prod-eu-1  Ready",
        "dev        Processing",
    ]
    assert table_lines(columns, rows, wide=True, headers=False) == [
        "prod-eu-1  Ready       x",
        "dev        Processing  y",
    ]
    assert table_lines(columns, [("short",)], wide=True) == ["NAME   STATE  MORE", "short"]


def test_operations_list_has_a_header_that_no_headers_drops_and_wide_columns(
    tmp_path: Path,
) -> None:
    fleet = Fleet(tmp_path).synced()
    runner = CliRunner()

    text = runner.invoke(cli, ["operations", "list", *fleet.state]).stdout.splitlines()
    bare = runner.invoke(cli, ["operations", "list", "--no-headers", *fleet.state]).stdout
    wide = runner.invoke(cli, ["operations", "list", "-o", "wide", *fleet.state]).stdout

    assert text[0].split() == ["ID", "RUNTIME", "TYPE", "STATE", "CREATED", "MESSAGE"]
    assert len(text) == 7  # the header and six operations
    assert bare.splitlines() == text[1:]
    assert wide.splitlines()[0].split()[-2:] == ["COMMIT", "DEADLINE"]


def test_status_has_a_header_and_wide_columns(tmp_path: Path) -> None:
    fleet = Fleet(tmp_path).synced()

    text = CliRunner().invoke(cli, ["status", *fleet.state]).stdout.splitlines()
    wide = CliRunner().invoke(cli, ["status", "-o", "wide", *fleet.state]).stdout.splitlines()

    assert text[0].split() == ["NAME", "STATE", "VERSION", "REASON", "COMMIT", "AGE", "MESSAGE"]
    assert wide[0].split()[-2:] == ["UPDATED", "ACCESS"]
    assert "snapshot " in wide[1]


def test_a_reader_that_goes_away_stops_the_command_quietly(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "state.db")
    modules = tuple(
        ModuleStatus(f"m{i}", ModuleState.READY, Reason.INSTALL, "ok", "1.0.0") for i in range(5)
    )
    for index in range(1000):  # far more than a pipe holds
        store.put_runtime(
            RuntimeRecord(
                f"rt-{index:04d}", ModuleState.READY, Reason.INSTALL, "5 modules", None, T0, modules
            )
        )
    store.close()
    command = [sys.executable, "-m", "reconciler", "status"]
    command += ["--state", f"sqlite:///{tmp_path / 'state.db'}"]

    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None
    assert process.stdout.read(4) == b"NAME"
    process.stdout.close()  # as `| head -c 4` does
    code = process.wait(timeout=60)
    assert process.stderr is not None
    with process.stderr:
        stderr = process.stderr.read().decode()

    assert code == 141
    assert stderr == ""
