"""The project's drawings of itself stay true: the README's Layout table names every module of
each package, the exception tree drawn in ``reconciler/errors.py`` is the class tree, and a
module a docstring's "Callers:" names does import the module."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

from reconciler import errors
from tests.support.python_imports import imported_names

ROOT = Path(__file__).parents[2]
PACKAGE = ROOT / "reconciler"

_ROW = re.compile(r"^\| `reconciler\.([\w.]+)` \| (.*?) \|")
_NAMED = re.compile(r"`(\w+)/?`")
_DRAWN = re.compile(r"^(?P<indent>[ |]*)\+-- (?P<name>\w+)")


def _layout_rows(readme: str) -> dict[str, set[str]]:
    """Each package row of the Layout table: the modules its second column names."""
    rows: dict[str, set[str]] = {}
    for line in readme.splitlines():
        match = _ROW.match(line)
        if match is not None and (PACKAGE / match.group(1).replace(".", "/")).is_dir():
            rows[match.group(1)] = set(_NAMED.findall(match.group(2)))
    return rows


def _modules_of(package: str) -> set[str]:
    folder = PACKAGE / package.replace(".", "/")
    modules = {path.stem for path in folder.glob("*.py") if path.stem != "__init__"}
    return modules | {path.name for path in folder.iterdir() if (path / "__init__.py").exists()}


def _is_command(package: str, module: str) -> bool:
    """A CLI module that declares a command (the table's "one module per command")."""
    text = (PACKAGE / package / f"{module}.py").read_text(encoding="utf-8")
    return "@click.command" in text or ".command(" in text or "@click.group" in text


def _missing_from_layout(readme: str) -> dict[str, list[str]]:
    missing: dict[str, list[str]] = {}
    for package, named in _layout_rows(readme).items():
        left = sorted(
            module
            for module in _modules_of(package) - named
            if not (package == "cli" and _is_command(package, module))
        )
        if left:
            missing[package] = left
    return missing


def test_the_layout_table_has_a_row_for_every_package() -> None:
    rows = _layout_rows((ROOT / "README.md").read_text(encoding="utf-8"))
    packages = {
        str(path.parent.relative_to(PACKAGE)).replace("/", ".")
        for path in PACKAGE.glob("*/**/__init__.py")
    }

    assert packages - set(rows) == set()


def test_the_layout_table_names_every_module_of_its_package() -> None:
    assert _missing_from_layout((ROOT / "README.md").read_text(encoding="utf-8")) == {}


def test_the_layout_check_sees_a_module_left_out() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    cut = readme.replace("`brake`, ", "", 1)

    assert _missing_from_layout(cut) == {"core": ["brake"]}


def _drawn_tree(docstring: str) -> dict[str, str]:
    """Each class of the drawing and the class drawn above it at one level less."""
    parents: dict[str, str] = {}
    stack = ["ReconcilerError"]
    for line in docstring.splitlines():
        match = _DRAWN.match(line.strip("\n").removeprefix("    "))
        if match is None:
            continue
        depth = len(match.group("indent")) // 5
        del stack[depth + 1 :]
        parents[match.group("name")] = stack[-1]
        stack.append(match.group("name"))
    return parents


def _class_tree() -> dict[str, str]:
    tree: dict[str, str] = {}
    for name, value in vars(errors).items():
        ours = inspect.isclass(value) and value.__module__ == errors.__name__
        if (
            ours
            and issubclass(value, errors.ReconcilerError)
            and value is not errors.ReconcilerError
        ):
            tree[name] = value.__bases__[0].__name__
    return tree


def test_the_drawn_exception_tree_is_the_class_tree() -> None:
    assert _drawn_tree(errors.__doc__ or "") == _class_tree()


def test_the_tree_check_sees_a_class_drawn_under_the_wrong_parent() -> None:
    drawn = (errors.__doc__ or "").replace(
        "     |    |    +-- SnapshotError", "     |    +-- SnapshotError"
    )

    assert _drawn_tree(drawn)["SnapshotError"] == "PermanentError"
    assert _drawn_tree(drawn) != _class_tree()


_CALLERS = re.compile(r"Callers?:(.*?)(?:;|\.\s+[A-Z]|\.$|$)")
_REFERENCE = re.compile(r":(?:mod|class|func|meth):`~?(reconciler[\w.]*)`")


def _dotted(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _named_callers(docstring: str) -> list[str]:
    """The modules and classes a "Callers:" clause names."""
    flat = " ".join(docstring.split())
    clauses = (match.group(1) for match in _CALLERS.finditer(flat))
    return [reference for clause in clauses for reference in _REFERENCE.findall(clause)]


def _wrong_callers(modules: dict[str, Path]) -> list[str]:
    wrong = []
    for name, path in sorted(modules.items()):
        for reference in _named_callers(ast.get_docstring(ast.parse(path.read_text())) or ""):
            caller = reference
            while caller and caller not in modules:
                caller = caller.rpartition(".")[0]
            imported = imported_names(modules[caller]) if caller else set()
            if not any(i == name or i.startswith(f"{name}.") for i in imported):
                wrong.append(f"{name}: {reference} does not import it")
    return wrong


def test_every_module_named_as_a_caller_imports_the_module() -> None:
    modules = {_dotted(path): path for path in PACKAGE.rglob("*.py")}

    assert _wrong_callers(modules) == []


def test_the_callers_check_sees_a_caller_that_does_not_import(tmp_path: Path) -> None:
    called = tmp_path / "called.py"
    called.write_text('"""Callers: :mod:`reconciler.caller`."""\n', encoding="utf-8")
    caller = tmp_path / "caller.py"
    caller.write_text("import json\n", encoding="utf-8")

    wrong = _wrong_callers({"reconciler.called": called, "reconciler.caller": caller})

    assert wrong == ["reconciler.called: reconciler.caller does not import it"]
