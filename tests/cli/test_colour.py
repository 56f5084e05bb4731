"""Colour: ``--color always`` (or ``--color`` alone) keeps it even through a pipe, ``--color never``
(or the older ``--no-color``) and ``NO_COLOR`` (https://no-color.org) turn it off, and by default
(``auto``) a terminal gets it."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.cli.diff import colour_enabled

SAMPLE = str(Path(__file__).resolve().parents[2] / "sample-repo")
BOLD = "\x1b[1m"


def _fleet_diff(*flags: str) -> str:
    result = CliRunner().invoke(cli, ["diff", SAMPLE, "--base-path", SAMPLE, *flags])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_color_is_kept_through_a_pipe_when_asked() -> None:
    assert BOLD in _fleet_diff("--color")
    assert BOLD in _fleet_diff("--color", "always")
    assert BOLD in _fleet_diff("--color=always")


def test_no_colour_through_a_pipe_by_default_or_when_refused() -> None:
    assert "\x1b[" not in _fleet_diff()
    assert "\x1b[" not in _fleet_diff("--no-color")
    assert "\x1b[" not in _fleet_diff("--color", "never")
    assert "\x1b[" not in _fleet_diff("--color", "auto")


def test_a_wrong_colour_choice_is_one_line() -> None:
    result = CliRunner().invoke(cli, ["diff", SAMPLE, "--base-path", SAMPLE, "--color", "pink"])

    assert result.exit_code == 2
    assert "'pink' is not one of 'auto', 'always', 'never'" in result.output


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("no_color", "flag", "expected"),
    [
        (None, "auto", True),
        ("1", "auto", False),
        ("", "auto", True),  # NO_COLOR counts only when set to something
        ("1", "always", True),  # --color always wins
        (None, "never", False),
    ],
)
def test_a_terminal_gets_colour_unless_no_color_or_the_flag_says_otherwise(
    monkeypatch: pytest.MonkeyPatch, no_color: str | None, flag: str, expected: bool
) -> None:
    monkeypatch.setattr("sys.stdout", _Terminal())
    if no_color is None:
        monkeypatch.delenv("NO_COLOR", raising=False)
    else:
        monkeypatch.setenv("NO_COLOR", no_color)

    assert colour_enabled(flag) is expected
