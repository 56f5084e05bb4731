"""The layers stay as designed: each stage is a package, the pure ones import no I/O (DESIGN.md §5).

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

from tests.support.python_imports import imported_names

ROOT = Path(__file__).parents[2]


def test_import_contracts_are_kept() -> None:
    command = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert command is not None, "import-linter is part of the [test] extra"

    result = subprocess.run([command], cwd=ROOT, capture_output=True, text=True, check=False)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


#: Packages whose every module is pure, wherever it stands inside them.
PURE_PACKAGES = ("core", "config")

#: What a pure module may never import (roots of I/O libraries and of our I/O stages).
IO_LIBRARIES = {
    "os",
    "pathlib",
    "io",
    "subprocess",
    "socket",
    "sqlite3",
    "shutil",
    "urllib",
    "http",
    "tempfile",
    "glob",
    "importlib",
    "threading",
    "click",
    "kubernetes",
    "apscheduler",
    "waitress",
    "prometheus_client",
    "psycopg",
}
IO_STAGES = ("reconciler.source", "reconciler.lifecycle", "reconciler.daemon", "reconciler.cli")


def test_the_pure_packages_are_under_contract_as_packages() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contract = config["tool"]["importlinter"]["contracts"][0]
    assert {f"reconciler.{name}" for name in PURE_PACKAGES} <= set(contract["source_modules"])
    assert set(contract["forbidden_modules"]) >= IO_LIBRARIES


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def io_imports(path: Path) -> set[str]:
    """The I/O libraries and stages a module imports."""
    return {
        module
        for module in _imported_modules(path)
        if module.split(".")[0] in IO_LIBRARIES or module.startswith(IO_STAGES)
    }


def test_no_module_of_a_pure_package_imports_io() -> None:
    modules = [p for name in PURE_PACKAGES for p in (ROOT / "reconciler" / name).rglob("*.py")]
    assert len(modules) > 20
    for path in modules:
        assert not io_imports(path), f"{path.relative_to(ROOT)} imports {io_imports(path)}"


def test_the_io_check_catches_a_new_module_that_imports_io(tmp_path: Path) -> None:
    module = tmp_path / "newly_added.py"
    module.write_text("import os\nfrom reconciler.source.loader import load_repo\n")
    assert io_imports(module) == {"os", "reconciler.source.loader"}


def test_every_folder_of_the_package_is_a_stage_under_the_layers_contract() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    layers = next(c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers")
    folders = {p.parent.name for p in (ROOT / "reconciler").glob("*/__init__.py")}
    rooms = {room.strip() for layer in layers["layers"] for room in layer.split("|")}
    assert {f"reconciler.{name}" for name in folders} | {"reconciler.errors"} == rooms
    loose = {p.name for p in (ROOT / "reconciler").glob("*.py")}
    assert loose == {"__init__.py", "__main__.py", "errors.py"}


def _sole_importers() -> dict[str, set[str]]:
    """Libraries that only the adapter may import (DESIGN.md §5), as the ``protected``
    contracts of pyproject.toml name them: library -> the files allowed to import it."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    allowed: dict[str, set[str]] = {}
    for contract in config["tool"]["importlinter"]["contracts"]:
        if contract["type"] != "protected":
            continue
        files = {_module_file(name) for name in contract["allowed_importers"]}
        for library in contract["protected_modules"]:
            allowed[library] = files
    return allowed


def _module_file(module: str) -> str:
    path = Path(*module.split("."))
    package = ROOT / path / "__init__.py"
    return (path / "__init__.py" if package.exists() else path.with_suffix(".py")).as_posix()


SOLE_IMPORTERS = _sole_importers()


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
    assert {"kubernetes", "sqlite3", "psycopg", "subprocess", "urllib3"} <= set(SOLE_IMPORTERS)
    missing = [f for files in SOLE_IMPORTERS.values() for f in files if not (ROOT / f).exists()]
    assert not missing, f"protected contracts name modules that do not exist: {missing}"
    for path in sorted((ROOT / "reconciler").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        for library in _imported_roots(path) & set(SOLE_IMPORTERS):
            assert relative in SOLE_IMPORTERS[library], f"{relative} imports {library}"


DIALECTS = ("reconciler.operations.store.sqlite", "reconciler.operations.store.postgres")
_SQLITE_CLASS = "reconciler.operations.store.SqliteStore"


def test_only_the_store_package_opens_a_dialect() -> None:
    assert set(DIALECTS) <= set(SOLE_IMPORTERS)
    store = ROOT / "reconciler" / "operations" / "store"
    for path in sorted((ROOT / "reconciler").rglob("*.py")):
        if path.parent == store:
            continue
        names = imported_names(path)
        names = {n for n in names if n.startswith(DIALECTS)} | (names & {_SQLITE_CLASS})
        assert not names, f"{path.relative_to(ROOT)} opens a dialect: {names}"


def test_the_daemons_parts_are_layered_under_the_daemon_that_wires_them() -> None:
    """Each part of the daemon takes its collaborators, none the Daemon: a layers
    contract over every module of ``reconciler.daemon`` (a new one must be placed), and no
    contract ignores an import of the daemon's modules."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    daemon = next(c for c in contracts if c.get("containers") == ["reconciler.daemon"])
    assert daemon["type"] == "layers"
    assert daemon["exhaustive"] is True
    ignored = {line for c in contracts for line in c.get("ignore_imports", [])}
    assert not {line for line in ignored if line.startswith("reconciler.daemon.")}
