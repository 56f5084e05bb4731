"""Hostile YAML, each fixed failure on its own: nesting of every form bounded before composing,
scalar conversion errors as located C6 diagnostics, locating in linear time, and the linear
``uniqueItems`` and misspelling checks of the schema checker."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from reconciler.config import schema, yamlsafe
from reconciler.config.schema import SchemaChecker
from reconciler.config.yamlsafe import MAX_DEPTH, parse_yaml
from reconciler.core.diagnostics import Diagnostic
from reconciler.source.schemas import load_schemas

ROOT = Path(__file__).resolve().parents[2]


def _problem(text: str, **options: Any) -> Diagnostic:
    _, problems = parse_yaml(text, "f.yaml", **options)
    assert len(problems) == 1, problems
    return problems[0]


# -- nesting: every form, refused before composing -----------------------------------------------

#: Each nesting form: text of ``n`` levels, and the place (line, column) of level MAX_DEPTH + 1.
FORMS: dict[str, tuple[Callable[[int], str], tuple[int, int]]] = {
    "block sequence": (lambda n: "- " * n + "x\n", (1, 2 * MAX_DEPTH + 3)),
    "complex key": (lambda n: "? " * n + "x\n", (1, 2 * MAX_DEPTH + 3)),
    "complex key and sequence": (lambda n: "? - " * (n // 2) + "x\n", (1, 2 * MAX_DEPTH + 3)),
    "value of a complex key": (
        lambda n: "? x\n: " + "- " * (n - 1) + "x\n",
        (2, 2 * MAX_DEPTH + 3),
    ),
    "indented mapping": (
        lambda n: "".join(" " * i + "a:\n" for i in range(n)) + " " * n + "x\n",
        (MAX_DEPTH + 2, MAX_DEPTH + 2),
    ),
    "indented sequence": (
        lambda n: "".join(" " * i + "-\n" for i in range(n)) + " " * n + "x\n",
        (MAX_DEPTH + 2, MAX_DEPTH + 2),
    ),
    "sequence under a key, not indented": (
        lambda n: "".join("  " * i + "- a:\n" for i in range(n // 2)) + "x\n",
        (MAX_DEPTH // 2 + 1, MAX_DEPTH + 3),
    ),
    "flow sequence": (lambda n: "[" * n + "]" * n + "\n", (1, MAX_DEPTH + 2)),
    "flow mapping": (lambda n: "{a: " * n + "x" + "}" * n + "\n", (1, 4 * MAX_DEPTH + 5)),
    "flow single-pair mapping": (
        lambda n: "[a: " * (n // 2) + "x" + "]" * (n // 2) + "\n",
        (1, 2 * MAX_DEPTH + 2),
    ),
    "flow in block": (
        lambda n: "- " * (n // 2) + "[" * (n // 2) + "]" * (n // 2) + "\n",
        (1, 2 * MAX_DEPTH + 2),
    ),
    "complex flow key": (lambda n: "{? " * n + "x" + "}" * n + "\n", (1, 3 * MAX_DEPTH + 4)),
}


class _CountingLoader(yamlsafe._BaseLoader):
    """The default loader, counting how often a text is composed."""

    created: ClassVar[int] = 0

    def __init__(self, stream: str) -> None:
        type(self).created += 1
        super().__init__(stream)


@pytest.mark.parametrize("form", list(FORMS))
def test_deep_nesting_is_refused_before_composing_at_the_level_too_deep(form: str) -> None:
    make, place = FORMS[form]
    _CountingLoader.created = 0

    problem = _problem(make(2 * MAX_DEPTH), loader_class=_CountingLoader)

    assert problem.rule == "C6"
    assert problem.message == f"nesting deeper than {MAX_DEPTH} levels"
    assert (problem.line, problem.column) == place
    assert _CountingLoader.created == 0  # nothing was composed


@pytest.mark.parametrize("form", list(FORMS))
def test_nesting_at_the_limit_is_read(form: str) -> None:
    make, _ = FORMS[form]
    text = make(MAX_DEPTH)  # MAX_DEPTH levels below the root at most

    _, problems = parse_yaml(text, "f.yaml")

    assert [p for p in problems if "nesting" in p.message] == []


#: 100-200 KB of nesting: enough to overflow the C stack when composed.
HUGE = 100_000


@pytest.mark.parametrize(
    "form",
    [
        "block sequence",
        "complex key",
        "complex key and sequence",
        "value of a complex key",
        "flow single-pair mapping",
        "flow in block",
    ],
)
def test_very_deep_nesting_of_each_form_does_not_crash_the_process(form: str) -> None:
    script = (
        "import sys\n"
        "from tests.config.test_yaml_limits import FORMS\n"
        "from reconciler.config.yamlsafe import parse_yaml\n"
        f"_, problems = parse_yaml(FORMS[{form!r}][0]({HUGE}), 'deep.yaml')\n"
        "print([p.format() for p in problems])\n"
    )

    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT
    )

    assert done.returncode == 0, f"exit status {done.returncode}: {done.stderr[-300:]}"
    assert f"C6 nesting deeper than {MAX_DEPTH} levels" in done.stdout


def _max_depth(text: str) -> int:
    """The deepest nesting of collections in ``text``, by libyaml's events (0 if it is broken)."""
    depth = deepest = 0
    try:
        for event in yaml.parse(text, Loader=yamlsafe._SafeLoader):
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                deepest = max(deepest, depth)
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.YAMLError:
        return deepest
    return deepest


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("depth", [MAX_DEPTH + 2, MAX_DEPTH + 3, 3 * MAX_DEPTH])
def test_the_cheap_pre_check_never_misses_a_text_too_deep(form: str, depth: int) -> None:
    text = FORMS[form][0](depth)
    nested = "a:\n  b:\n" + "".join(f"    {line}\n" for line in text.splitlines())
    for candidate in (text, nested, text.replace("\n", "\r\n"), "\ufeff" + text):
        if _max_depth(candidate) > MAX_DEPTH + 1:
            assert yamlsafe._may_be_too_deep(candidate)


