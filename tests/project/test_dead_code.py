"""No dead names in the package: vulture, configured in ``[tool.vulture]`` of pyproject.toml,
reads the package with the tests and the bench (a name only a test uses is alive) and finds
nothing in ``reconciler/`` that nobody reads."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def _dead_in_package(root: Path, *extra: str) -> list[str]:
    command = shutil.which("vulture", path=str(Path(sys.executable).parent))
    assert command is not None, "vulture is part of the [test] extra"
    found = subprocess.run(
        [command, *extra], cwd=root, capture_output=True, text=True, check=False
    ).stdout
    return [line for line in found.splitlines() if line.startswith("reconciler/")]


def test_no_name_of_the_package_is_dead() -> None:
    assert _dead_in_package(ROOT) == []


def test_the_check_sees_a_dead_name(tmp_path: Path) -> None:
    dead = tmp_path / "reconciler" / "dead.py"
    dead.parent.mkdir()
    dead.write_text("def nobody_calls_me() -> None:\n    pass\n", encoding="utf-8")

    found = _dead_in_package(tmp_path, "reconciler")

    assert found == ["reconciler/dead.py:1: unused function 'nobody_calls_me' (60% confidence)"]
