"""The schema checker: the compiled fast path and jsonschema agree, and messages read well.

The fast path (fastjsonschema) only answers "valid?"; a wrong "yes" would hide errors. So every
document of the sample repo and many mutations of each (a field removed, a value of every other
type, an unknown field) must get the same verdict from both validators. Its own checks
(``uniqueItems``, misspelled required fields) do work linear in the document, never pairwise.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler.config import schema
from reconciler.config.schema import SchemaChecker
from reconciler.config.yamlsafe import Document, parse_yaml
from reconciler.source.schemas import load_schemas

ROOT = Path(__file__).parents[2]
SAMPLE_FILES = {
    "Runtime": sorted((ROOT / "sample-repo" / "runtimes").glob("*.yaml")),
    "Module": sorted((ROOT / "sample-repo" / "modules").glob("*/module.yaml")),
    "Channel": sorted((ROOT / "channels").glob("*.yaml")),
    "Settings": [ROOT / "sample-repo" / "reconciler.yaml"],
}
ODD_VALUES: list[Any] = [None, True, 0, -1, 1.5, "", "Not A Name", "x" * 300, [], {}, ["a"]]


def _documents() -> Iterator[tuple[str, Any]]:
    for kind, files in SAMPLE_FILES.items():
        for file in files:
            documents, problems = parse_yaml(file.read_text(encoding="utf-8"), str(file))
            assert not problems
            yield kind, documents[0].data


def _mutations(data: Any) -> Iterator[Any]:
    for path in _paths(data, ()):
        yield _without(data, path)
        for value in ODD_VALUES:
            yield _replaced(data, path, value)
    for path in (*_mapping_paths(data, ()),):
        yield _replaced(data, (*path, "unexpected"), "x")


def _paths(value: Any, path: tuple[Any, ...]) -> Iterator[tuple[Any, ...]]:
    if path:
        yield path
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _paths(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _paths(child, (*path, index))


def _mapping_paths(value: Any, path: tuple[Any, ...]) -> Iterator[tuple[Any, ...]]:
    if isinstance(value, dict):
        yield path
        for key, child in value.items():
            yield from _mapping_paths(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _mapping_paths(child, (*path, index))


def _without(data: Any, path: tuple[Any, ...]) -> Any:
    result = copy.deepcopy(data)
    parent = result
    for step in path[:-1]:
        parent = parent[step]
    del parent[path[-1]]
    return result


def _replaced(data: Any, path: tuple[Any, ...], value: Any) -> Any:
    result = copy.deepcopy(data)
    parent = result
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = value
    return result


def test_fast_and_full_validators_agree_on_every_mutation() -> None:
    schemas = load_schemas()
    fast, full = SchemaChecker(schemas), SchemaChecker(schemas, fast=False)
    checked = disagreements = 0
    invalid = 0
    for kind, data in _documents():
        assert full.is_valid(kind, data), kind
        for mutated in _mutations(data):
            verdict = full.is_valid(kind, mutated)
            invalid += not verdict
            checked += 1
            disagreements += fast.is_valid(kind, mutated) != verdict
    assert checked > 1000
    assert invalid > checked // 2  # the mutations do exercise the schemas
    assert disagreements == 0


def _check(kind: str, text: str) -> list[str]:
    documents, problems = parse_yaml(text, "f.yaml")
    assert not problems
    checker = SchemaChecker(load_schemas())
    return [d.format() for d in checker.check(kind, documents[0])]


RUNTIME = """\
apiVersion: reconciler.dev/v1alpha1
kind: Runtime
metadata:
  name: {name}
spec:
  channel: regular
  cluster: {cluster}
  modules:
    - name: serverless
      strategy: {strategy}
