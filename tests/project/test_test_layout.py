"""The tests stay laid out like the package and keep their own rules: every test module in a
folder (``tests/core``, ``tests/config``, ..., ``tests/processes``), helpers in ``tests/support``,
which ``bench/`` may import but the tests never import ``bench``; test docstrings say what is
tested (no issue numbers); and no assertion on wall-clock time, which a busy machine breaks."""

from __future__ import annotations

import ast
import re
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


def test_tests_never_import_bench() -> None:
    importing = []
    for path in _modules():
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            if any(n == "bench" or n.startswith("bench.") for n in names):
                importing.append(f"{path.relative_to(ROOT)}:{node.lineno}")

    assert importing == [], "bench/ may import tests/support, never the other way"


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
