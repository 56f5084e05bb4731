"""What ``reconciler daemon``'s command line chooses: a rehearsal with ``--snapshot DIR`` keeps its
state store and git cache inside DIR, as ``sync --snapshot`` does, never the real ones; a PostgreSQL
password given in ``--state`` on the command line (seen by every user in ``ps``) is warned about,
and never shown."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from reconciler.cli import cli
from tests.support.daemons import Fleet, free_port, http_get, until


def _ready(base: str) -> bool:
    try:
        return http_get(base + "/readyz")[0] == 200
    except OSError:
        return False


def test_a_daemon_on_snapshots_keeps_its_store_and_git_cache_inside_the_folder(
    tmp_path: Path,
) -> None:
    Fleet(tmp_path)
    home, clusters, port = tmp_path / "home", tmp_path / "clusters", free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("RECONCILER_STATE", "XDG_STATE_HOME")}
    env["HOME"] = str(home)
    command = [sys.executable, "-m", "reconciler", "daemon", "--repo", str(tmp_path / "remote.git")]
    command += ["--path", "fleet", "--listen", f"127.0.0.1:{port}"]
    command += ["--snapshot", f"{clusters}/", "--snapshot-create"]
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        until(lambda: _ready(f"http://127.0.0.1:{port}"), seconds=60)
    finally:
        process.terminate()
        process.wait(timeout=60)
    assert (clusters / "reconciler-state.db").is_file()
    assert (clusters / "git-cache").is_dir()
    assert not (home / ".local").exists()  # the real store and cache untouched


def test_a_password_in_the_state_url_on_the_command_line_is_warned_about() -> None:
    url = "postgresql://app:s3cr3t-pw@127.0.0.1:1/x?connect_timeout=1"
    result = CliRunner().invoke(cli, ["status", "--state", url])
    assert "warning: the --state URL carries a password" in result.stderr
    assert "RECONCILER_STATE" in result.stderr
    assert "s3cr3t-pw" not in result.output + result.stderr


def test_a_state_url_from_the_environment_is_not_warned_about() -> None:
    url = "postgresql://app:s3cr3t-pw@127.0.0.1:1/x?connect_timeout=1"
    result = CliRunner().invoke(cli, ["status"], env={"RECONCILER_STATE": url})
    assert "warning" not in result.stderr
    assert "s3cr3t-pw" not in result.output + result.stderr
