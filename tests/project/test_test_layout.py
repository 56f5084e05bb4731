"""The tests stay laid out like the package and keep their own rules: every test module in a
folder (``tests/core``, ``tests/config``, ..., ``tests/processes``), helpers in ``tests/support``,
which ``bench/`` may import but the tests never import ``bench``; no test module, conftest or
benchmark imports a test module or a conftest (what they share lives in ``tests/support``); test
docstrings say what is tested (no issue numbers); and no assertion on wall-clock time, which a
busy machine breaks."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).parents[2]
TESTS = ROOT / "tests"
#: The folders of test modules: the packages of ``reconciler``, and the suites across them.
FOLDERS = {
    *(p.name for p in (ROOT / "reconciler").iterdir() if (p / "__init__.py").is_file()),
    "processes",
    "project",
    "contract",
    "store_contract",
    "e2e",
}
ISSUE = re.compile(r"\bissues? \d+", re.I)
CLOCKS = {"monotonic", "perf_counter", "time"}


def _modules() -> list[Path]:
    return sorted(TESTS.rglob("*.py"))


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def test_every_test_module_is_in_a_folder_of_the_layout() -> None:
    misplaced = [
        str(p.relative_to(ROOT))
        for p in TESTS.rglob("test_*.py")
        if p.parent == TESTS or p.relative_to(TESTS).parts[0] not in FOLDERS
    ]

    assert misplaced == [], "move them into the folder of the package they test"


def _imports(path: Path) -> Iterator[tuple[int, str]]:
    """Each module ``path`` imports, anywhere in it, with its line: a relative import as its dots
    and module (``.test_x``), ``from tests import x`` as ``tests.x``."""
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level:
            names = ["." * node.level + (node.module or "")]
        elif isinstance(node, ast.ImportFrom) and node.module == "tests":
            names = [f"tests.{a.name}" for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        else:
            continue
        yield from ((node.lineno, name) for name in names)


def _is_a_test_module(name: str) -> bool:
    """Whether importing ``name`` reaches into a test module or a conftest: anything of
    ``tests`` but ``tests.support``, a ``conftest``, or a relative import."""
    parts = name.split(".")
    if name.startswith(".") or "conftest" in parts:
        return True
    return parts[0] == "tests" and parts[1:2] != ["support"]


def test_tests_never_import_bench() -> None:
    importing = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in _modules()
        for line, name in _imports(path)
        if name == "bench" or name.startswith("bench.")
    ]

    assert importing == [], "bench/ may import tests/support, never the other way"


def test_no_test_module_imports_another() -> None:
    """A helper, constant or fixture that two test modules share lives in ``tests/support`` (a
    fixture may stay in a conftest, which pytest finds by itself): importing a test module runs
    its module-level set-up and ties two tests' files together."""
    importing = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in [*_modules(), *sorted((ROOT / "bench").rglob("*.py"))]
        for line, name in _imports(path)
        if _is_a_test_module(name)
    ]

    assert importing == [], "move what they share into tests/support and import it from there"


def test_test_docstrings_name_no_issue() -> None:
    found = []
    for path in TESTS.rglob("test_*.py"):
        tree = _tree(path)
        nodes: list[ast.Module | ast.FunctionDef] = [tree]
        nodes += [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
        for node in nodes:
            docstring = ast.get_docstring(node) or ""
            if ISSUE.search(docstring):
                found.append(f"{path.relative_to(ROOT)}: {getattr(node, 'name', 'module')}")

    assert found == [], "say what is tested, not which issue asked for it"


def _reads_a_clock(node: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr in CLOCKS
        and isinstance(n.func.value, ast.Name)
        and n.func.value.id == "time"
        for n in ast.walk(node)
    )


def _is_a_deadline(test: ast.expr) -> bool:
    """``time.monotonic() < deadline``: a wait's guard against hanging, not a measurement."""
    return (
        isinstance(test, ast.Compare)
        and _reads_a_clock(test.left)
        and not any(_reads_a_clock(c) for c in test.comparators)
        and isinstance(test.left, ast.Call)
    )


def test_no_assertion_on_wall_clock_time() -> None:
    found = []
    for path in _modules():
        tree = _tree(path)
        asserts = [n for n in ast.walk(tree) if isinstance(n, ast.Assert)]
        for node in asserts:
            if _reads_a_clock(node.test) and not _is_a_deadline(node.test):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")

    assert found == [], "check what happened (a message, a state), never how long it took"
