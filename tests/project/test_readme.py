"""The README's shown outputs are real.

Every code block after a ``<!-- readme-check -->`` line is a session: lines starting with ``$ ``
are commands, the lines after one are what it prints (stdout and stderr together). The blocks run
in order, in one sandbox holding a copy of ``sample-repo/`` and ``channels/`` (shown as
``~/fleet``), with ``reconciler`` from this environment; ``export NAME=VALUE`` lines set the
environment of the commands after them. Outputs are compared line by line with ids, commit
hashes, times, ages and durations masked and runs of spaces folded; ``...`` in the README stands
for any lines left out.

Slow-ish (about 20 commands in subprocesses) because it runs the README as a user would.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- readme-check -->"


@dataclass(frozen=True, slots=True)
class Step:
    """A command of a checked block and the lines the README shows it printing."""

    command: str
    shown: tuple[str, ...]


def checked_steps(text: str) -> list[Step]:
    """The steps of every checked block, in the README's order."""
    steps: list[Step] = []
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if line.strip() != MARKER:
            continue
        assert lines[index + 1].startswith("```"), f"line {index + 2}: a code block must follow"
        body: list[str] = []
        for inner in lines[index + 2 :]:
            if inner.startswith("```"):
                break
            body.append(inner)
        steps.extend(_steps(body))
    return steps


def _steps(body: list[str]) -> list[Step]:
    steps: list[Step] = []
    for line in body:
        if line.startswith("$ "):
            steps.append(Step(line[2:], ()))
        else:
            assert steps, f"output before any command: {line!r}"
            last = steps[-1]
            steps[-1] = Step(last.command, (*last.shown, line))
    return steps


_MASKS = (
    (re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?( UTC|\+00:00|Z)?"), "<time>"),
    # a commit or operation id: 7-40 hex digits, at least one a digit (an id may be all digits)
    (re.compile(r"\b(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b"), "<hex>"),
    (re.compile(r"\b\d+(\.\d+)?(ms|s|m|h|d)\b"), "<t>"),
    (re.compile(r" +"), " "),
)


def masked(line: str) -> str:
    """``line`` without what changes from run to run."""
    for pattern, replacement in _MASKS:
        line = pattern.sub(replacement, line)
    return line.rstrip()


def matches(shown: tuple[str, ...], printed: list[str]) -> bool:
    """Whether ``printed`` is ``shown``, each ``...`` standing for any number of lines."""
    want = [masked(line) for line in shown]
    got = [masked(line) for line in printed]
    return _match(want, got)


def _match(want: list[str], got: list[str]) -> bool:
    if not want:
        return not got
    if want[0] == "...":
        return any(_match(want[1:], got[skip:]) for skip in range(len(got) + 1))
    return bool(got) and got[0] == want[0] and _match(want[1:], got[1:])


def _sandbox(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    for folder in ("sample-repo", "channels"):
        shutil.copytree(ROOT / folder, fleet / folder)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("RECONCILER_", "GIT_", "NO_COLOR"))
    }
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"  # stdout and stderr in the order they were written
    env["HOME"] = str(tmp_path / "home")
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    for role in ("AUTHOR", "COMMITTER"):
        env[f"GIT_{role}_NAME"] = "Fleet Owner"
        env[f"GIT_{role}_EMAIL"] = "owner@example.com"
    return fleet, env


def test_the_readme_blocks_print_what_they_show(tmp_path: Path) -> None:
    steps = checked_steps((ROOT / "README.md").read_text())
    assert len(steps) >= 15
    fleet, env = _sandbox(tmp_path)
    for step in steps:
        if step.command.startswith("export "):
            name, _, value = step.command.removeprefix("export ").partition("=")
            env[name] = value
            continue
        done = subprocess.run(
            ["bash", "-c", step.command],
            cwd=fleet,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=120,
            check=False,
        )
        printed = done.stdout.replace(str(fleet), "~/fleet").splitlines()
        assert "Traceback" not in done.stdout, done.stdout
        assert matches(step.shown, printed), (
            f"$ {step.command}\n--- the README shows:\n"
            + "\n".join(step.shown)
            + "\n--- it printed:\n"
            + "\n".join(printed)
        )


def test_the_matcher_masks_what_changes_and_skips_what_is_left_out() -> None:
    shown = ("runtime a: update 845412c8566f succeeded", "...", "synced 1 of 1 in 0.5s")
    printed = ["runtime  a: update 0123456789ab succeeded", "x", "y", "synced 1 of 1 in 12.3s"]

    assert matches(shown, printed)
    assert not matches(shown, printed[:-1])
    assert not matches(("1.2.0",), ["1.3.0"])  # versions are no ids
    assert matches(("diff HEAD (f4fd8f39) ->",), ["diff HEAD (98193639) ->"])  # all digits
    assert not matches(("a defaced b",), ["a effaced b"])  # words are no ids
    assert masked("since 2026-11-25 03:21 UTC: x") == "since <time>: x"


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but ``-`` and ``_`` dropped,
    spaces as ``-``."""
    kept = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return kept.replace(" ", "-")


def test_every_link_to_a_section_of_the_readme_finds_it() -> None:
    text = (ROOT / "README.md").read_text()
    anchors = {_slug(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}
    links = re.findall(r"\]\(#([^)]+)\)", text)

    assert links
    assert sorted(set(links) - anchors) == []
