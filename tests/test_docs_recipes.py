"""The CI recipes in docs/ are ready to use: their YAML parses and their reconciler command
lines are accepted by the command line parser."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import yaml

from reconciler.cli import cli

DOCS = Path(__file__).parent.parent / "docs"


def _blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)


def test_recipe_yaml_parses() -> None:
    blocks = _blocks((DOCS / "ci-recipes.md").read_text(encoding="utf-8"), "yaml")

    assert len(blocks) == 2
    workflows = [yaml.safe_load(block) for block in blocks]
    assert "jobs" in workflows[0]
    assert "fleet-plan" in workflows[1]


def test_recipe_commands_are_valid_command_lines() -> None:
    text = (DOCS / "ci-recipes.md").read_text(encoding="utf-8")
    code = "\n".join(_blocks(text, "yaml") + _blocks(text, "sh"))
    lines = [m.group(0) for m in re.finditer(r"reconciler (?:validate|diff)[^\n;>]*", code)]

    assert len(lines) >= 6
    for line in lines:
        words = [w for w in shlex.split(line.split("#")[0]) if w]
        command = cli.get_command(click.Context(cli), words[1])
        assert command is not None, line
        command.make_context(words[1], words[2:], resilient_parsing=False)
