"""Each caller of the state store takes the role it uses: only the composition roots that open
a store and wire everything annotate a parameter or a field as the whole ``StateStore``; every
other caller names a role protocol of ``reconciler.operations.store.contract``
(``OperationLedger``, ``RuntimeRecords``, ``CommitVerdicts``, ...)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).parents[2]
WHOLE = "StateStore"

#: Where the whole store may be taken: the roots that open a store and hand its roles on.
COMPOSITION_ROOTS = {
    # the daemon's wiring: hands each part its roles
    "reconciler.daemon.service:Daemon.__init__(store)",
    # ... and the store it is handed later (tests interleave one): the commit gate's ledger too
    "reconciler.daemon.service:Daemon.store(store)",
    # the daemon command's store opening: a damaged SQLite file stops it before it starts
    "reconciler.cli.daemon:_check_store(store)",
    "reconciler.operations.store.opening:check_store(store)",
    # the CLI's run wiring: the store a run opened, handed to its brake, engine and runner
    "reconciler.cli.plans:Scope.store",
    "reconciler.cli.plans:scope_of(store)",
}


def _names_whole_store(annotation: ast.expr | None) -> bool:
    """Whether ``annotation`` is, or holds (``StateStore | None``), the whole store."""
    if annotation is None:
        return False
    return any(WHOLE in _names(node) for node in ast.walk(annotation))


def _names(node: ast.AST) -> list[str]:
    """The names ``node`` spells itself: a name, an attribute, or those of a quoted annotation."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.replace("|", " ").replace(".", " ").split()
    return []


def _parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.arg]:
    arguments = function.args
    every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    return every + [a for a in (arguments.vararg, arguments.kwarg) if a is not None]


def whole_store_takers(source: str, module: str) -> set[str]:
    """``module:Qualified.name(parameter)`` of each parameter, and ``module:Class.field`` of
    each annotated field or attribute, that ``source`` types as the whole store."""
    found: set[str] = set()

    def visit(node: ast.AST, scope: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, f"{scope}{child.name}.")
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{scope}{child.name}"
                found.update(
                    f"{module}:{name}({arg.arg})"
                    for arg in _parameters(child)
                    if _names_whole_store(arg.annotation)
                )
                visit(child, f"{name}.")
            elif isinstance(child, ast.AnnAssign) and _names_whole_store(child.annotation):
                found.add(f"{module}:{scope}{ast.unparse(child.target).removeprefix('self.')}")
            else:
                visit(child, scope)

    visit(ast.parse(source), "")
    return found


def load_whole_store_takers() -> set[str]:
    """Every taker of the whole store in the ``reconciler`` package (reads its files)."""
    found: set[str] = set()
    for path in sorted((ROOT / "reconciler").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        found |= whole_store_takers(path.read_text(encoding="utf-8"), module)
    return found


def test_only_the_composition_roots_take_the_whole_state_store() -> None:
    found = load_whole_store_takers()

    assert sorted(found - COMPOSITION_ROOTS) == [], (
        "take the role protocol you use (reconciler.operations.store.contract), not the whole "
        "StateStore; only a composition root that wires everything may, listed in "
        "COMPOSITION_ROOTS"
    )
    assert sorted(COMPOSITION_ROOTS - found) == [], (
        "no longer takes the whole StateStore: drop it from COMPOSITION_ROOTS"
    )


def test_the_check_sees_parameters_fields_and_attributes() -> None:
    source = """
from reconciler.operations.store import StateStore, contract, RuntimeRecords

def reads(store: StateStore | None, records: RuntimeRecords) -> None: ...

class Part:
    ledger: "StateStore"

    def __init__(self, *, store: contract.StateStore) -> None:
        self.kept: StateStore = store

    async def later(self, records: RuntimeRecords, *more: StateStore) -> StateStore: ...
"""

    assert whole_store_takers(source, "m") == {
        "m:reads(store)",
        "m:Part.ledger",
        "m:Part.__init__(store)",
        "m:Part.__init__.kept",
        "m:Part.later(more)",
    }