def test_the_cheap_pre_check_lets_ordinary_files_through_without_scanning() -> None:
    for path in sorted((ROOT / "sample-repo").rglob("*.yaml")):
        assert not yamlsafe._may_be_too_deep(path.read_text(encoding="utf-8")), path


# -- scalars that cannot be converted ------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("!!float ._", "not a valid number (2 characters"),
        ("!!int ''", "not a valid integer (0 characters"),
        ("!!int abc", "not a valid integer"),
        ("!!int 0x_", "not a valid integer"),
        ("!!float x", "not a valid number"),
        ("!!bool maybe", "not a valid boolean"),
        ("!!int " + "7" * 6_000, "not a valid integer (6,000 characters"),
        (".inf", "'.inf' is a number JSON cannot carry"),
        ("-.Inf", "'-.Inf' is a number JSON cannot carry"),
        (".NaN", "'.NaN' is a number JSON cannot carry"),
    ],
)
def test_a_scalar_kubernetes_cannot_read_is_a_c6_problem_at_its_place(
    value: str, expected: str
) -> None:
    problem = _problem(f"spec:\n  replicas: {value}\n")

    assert (problem.rule, problem.line, problem.column) == ("C6", 2, 13)
    assert problem.message.startswith(expected)
    assert "quote it if it is meant as a string" in problem.message
    if len(value) > 20:
        assert value.split()[-1] not in problem.message  # a long value is never repeated


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1_", 1),
        ("1__000", 1000),
        ("0_", 0),
        ("0x_F", 15),
        ("0x_", "0x_"),
        ("+0b_", "+0b_"),
        ("0o_", "0o_"),
        ("190:20:30", "190:20:30"),
        ("1" * 5_000, "1" * 5_000),
        ("-" + "9" * 4_301, "-" + "9" * 4_301),
        ("-0x" + "F" * 3_000, "-0x" + "F" * 3_000),
        ("0b" + "1" * 14_000, "0b" + "1" * 14_000),
        ("1" * 100_000 + ".5", "1" * 100_000 + ".5"),
        ("1e99999", "1e99999"),
        ("1e-99999", 0),
        (".iNf", ".iNf"),
        ("._", "._"),
        ("1_000.5_", 1000.5),
    ],
)
def test_scalars_read_as_kubernetes_reads_them_however_long(value: str, expected: object) -> None:
    """Out-of-range numbers stay strings, as Go's parsers refuse them; none costs more than
    reading its characters (Python's int() of a long decimal is quadratic, so it never sees one)."""
    documents, problems = parse_yaml(f"a: {value}\n", "f.yaml")

    assert problems == []
    assert documents[0].data == {"a": expected}


