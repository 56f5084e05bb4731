"""A malformed state store or snapshot is one line naming the file, never a traceback (issue 11)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from reconciler.cli import cli

SAMPLE = Path(__file__).resolve().parent.parent / "sample-repo"


def test_a_state_store_that_is_not_sqlite_is_one_line(tmp_path: Path) -> None:
    store = tmp_path / "state.db"
    store.write_text("this is not a database\n" * 100)

    result = CliRunner().invoke(cli, ["status", "--state", f"sqlite:///{store}"])

    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"error: {store}: not a usable reconciler state store (file is not a database); "
        "name another with --state or RECONCILER_STATE"
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
