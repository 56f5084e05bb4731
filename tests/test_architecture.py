"""The layers stay as designed: the pure core imports no I/O library (DESIGN.md §5).

The contract itself lives in pyproject.toml (`[tool.importlinter]`); this test runs it so that a
plain `pytest` catches a broken layer, not only CI.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).parent.parent


def test_import_contracts_are_kept() -> None:
    command = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert command is not None, "import-linter is part of the [test] extra"

    result = subprocess.run([command], cwd=ROOT, capture_output=True, text=True, check=False)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_every_pure_module_is_under_contract() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contract = config["tool"]["importlinter"]["contracts"][0]
    pure = set(contract["source_modules"])
    for name in ("model", "resolve", "render", "validate", "schema", "yamlsafe", "credentials"):
        assert f"reconciler.{name}" in pure
    assert {"os", "pathlib", "subprocess", "socket", "kubernetes", "git", "click"} <= set(
        contract["forbidden_modules"]
    )
