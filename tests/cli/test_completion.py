"""``reconciler completion bash|zsh|fish``: each shell's script is printed, and the completion it
calls answers commands, options and the config repo's runtime names."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli import cli

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample-repo"


@pytest.mark.parametrize(
    ("shell", "marker"),
    [("bash", "complete -o nosort -F"), ("zsh", "#compdef reconciler"), ("fish", "complete ")],
)
def test_each_shell_gets_its_script(shell: str, marker: str) -> None:
    result = CliRunner().invoke(cli, ["completion", shell])

    assert result.exit_code == 0, result.output
    assert marker in result.stdout
    assert "_RECONCILER_COMPLETE" in result.stdout


def test_an_unknown_shell_is_one_line_and_exit_2() -> None:
    result = CliRunner().invoke(cli, ["completion", "powershell"])

    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert line.startswith("error: Invalid value for '{bash|zsh|fish}': 'powershell' is not one")
    assert line.endswith(" completion --help')")


def _complete(words: str) -> list[str]:
    """What the bash script would get back for the command line ``words`` (cursor at the end),
    asked of the console script the way the script asks it."""
    env = {
        **os.environ,
        "_RECONCILER_COMPLETE": "bash_complete",
        "COMP_WORDS": words,
        "COMP_CWORD": str(len(words.split()) - (0 if words.endswith(" ") else 1)),
    }
    done = subprocess.run(
        [sys.executable, "-m", "reconciler"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    return [line.split(",", 1)[1] for line in done.stdout.splitlines()]


def test_runtime_names_are_completed_from_the_repo_on_the_command_line() -> None:
    assert _complete(f"reconciler render {SAMPLE} --runtime prod-") == [
        "prod-ap-1",
        "prod-eu-1",
        "prod-us-1",
    ]


def test_commands_are_completed() -> None:
    assert "completion" in _complete("reconciler comp")


def test_the_version_command_is_completed() -> None:
    assert "version" in _complete("reconciler vers")
