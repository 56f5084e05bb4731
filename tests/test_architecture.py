"""The layers stay as designed: the pure core imports no I/O library (DESIGN.md §5).

The contract itself lives in pyproject.toml (`[tool.importlinter]`); this test runs it so that a
plain `pytest` catches a broken layer, not only CI.
"""

from __future__ import annotations

import ast
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


#: Libraries that only one module may import (DESIGN.md §5).
SOLE_IMPORTERS = {
    "kubernetes": "reconciler/cluster/kube.py",
    "git": "reconciler/source/git.py",
    "gitdb": "reconciler/source/git.py",
    "sqlite3": "reconciler/operations/store.py",
}


def _imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_only_the_adapters_import_their_libraries() -> None:
    for path in sorted((ROOT / "reconciler").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        for library in _imported_roots(path) & set(SOLE_IMPORTERS):
            assert relative == SOLE_IMPORTERS[library], f"{relative} imports {library}"
