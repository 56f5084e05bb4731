"""Safe YAML reading (rule C6) and positions: reconciler.config.yamlsafe.parse_yaml and Document.
Duplicate keys, bounded alias expansion, tags, merge keys, documents, and positions, located in
linear time. (Nesting: test_yaml_limits.py; how scalars and keys read: test_yaml_conformance.py;
the hostile corpus: test_hostile_yaml.py.)"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
import yaml

from reconciler.config import yamlsafe
from reconciler.config.schema import SchemaChecker
from reconciler.config.yamlsafe import Document, Position, parse_yaml
from reconciler.core.diagnostics import Diagnostic
from reconciler.source.schemas import load_schemas


def _data(text: str) -> Any:
    """The data of the only document of ``text``, which must parse cleanly."""
    documents, problems = parse_yaml(text, "f.yaml")
    assert problems == []
    assert len(documents) == 1
    return documents[0].data


def _problem(text: str) -> Diagnostic:
    """The only problem of ``text``."""
    _, problems = parse_yaml(text, "f.yaml")
    assert len(problems) == 1, problems
    return problems[0]


# -- duplicate keys -------------------------------------------------------------------------------


def test_duplicate_key_is_reported_at_the_second_key_naming_the_first_line() -> None:
    problem = _problem("a: 1\nb: 2\na: 3\n")

    assert (problem.path, problem.line, problem.column, problem.rule) == ("f.yaml", 3, 1, "C6")
    assert problem.message == "duplicate key 'a' (first defined on line 1)"


def test_nested_duplicate_key_counts_lines_from_the_start_of_the_file() -> None:
    text = (
        "# comment\nkind: Runtime\n---\nspec:\n  channel: regular\n  modules: []\n  channel: fast\n"
    )

    problem = _problem(text)

    assert (problem.line, problem.column) == (7, 3)
    assert "duplicate key 'channel' (first defined on line 5)" in problem.message


def test_quoted_and_plain_spellings_of_one_key_are_duplicates() -> None:
    # Both read as the JSON key "name": keeping either would silently lose the other.
    problem = _problem("name: a\n'name': b\n")

    assert "duplicate key 'name'" in problem.message


def test_the_same_key_in_different_mappings_is_fine() -> None:
    assert _data("a: {name: x}\nb: {name: z}\n") == {"a": {"name": "x"}, "b": {"name": "z"}}


def test_two_keys_that_read_the_same_are_a_duplicate() -> None:
    _, problems = parse_yaml("y: 1\ntrue: 2\n", "f.yaml")

    assert [(p.rule, p.line, p.message) for p in problems] == [
        ("C6", 2, "duplicate key 'true' (first defined on line 1)")
    ]


# -- aliases: bounded expansion, no recursion ----------------------------------------------------


def _billion_laughs(levels: int) -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, levels + 1):
        lines.append(f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * 10) + "]")
    return "\n".join(lines) + "\n"


def test_billion_laughs_is_refused_quickly_with_a_c6_diagnostic() -> None:
    text = _billion_laughs(9)  # a9 alone would expand to more than 10**9 nodes

    documents, problems = parse_yaml(text, "bomb.yaml")

    assert len(problems) == 1
    problem = problems[0]
    assert problem.rule == "C6"
    assert "alias bomb" in problem.message
    assert f"{yamlsafe.MAX_EXPANDED_NODES:,}" in problem.message
    # Level i expands to 1 + 10 * (expansion of level i - 1) nodes, level 0 to 11; the budget
    # runs out in the first top-level entry that takes the running total past the limit, and
    # the problem is reported at that entry's key (line i + 1, column 1).
    total, size, level = 1, 11, 0
    while total + size <= yamlsafe.MAX_EXPANDED_NODES:
        total, size, level = total + size, 1 + 10 * size, level + 1
    assert (problem.line, problem.column) == (level + 1, 1)
    assert documents == []


def test_alias_expansion_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(yamlsafe, "MAX_EXPANDED_NODES", 1000)
    text = "a: &a [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
    text += "c: [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"

    assert _problem(text).format() == (
        "f.yaml:3:1: C6 document expands to more than 1,000 nodes (alias bomb?)"
    )


def test_aliases_within_the_budget_are_expanded() -> None:
    data = _data("base: &b [1, 2]\ncopies: [*b, *b, *b]\n")

    assert data == {"base": [1, 2], "copies": [[1, 2], [1, 2], [1, 2]]}


def test_the_budget_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "a: &a [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\nb: [*a, *a, *a, *a, *a]\n"
    assert _data(text)["b"][4] == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]

    monkeypatch.setattr(yamlsafe, "MAX_EXPANDED_NODES", 40)  # 1 + 11 + (1 + 5 * 11) > 40

    problem = _problem(text)
    assert "more than 40 nodes" in problem.message
    assert problem.line == 2


@pytest.mark.parametrize(
    "text",
    ["a: &a [*a]\n", "a: &a {b: *a}\n", "a: &a [1, [2, {c: *a}]]\n"],
    ids=["sequence", "mapping", "indirect"],
)
def test_recursive_alias_is_refused(text: str) -> None:
    problem = _problem(text)

    assert problem.rule == "C6"
    assert "recursive alias" in problem.message
    assert "nesting deeper than" in problem.message
    assert problem.line == 1


# -- tags ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tag"),
    [
        ("obj: !!python/object:os.system {}\n", "python/object:os.system"),
        ("obj: !!python/object/apply:os.system ['true']\n", "python/object/apply:os.system"),
        ("obj: !!python/name:os.system ''\n", "python/name:os.system"),
        ("obj: !!binary aGVsbG8=\n", "binary"),
        ("obj: !!set {a, b}\n", "set"),
        ("obj: !vault |\n  secret\n", "!vault"),
    ],
)
def test_unsupported_tags_are_refused_at_the_tagged_value(text: str, tag: str) -> None:
    problem = _problem(text)

    assert problem.rule == "C6"
    assert problem.message.startswith("unsupported tag")
    assert tag in problem.message
    assert (problem.line, problem.column) == (1, 6)


def test_standard_tags_are_accepted() -> None:
    data = _data("a: !!str 123\nb: !!int '7'\nc: !!map {x: 1}\nd: !!seq [1]\ne: !!null ''\n")

    assert data == {"a": "123", "b": 7, "c": {"x": 1}, "d": [1], "e": None}


@pytest.mark.parametrize(
    "text", ["!vault k: 1\n", "? !!python/name:os.system key\n: 1\n"], ids=["local", "python"]
)
def test_unsupported_tags_on_keys_are_refused(text: str) -> None:
    problem = _problem(text)

    assert problem.message.startswith("unsupported tag")


def test_non_scalar_keys_are_refused() -> None:
    problem = _problem("a: 1\n? [x, y]\n: 2\n")

    assert (problem.line, problem.rule) == (2, "C6")
    assert "keys must be plain scalars" in problem.message


# -- merge keys ----------------------------------------------------------------------------------


def test_merge_keys_work_and_explicit_keys_win() -> None:
    data = _data("base: &base {a: 1, b: 2}\nderived:\n  <<: *base\n  b: 3\n  c: 4\n")

    assert data["derived"] == {"a": 1, "b": 3, "c": 4}
    assert data["base"] == {"a": 1, "b": 2}
    assert "<<" not in data["derived"]


def test_merge_of_several_mappings_earlier_ones_win() -> None:
    text = "x: &x {k: from-x, only-x: 1}\ny: &y {k: from-y, only-y: 2}\nz:\n  <<: [*x, *y]\n"

    assert _data(text)["z"] == {"k": "from-x", "only-x": 1, "only-y": 2}


def test_merge_of_a_scalar_is_refused() -> None:
    problem = _problem("a:\n  <<: 5\n")

    assert problem.rule == "C6"
    assert "merge key" in problem.message


# -- documents -----------------------------------------------------------------------------------


def test_empty_documents_are_skipped_and_keep_their_index() -> None:
    text = "---\n---\na: 1\n---\n# only a comment\n---\n...\n---\nb: 2\n"

    documents, problems = parse_yaml(text, "multi.yaml")

    assert problems == []
    assert [d.data for d in documents] == [{"a": 1}, {"b": 2}]
    assert [d.index for d in documents] == [1, 4]
    assert {d.path for d in documents} == {"multi.yaml"}


def test_an_explicit_null_document_is_not_empty() -> None:
    documents, _ = parse_yaml("--- ~\n---\na: 1\n", "f.yaml")

    assert [d.data for d in documents] == [None, {"a": 1}]


def test_empty_text_and_comments_give_no_documents() -> None:
    assert parse_yaml("", "f.yaml") == ([], [])
    assert parse_yaml("# nothing here\n\n", "f.yaml") == ([], [])


@pytest.mark.parametrize("loader", [None, "pure"])
def test_control_characters_are_one_c6_error_at_their_place(loader: str | None) -> None:
    text = "a: 1\nchannel: regular\x07\n"
    if loader is None:
        _, problems = parse_yaml(text, "f.yaml")
    else:
        _, problems = parse_yaml(text, "f.yaml", loader_class=yaml.SafeLoader)

    assert [p.format() for p in problems] == [
        "f.yaml:2:17: C6 character #x0007 is not allowed in YAML"
    ]


def test_broken_yaml_is_a_c6_diagnostic_at_the_problem() -> None:
    problem = _problem("a: 1\nb: [1, 2\nc: 3\n")

    assert problem.rule == "C6"
    assert problem.message.startswith("invalid YAML")
    assert problem.line >= 2


# -- positions -----------------------------------------------------------------------------------

RUNTIME = """\
apiVersion: reconciler.dev/v1alpha1
kind: Runtime
metadata:
  name: demo
