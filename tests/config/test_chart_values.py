"""Rule C9 for values: a chart's values.schema.json checks every runtime's merged values at
`validate`, each error at the file and line of the layer that set the value, all in one run."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from reconciler.core.diagnostics import Diagnostic
from reconciler.render import default_renderer
from reconciler.source.loader import load_repo
from tests.support.charts import chart_module_files
from tests.support.http_fakes import CountingServer
from tests.support.repos import API, RepoFactory, dump, module_files, runtime_file

SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "additionalProperties": False,
    "required": ["greeting", "size", "replicas"],
    "properties": {
        "greeting": {"type": "string"},
        "size": {"enum": ["small", "medium", "large"]},
        "replicas": {"type": "integer", "minimum": 1},
    },
}


def _channel(values: dict[str, Any]) -> dict[str, str]:
    spec = {"modules": {"web": "1.0.0"}, "values": {"web": values}}
    document = {"apiVersion": API, "kind": "Channel", "metadata": {"name": "regular"}, "spec": spec}
    return {"channels/regular.yaml": dump(document)}


def _tree(**extra: dict[str, str]) -> dict[str, str]:
    tree = {
        **chart_module_files("web", values={"greeting": "hi"}),
        "modules/web/1.0.0/chart/values.schema.json": json.dumps(SCHEMA, indent=2),
        **_channel({"size": "medium"}),
        **runtime_file("a", "regular", [{"name": "web"}]),
        **runtime_file("b", "regular", [{"name": "web"}]),
    }
    for files in extra.values():
        tree.update(files)
    return tree


def _errors(root: Path) -> list[Diagnostic]:
    validation = load_repo(root, renderer=default_renderer())
    assert validation.repo is None
    return [replace(d, path=d.path.removeprefix(f"{root}/")) for d in validation.diagnostics]


def _line_of(root: Path, path: str, text: str) -> int:
    lines = (root / path).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def test_valid_values_pass_and_render(make_repo: RepoFactory) -> None:
    validation = load_repo(make_repo(_tree()), renderer=default_renderer())
    assert validation.diagnostics == ()
    assert validation.repo is not None
    assert set(validation.repo.rendered) == {("a", "web"), ("b", "web")}


def test_every_error_is_at_the_file_and_line_that_set_the_value(make_repo: RepoFactory) -> None:
    tuned = [{"name": "web", "values": {"replicas": 0}, "valuesFrom": "values/b.yaml"}]
    root = make_repo(
        _tree(
            channel=_channel({"size": "huge"}),
            version={"modules/web/1.0.0/values.yaml": dump({"greeting": 7})},
            runtime=runtime_file("b", "regular", tuned),
            values_from={"values/b.yaml": dump({"colour": "red"})},
            other=runtime_file("c", "regular", [{"name": "nope"}]),
        )
    )
    errors = {(e.path, e.line, e.pointer): e for e in _errors(root)}
    size = errors[
        (
            "channels/regular.yaml",
            _line_of(root, "channels/regular.yaml", "huge"),
            "/spec/values/web/size",
        )
    ]
    assert size.rule == "C9"
    assert "'huge' is not one of" in size.message
    assert "[runtime a and 1 more]" in size.message  # one error, however many runtimes
    greeting = errors[("modules/web/1.0.0/values.yaml", 1, "/greeting")]
    assert "7 is not of type 'string'" in greeting.message
    replicas = errors[
        (
            "runtimes/b.yaml",
            _line_of(root, "runtimes/b.yaml", "replicas"),
            "/spec/modules/0/values/replicas",
        )
    ]
    assert "less than the minimum of 1" in replicas.message
    assert "[runtime b]" in replicas.message
    colour = errors[("values/b.yaml", 1, "/colour")]
    assert "the chart has no value 'colour'" in colour.message
    assert any(e.rule == "C2" and e.path == "runtimes/c.yaml" for e in errors.values())


def test_a_runtime_value_over_a_bad_channel_value_clears_it(make_repo: RepoFactory) -> None:
    fixed = [{"name": "web", "values": {"size": "large"}}]
    root = make_repo(
        _tree(channel=_channel({"size": "huge"}), fix=runtime_file("b", "regular", fixed))
    )
    (error,) = _errors(root)
    assert error.path == "channels/regular.yaml"
    assert error.message.endswith("[runtime a]")


def test_a_default_removed_with_null_is_a_missing_required_value(make_repo: RepoFactory) -> None:
    removed = [{"name": "web", "values": {"size": None}}]
    root = make_repo(_tree(runtime=runtime_file("b", "regular", removed)))
    (error,) = _errors(root)
    assert "'size' is a required property" in error.message
    assert error.path == "runtimes/b.yaml"  # the layer that removed it
    assert error.pointer == "/spec/modules/0/values"


def test_a_schema_that_is_no_json_schema_is_reported_at_it(make_repo: RepoFactory) -> None:
    broken = {"modules/web/1.0.0/chart/values.schema.json": '{"type": "objekt"}'}
    (error,) = _errors(make_repo(_tree(schema=broken)))
    assert error.path == "modules/web/1.0.0/chart/values.schema.json"
    assert "not a valid JSON Schema" in error.message


def test_values_for_a_manifest_module_are_a_warning_where_given(make_repo: RepoFactory) -> None:
    spec = {"modules": {"web": "1.0.0", "plain": "1.0.0"}, "values": {"plain": {"a": 1}}}
    channel = {"apiVersion": API, "kind": "Channel", "metadata": {"name": "regular"}, "spec": spec}
    entries: list[dict[str, Any]] = [{"name": "web"}, {"name": "plain", "values": {"b": 2}}]
    root = make_repo(
        _tree(
            plain=module_files("plain"),
            channel={"channels/regular.yaml": dump(channel)},
            runtime=runtime_file("b", "regular", entries),
        )
    )
    validation = load_repo(root, renderer=default_renderer())
    assert validation.repo is not None  # a warning, not an error
    warnings = {
        (w.path.removeprefix(f"{root}/"), w.pointer): w.message for w in validation.warnings
    }
    unused = "plain 1.0.0 is a manifest, not a chart: these values are not used"
    assert warnings[("channels/regular.yaml", "/spec/values/plain")] == f"{unused} [runtime b]"
    assert warnings[("runtimes/b.yaml", "/spec/modules/1/values")] == f"{unused} [runtime b]"


@pytest.mark.timeout(60)
def test_a_backtracking_schema_pattern_is_a_bounded_located_error(make_repo: RepoFactory) -> None:
    properties = {"greeting": {"pattern": "^(a+)+$"}, "size": {}, "replicas": {}}
    schema = {**SCHEMA, "properties": properties}
    root = make_repo(
        _tree(
            schema={"modules/web/1.0.0/chart/values.schema.json": json.dumps(schema)},
            values={"modules/web/1.0.0/values.yaml": dump({"greeting": "a" * 40 + "!"})},
        )
    )
    (error,) = _errors(root)  # Python's re: about 10^12 steps; RE2, as Helm: linear
    assert (error.rule, error.path) == ("C9", "modules/web/1.0.0/values.yaml")
    assert "greeting: 'aaaa" in error.message
    assert "does not match '^(a+)+$'" in error.message


@pytest.fixture
def served() -> Iterator[CountingServer]:
    """A host that a chart's schema names: every request to it is counted."""
    server = CountingServer(json.dumps({"enum": ["huge"]}).encode())
    try:
        yield server
    finally:
        server.close()