# -- locating diagnostics: each mapping indexed once ---------------------------------------------


def _runtime_with_unknown_fields(count: int) -> str:
    return (
        "apiVersion: reconciler.dev/v1alpha1\nkind: Runtime\nmetadata:\n  name: rt\nspec:\n"
        "  channel: regular\n  cluster:\n    inCluster: true\n"
        + "".join(f"  k{i:05d}: 1\n" for i in range(count))
    )


def test_locating_many_diagnostics_indexes_each_mapping_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    indexed: list[int] = []
    real = yamlsafe.mapping_index

    def counting(node: yaml.MappingNode) -> dict[str, Any]:
        indexed.append(len(node.value))
        return real(node)

    monkeypatch.setattr(yamlsafe, "mapping_index", counting)
    documents, _ = parse_yaml(_runtime_with_unknown_fields(3_000), "rt.yaml")

    found = SchemaChecker(load_schemas()).check("Runtime", documents[0])

    assert len(found) == 3_000
    assert found[0].format() == "rt.yaml:9:3: C1 unknown field 'k00000' (/spec/k00000)"
    assert found[-1].line == 9 + 2_999
    # the root mapping and spec, each once: the work is the size of the file, not keys x keys
    assert indexed == [4, 3_002]


def test_a_key_given_twice_is_located_at_its_first_place() -> None:
    documents, problems = parse_yaml("a: 1\nb: {c: 2}\n", "f.yaml")
    assert problems == []
    source = documents[0].source
    assert source is not None
    node = source.node(0)
    assert isinstance(node, yaml.MappingNode)
    node.value.append(node.value[0])  # as a merge or a broken file could leave it

    assert documents[0].position(("a",)) == yamlsafe.Position(1, 4)


# -- the schema checker's own quadratic paths ----------------------------------------------------


def _with_days(days: list[Any]) -> dict[str, Any]:
    window = {"days": days, "start": "01:00", "duration": "1h"}
    spec = {"channel": "regular", "cluster": {"inCluster": True}, "maintenanceWindow": window}
    return {"apiVersion": "reconciler.dev/v1alpha1", "kind": "Runtime", "spec": spec}


@pytest.mark.parametrize(
    ("days", "duplicate"),
    [
        (["Mon", "Tue"], False),
        (["Mon", "Mon"], True),
        ([1, 1.0], True),
        ([True, 1], False),
        ([{"a": [1, {"b": 2}]}, {"a": [1, {"b": 2.0}]}], True),
        ([{"a": 1}, {"a": 2}], False),
        ([[1, 2], [2, 1]], False),
    ],
)
def test_unique_items_compares_json_values(days: list[Any], duplicate: bool) -> None:
    validator = SchemaChecker(load_schemas())._validator("Runtime")
    errors = list(validator.iter_errors(_with_days(days)))

    assert any(e.validator == "uniqueItems" for e in errors) is duplicate


def test_unique_items_hashes_instead_of_comparing_pairs(monkeypatch: pytest.MonkeyPatch) -> None:
    hashed: list[object] = []
    real = schema._hashable

    def counting(value: Any) -> Any:
        hashed.append(value)
        return real(value)

    monkeypatch.setattr(schema, "_hashable", counting)
    validator = SchemaChecker(load_schemas())._validator("Runtime")
    days = [{"d": i} for i in range(2_000)]

    list(validator.iter_errors(_with_days(days)))

    # once per value (each item and its number); pairwise would be two million comparisons
    assert len(hashed) == 4_000


def test_misspelled_required_fields_are_matched_per_object(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    looked_up: list[dict[Any, set[str]]] = []
    real = schema._explained_by_misspelling

    def counting(error: Any, meant: Any) -> bool:
        looked_up.append(meant)
        return real(error, meant)

    monkeypatch.setattr(schema, "_explained_by_misspelling", counting)
    text = _runtime_with_unknown_fields(0) + "  modules:\n" + "    - nme: x\n" * 500
    documents, _ = parse_yaml(text, "rt.yaml")

    found = SchemaChecker(load_schemas()).check("Runtime", documents[0])

    assert len(found) == 500
    assert {d.message for d in found} == {
        "unknown field 'nme'; did you mean 'name'? (a required field)"
    }
    # looked up by object (pointer -> names), not found by scanning every misspelling
    assert looked_up
    assert all(all(isinstance(v, set) for v in m.values()) for m in looked_up)
