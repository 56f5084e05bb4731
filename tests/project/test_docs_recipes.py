"""The CI recipes in docs/ are ready to use: their YAML parses, their reconciler command lines
are accepted by the command line parser, and the GitHub Actions workflows pass actionlint (with
shellcheck on their scripts) on actions that run on Node 24. actionlint and shellcheck come from
``bash .ci/install-tools`` (tests/support/tools.py)."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import click
import yaml

from reconciler.cli import cli
from tests.support.tools import REPO, require_tool

DOCS = Path(__file__).parents[2] / "docs"


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
    # the settings of the real command line (``-h``): a command caches its help option from the
    # first context it is given, which would else leave later ``--help`` tests without ``-h``
    root = click.Context(cli, **cli.context_settings)
    for line in lines:
        words = [w for w in shlex.split(line.split("#")[0]) if w]
        command = cli.get_command(root, words[1])
        assert command is not None, line
        command.make_context(words[1], words[2:], parent=root, resilient_parsing=False)


# -- the GitHub Actions workflows, checked by actionlint ---------------------------------------

# The first major of each action that runs on Node 24 (GitHub's runners retired Node 20 in
# September 2026): a recipe on an older major would break or warn on every run.
NODE24_MAJORS = {"actions/checkout": 5, "actions/setup-python": 6}


def _workflows() -> dict[str, str]:
    """Every fenced yaml block of docs/ and the README that is a GitHub Actions workflow (a
    mapping with ``on`` and ``jobs``), by a name saying where it is."""
    found = {}
    for page in [*sorted(DOCS.glob("*.md")), DOCS.parent / "README.md"]:
        for index, block in enumerate(_blocks(page.read_text(encoding="utf-8"), "yaml")):
            document = yaml.safe_load(block)
            # YAML 1.1 reads the key `on` as true
            if isinstance(document, dict) and "jobs" in document and True in document:
                found[f"{page.stem}-{index}.yml"] = block
    return found


def _uses(workflow: str) -> list[str]:
    jobs = yaml.safe_load(workflow)["jobs"]
    return [step["uses"] for job in jobs.values() for step in job["steps"] if "uses" in step]


def test_the_docs_have_a_workflow_to_check() -> None:
    assert "ci-recipes-0.yml" in _workflows()


def test_workflow_actions_are_on_a_node24_major() -> None:
    for name, workflow in _workflows().items():
        for uses in _uses(workflow):
            action, _, ref = uses.partition("@")
            assert action in NODE24_MAJORS, f"{name}: {action}: add its first Node 24 major"
            assert re.fullmatch(r"v\d+", ref), f"{name}: {uses}: use a major tag (vN)"
            assert int(ref[1:]) >= NODE24_MAJORS[action], f"{name}: {uses} runs on Node 20"


def _actionlint(workflows: dict[str, str], root: Path) -> subprocess.CompletedProcess[str]:
    actionlint = require_tool("actionlint")
    shellcheck = require_tool("shellcheck")
    folder = root / ".github" / "workflows"
    folder.mkdir(parents=True)
    for name, text in workflows.items():
        (folder / name).write_text(text, encoding="utf-8")
    return subprocess.run(
        [str(actionlint), "-oneline", "-no-color", f"-shellcheck={shellcheck}", "-pyflakes=",
         *sorted(str(folder / name) for name in workflows)],
        cwd=root, capture_output=True, text=True, check=False,
    )  # fmt: skip


def test_actionlint_passes_the_workflows_in_the_docs(tmp_path: Path) -> None:
    result = _actionlint(_workflows(), tmp_path)

    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_knows_the_node20_retirement(tmp_path: Path) -> None:
    """The check above is not vacuous: the recipe as it was (checkout v4, setup-python v5) is
    refused, each action named."""
    recipe = _workflows()["ci-recipes-0.yml"]
    old = re.sub(r"actions/checkout@v\d+", "actions/checkout@v4", recipe)
    old = re.sub(r"actions/setup-python@v\d+", "actions/setup-python@v5", old)

    result = _actionlint({"old.yml": old}, tmp_path)

    assert result.returncode == 1
    assert '"actions/checkout@v4"' in result.stdout
    assert '"actions/setup-python@v5"' in result.stdout


def test_the_ci_scripts_pass_shellcheck() -> None:
    shellcheck = require_tool("shellcheck")
    scripts = sorted(str(p) for p in (REPO / ".ci").iterdir() if p.read_text().startswith("#!"))

    result = subprocess.run(
        [str(shellcheck), *scripts], capture_output=True, text=True, check=False
    )

    assert len(scripts) >= 2
    assert result.returncode == 0, result.stdout
