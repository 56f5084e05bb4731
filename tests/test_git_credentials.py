"""Where the daemon's git credentials go (issue 23): the ``--ssh-key-file`` path reaches ssh as
one argument, whatever characters it holds (a real ``reconciler daemon`` process runs git,
which runs the ``ssh`` found first on ``PATH``: a recording program standing in for it).
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.test_daemon import _until
from tests.test_git_safety import _start_daemon, _stop


def _recording_ssh(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An environment whose ``ssh`` writes its arguments, one per line, to the returned log and
    fails as an unreachable server does."""
    folder = tmp_path / "bin"
    folder.mkdir()
    log = tmp_path / "ssh-argv.log"
    program = folder / "ssh"
    program.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >> "{log}"\nexit 255\n')
    program.chmod(0o755)
    return {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}, log


def test_an_ssh_key_path_reaches_ssh_as_one_argument_and_runs_nothing(tmp_path: Path) -> None:
    env, log = _recording_ssh(tmp_path)
    env["HOME"] = str(tmp_path)  # where a bare ``cd`` goes
    marker = tmp_path / "pwned"
    secrets = tmp_path / "mounted secret"  # a Secret mounted at a path with a space
    secrets.mkdir()
    key = secrets / "id ;cd;touch pwned;#"
    key.write_text("not a real key\n")
    daemon, _ = _start_daemon(
        tmp_path, "ssh://git@127.0.0.1/fleet.git", "--ssh-key-file", str(key), env=env
    )
    try:
        _until(lambda: log.exists() and "fleet.git" in log.read_text())
    finally:
        _stop(daemon)

    argv = log.read_text().splitlines()
    assert argv[argv.index("-i") + 1] == str(key)
    assert not marker.exists()