spec:
  modules:
    - name: alpha
    - name: beta
      version: 1.2.0
"""


def _doc(text: str = RUNTIME) -> Document:
    documents, problems = parse_yaml(text, "r.yaml")
    assert problems == []
    return documents[0]


@pytest.mark.parametrize(
    ("pointer", "key", "expected"),
    [
        ((), False, (1, 1)),
        (("kind",), False, (2, 7)),
        (("kind",), True, (2, 1)),
        (("metadata", "name"), False, (4, 9)),
        (("metadata", "name"), True, (4, 3)),
        (("spec", "modules"), False, (7, 5)),
        (("spec", "modules", 0, "name"), False, (7, 13)),
        (("spec", "modules", 1), False, (8, 7)),
        (("spec", "modules", 1, "version"), False, (9, 16)),
        (("spec", "modules", 1, "version"), True, (9, 7)),
    ],
)
def test_position_of_a_pointer(
    pointer: tuple[str | int, ...], key: bool, expected: tuple[int, int]
) -> None:
    assert _doc().position(pointer, key=key) == Position(*expected)


def test_position_of_a_missing_place_is_its_deepest_existing_parent() -> None:
    document = _doc()

    assert document.position(("spec", "modules", 1, "channel")) == Position(8, 7)
    assert document.position(("spec", "modules", 7, "name")) == Position(7, 5)
    assert document.position(("nope", "deeper")) == Position(1, 1)


def test_positions_in_a_later_document_count_from_the_start_of_the_file() -> None:
    documents, _ = parse_yaml("---\n---\na: 1\n---\nb:\n  c: 2\n", "f.yaml")

    assert documents[1].position(("b", "c")) == Position(6, 6)
    assert documents[1].position(("b", "c"), key=True) == Position(6, 3)
    assert documents[0].position(("a",)) == Position(3, 4)


def test_positions_in_flow_style_in_a_later_document() -> None:
    documents, _ = parse_yaml("x: 0\n---\nspec:\n  modules:\n    - name: a\n    - {name: b}\n", "f")
    document = documents[1]

    assert document.position(("spec", "modules", 1, "name")) == Position(6, 14)
    assert document.position(("spec", "modules", 1, "name"), key=True) == Position(6, 8)
    assert document.position(("spec", "nothing", 3)) == Position(4, 3)


def test_diagnostic_carries_the_position_and_the_json_pointer() -> None:
    diagnostic = _doc().diagnostic("C1", "bad", ("spec", "modules", 1, "version"))

    assert diagnostic.format() == "r.yaml:9:16: C1 bad (/spec/modules/1/version)"


class _CountingLoader(yaml.SafeLoader):
    """The pure-Python safe loader, counting how often a file is parsed."""

    created: ClassVar[int] = 0

    def __init__(self, stream: str) -> None:
        type(self).created += 1
        super().__init__(stream)


def test_node_trees_are_composed_only_when_a_position_is_asked_and_once_per_file() -> None:
    _CountingLoader.created = 0
    documents, problems = parse_yaml(
        RUNTIME + "---\n" + RUNTIME, "r.yaml", loader_class=_CountingLoader
    )
    assert problems == []
    assert len(documents) == 2
    assert _CountingLoader.created == 1  # the parse itself; no node tree kept

    assert documents[1].position(("metadata", "name")) == Position(14, 9)
    assert _CountingLoader.created == 2  # composed again, on demand

    documents[0].position(("kind",))
    documents[1].diagnostic("C1", "x", ("spec",))
    assert _CountingLoader.created == 2  # every document of the file reuses that composition


def test_the_default_loader_keeps_no_node_tree_until_a_position_is_asked() -> None:
    documents, _ = parse_yaml("a: 1\n", "f.yaml")
    source = documents[0].source
    assert source is not None

    assert source._nodes is None
    documents[0].position(("a",))
    assert source._nodes is not None


def test_a_document_without_source_text_points_at_the_start() -> None:
    assert Document("f.yaml", 0, {"a": 1}).position(("a",)) == Position(1, 1)


def test_documents_before_a_broken_one_keep_their_positions() -> None:
    documents, problems = parse_yaml("a: 1\n---\nb: [\n", "f.yaml")
    assert len(problems) == 1
    assert [d.data for d in documents] == [{"a": 1}]

    assert documents[0].position(("a",)) == Position(1, 4)


# -- locating diagnostics: each mapping indexed once ---------------------------------------------


def _runtime_with_unknown_fields(count: int) -> str:
    return (
        "apiVersion: reconciler.dev/v1alpha1\nkind: Runtime\nmetadata:\n  name: rt\nspec:\n"
        "  channel: regular\n  cluster:\n    inCluster: true\n"
        + "".join(f"  k{i:05d}: 1\n" for i in range(count))
    )


def test_a_diagnostic_finds_a_key_by_its_json_name() -> None:
    documents, _ = parse_yaml("spec:\n  y: 1\n", "f.yaml")

    position = documents[0].position(("spec", "true"), key=True)

    assert (position.line, position.column) == (2, 3)


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
