"""A malformed state store or snapshot is one line naming the file, never a traceback; so is one the
operator may not write or read."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.core.reasons import Reason
from reconciler.core.status import ModuleState
from reconciler.operations.model import RuntimeRecord
from reconciler.operations.store import SqliteStore

SAMPLE = Path(__file__).resolve().parents[2] / "sample-repo"


def test_a_state_store_that_is_not_sqlite_is_one_line(tmp_path: Path) -> None:
    store = tmp_path / "state.db"
    store.write_text("this is not a database\n" * 100)

    result = CliRunner().invoke(cli, ["status", "--state", f"sqlite:///{store}"])

    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"error: {store}: not a usable reconciler state store (file is not a database); "
        "restore it from a backup or move it away (a new one is created), check that the file "
        "and its folder are writable, or name another store with --state or RECONCILER_STATE"
    ]


def test_a_snapshot_that_is_not_yaml_is_one_line(tmp_path: Path) -> None:
    snapshot = tmp_path / "cluster.yaml"
    snapshot.write_text("a: [\n")
    command = ["diff", str(SAMPLE), "--runtime", "dev-sandbox", "--snapshot", str(snapshot)]

    result = CliRunner().invoke(cli, [*command, "--state", f"sqlite:///{tmp_path / 's.db'}"])

    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert line.startswith(f"runtime dev-sandbox: error: {snapshot}: cannot read the snapshot: ")
    assert "line 2, column 1" in line


def test_a_state_store_that_may_not_be_written_is_one_line_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read-only store is one line, not an internal error (``OperationalError: attempt to write a
    readonly database``). (The tests run as root, whom file modes do not stop: SQLite's query_only
    stands in for a read-only file or disk.)"""
    path = tmp_path / "state.db"
    store = SqliteStore(path)
    store.put_runtime(
        RuntimeRecord("rt", ModuleState.READY, Reason.READY, "", None, datetime.now(UTC))
    )
    store.close()
    opened = SqliteStore.__init__

    def read_only(self: SqliteStore, where: Path) -> None:
        opened(self, where)
        self._db.execute("PRAGMA query_only = ON")

    monkeypatch.setattr(SqliteStore, "__init__", read_only)
    result = CliRunner().invoke(
        cli, ["suspend", "rt", str(tmp_path), "--state", f"sqlite:///{path}"]
    )

    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert line.startswith(
        f"error: {path}: not a usable reconciler state store (attempt to write a readonly"
    )
    assert "check that the file and its folder are writable" in line
    assert "internal error" not in line


def test_a_module_folder_that_may_not_be_read_is_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A ``PermissionError`` is one line, not an internal error (simulated: root reads anything)."""
    scandir = os.scandir

    def refusing(path: Any) -> Any:
        if str(path).endswith("modules/istio"):
            raise PermissionError(13, "Permission denied", str(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refusing)
    result = CliRunner().invoke(cli, ["validate", str(SAMPLE)])

    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"error: {SAMPLE}/modules/istio: cannot be read (Permission denied); check that this "
        "user may read it and the folders above it"
    ]