"""


@pytest.mark.parametrize(
    ("name", "cluster", "strategy", "expected"),
    [
        (
            "prod",
            "{context: a}",
            "CreateAndDeleet",
            "f.yaml:10:17: C1 spec.modules[0].strategy is not one of: CreateAndDelete, Ignore; "
            "did you mean 'CreateAndDelete'? (/spec/modules/0/strategy)",
        ),
        (
            "Prod_EU",
            "{context: a}",
            "Ignore",
            "f.yaml:4:9: C1 metadata.name does not match the pattern of a DNS-1123 label "
            "(lower-case letters, digits and '-', starting and ending with a letter or digit) "
            "(/metadata/name)",
        ),
        (
            "prod",
            "{context: a, inCluster: true}",
            "Ignore",
            "f.yaml:7:12: C1 needs exactly one of: kubeconfigSecret, kubeconfigFile, context, "
            "inCluster (/spec/cluster)",
        ),
        (
            "prod",
            "{}",
            "Ignore",
            "f.yaml:7:12: C1 needs exactly one of: kubeconfigSecret, kubeconfigFile, context, "
            "inCluster (/spec/cluster)",
        ),
        (
            "prod",
            "{contxt: a}",
            "Ignore",
            "f.yaml:7:13: C1 unknown field 'contxt'; did you mean 'context'? "
            "(/spec/cluster/contxt)",
        ),
    ],
)
def test_messages_read_like_a_compiler(
    name: str, cluster: str, strategy: str, expected: str
) -> None:
    text = RUNTIME.format(name=name, cluster=cluster, strategy=strategy)

    assert expected in _check("Runtime", text)


def test_missing_field_and_wrong_type_are_named() -> None:
    text = "apiVersion: reconciler.dev/v1alpha1\nkind: Channel\nmetadata: {name: a}\nspec: []\n"

    assert _check("Channel", text) == [
        "f.yaml:4:7: C1 must be a mapping, not a list (/spec)",
    ]
    text = "apiVersion: reconciler.dev/v1alpha1\nkind: Channel\nmetadata: {name: a}\n"
    assert _check("Channel", text) == ["f.yaml:1:1: C1 missing required field 'spec'"]


def test_long_values_are_not_repeated_in_messages() -> None:
    secret = "s3cr3t-" * 20
    text = RUNTIME.format(name="prod", cluster="{context: a}", strategy=secret)

    messages = _check("Runtime", text)
    assert messages
    assert all(secret not in m for m in messages)


def test_a_valid_document_has_no_diagnostics() -> None:
    document = Document("x", 0, next(d for k, d in _documents() if k == "Runtime"))

    assert SchemaChecker(load_schemas()).check("Runtime", document) == []


def test_validation_never_changes_the_documents() -> None:
    """A parsed file may be shared by two revisions; checking it must not fill in defaults."""
    checker = SchemaChecker(load_schemas())
    for kind, data in _documents():
        before = copy.deepcopy(data)
        document = Document("x", 0, data)
        checker.check(kind, document)
        checker.check(kind, document)
        assert data == before, kind


#: Fails every pattern and has no token shape: only the messages themselves can keep it out.
PASTED = "Hunter2_s3cr3t"
_HEAD = "apiVersion: reconciler.dev/v1alpha1\nkind: {kind}\nmetadata: {{name: {name}{labels}}}\n"


def _doc(kind: str, spec: str, name: str = "a", labels: str = "") -> str:
    return _HEAD.format(kind=kind, name=name, labels=labels) + spec


@pytest.mark.parametrize(
    ("kind", "text", "expected"),
    [
        (
            "Runtime",
            _doc("Runtime", "spec: {channel: a, cluster: {context: a}}\n", name=PASTED),
            "C1 metadata.name does not match the pattern of a DNS-1123 label",
        ),
        (
            "Runtime",
            _doc(
                "Runtime",
                "spec: {channel: a, cluster: {context: a}}\n",
                labels=f", labels: {{team: {PASTED * 5}}}",
            ),
            "C1 metadata.labels.team is longer than 63 characters (70) (/metadata/labels/team)",
        ),
        (
            "Runtime",
            _doc(
                "Runtime",
                f"spec: {{channel: a, cluster: {{context: a}}, modules: "
                f"[{{name: m, strategy: {PASTED}}}]}}\n",
            ),
            "C1 spec.modules[0].strategy is not one of: CreateAndDelete, Ignore",
        ),
        (
            "Runtime",
            _doc("Runtime", "spec: {channel: a, cluster: {context: a}}\n").replace(
                "kind: Runtime", f"kind: {PASTED}"
            ),
            "C1 kind must be 'Runtime' (/kind)",
        ),
        (
            "Runtime",
            _doc(
                "Runtime",
                "spec: {channel: a, cluster: {context: a}, maintenanceWindow: "
                f"{{days: [Sat], start: {PASTED}, duration: 1h}}}}\n",
            ),
            "C1 spec.maintenanceWindow.start does not match the pattern ^([01][0-9]|2[0-3])",
        ),
        (
            "Channel",
            _doc("Channel", f"spec: {{modules: {{{PASTED}: 1.0.0}}}}\n"),
            "f.yaml:4:18: C1 a key of spec.modules does not match the pattern of a DNS-1123 "
            "label (lower-case letters, digits and '-', starting and ending with a letter or "
            "digit) (/spec/modules)",
        ),
        (
            "Channel",
            _doc("Channel", f"spec: {{modules: {{alpha: {PASTED}}}}}\n"),
            "C1 spec.modules.alpha is not a semantic version (e.g. 1.2.3 or 1.3.0-rc.1)",
        ),
        (
            "Settings",
            _doc("Settings", f"spec: {{channelsFrom: {{path: {PASTED}, git: {PASTED}}}}}\n"),
            "C1 needs exactly one of: path, git (/spec/channelsFrom)",
        ),
        (
            "Settings",
            _doc("Settings", "spec: {deletionBrake: {maxDeletionsPerSync: -84736251}}\n"),
            "C1 spec.deletionBrake.maxDeletionsPerSync must be at least 0",
        ),
    ],
    ids=["pattern", "maxLength", "enum", "const", "other-pattern", "key", "semver", "oneOf", "min"],
)
def test_a_value_that_fails_a_check_is_never_shown(kind: str, text: str, expected: str) -> None:
    messages = _check(kind, text)

    assert any(expected in m for m in messages), messages
    assert not [m for m in messages if PASTED in m or "84736251" in m]


# -- the schema checker's own quadratic paths ----------------------------------------------------


def _runtime_with_unknown_fields(count: int) -> str:
    return (
        "apiVersion: reconciler.dev/v1alpha1\nkind: Runtime\nmetadata:\n  name: rt\nspec:\n"
        "  channel: regular\n  cluster:\n    inCluster: true\n"
        + "".join(f"  k{i:05d}: 1\n" for i in range(count))
    )


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