def _schema_naming(reference: dict[str, Any]) -> str:
    schema = {**SCHEMA, "properties": {**SCHEMA["properties"], "size": reference}}  # type: ignore[dict-item]
    return json.dumps(schema, indent=2)


@pytest.mark.parametrize(
    ("keyword", "reference"),
    [
        ("$ref", {"$ref": "URL/size.json"}),
        ("$ref", {"$ref": "size.json"}),  # Helm reads it from file:///size.json, not the chart
        ("$ref", {"$ref": "file:///etc/size.json"}),
        ("$dynamicRef", {"$dynamicRef": "URL/size.json#meta"}),
        ("$schema", {"$schema": "URL/meta.json", "type": "string"}),
    ],
)
def test_a_schema_reference_out_of_the_file_is_refused_at_its_line_and_never_fetched(
    make_repo: RepoFactory, served: CountingServer, keyword: str, reference: dict[str, Any]
) -> None:
    named = {
        k: v.replace("URL", served.url) if isinstance(v, str) else v for k, v in reference.items()
    }
    root = make_repo(
        _tree(schema={"modules/web/1.0.0/chart/values.schema.json": _schema_naming(named)})
    )

    errors = _errors(root)

    (error,) = errors
    path = "modules/web/1.0.0/chart/values.schema.json"
    assert (error.rule, error.path) == ("C6", path)
    assert error.line == _line_of(root, path, f'"{keyword}": "{named[keyword]}"')
    assert error.pointer == f"/properties/size/{keyword.replace('/', '~1')}"
    assert "it would be fetched" in error.message
    assert served.requests == []


def test_references_inside_the_schema_and_known_drafts_pass(make_repo: RepoFactory) -> None:
    schema = {
        **SCHEMA,
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$defs": {"size": {"enum": ["small", "medium", "large"]}},
        "properties": {**SCHEMA["properties"], "size": {"$ref": "#/$defs/size"}},  # type: ignore[dict-item]
    }
    root = make_repo(
        _tree(schema={"modules/web/1.0.0/chart/values.schema.json": json.dumps(schema)})
    )

    validation = load_repo(root, renderer=default_renderer())

    assert validation.repo is not None, [d.format() for d in validation.diagnostics]
