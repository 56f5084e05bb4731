"""docs/config-reference.md is generated from schemas/ and must not go stale."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from reconciler.docgen import DEFAULT_OUTPUT, main, render_reference
from reconciler.schemafiles import load_schemas


def test_committed_reference_is_up_to_date() -> None:
    committed = DEFAULT_OUTPUT.read_text(encoding="utf-8")

    assert committed == render_reference(load_schemas()), (
        "docs/config-reference.md is stale: run `python -m reconciler.docgen`"
    )


def _property_names(schema: Mapping[str, Any]) -> Iterator[str]:
    for name, child in schema.get("properties", {}).items():
        yield name
        yield from _property_names(child)
    for key in ("items", "additionalProperties"):
        child = schema.get(key)
        if isinstance(child, Mapping):
            yield from _property_names(child)


def test_every_field_of_every_schema_is_documented() -> None:
    schemas = load_schemas()
    page = render_reference(schemas)

    for kind, schema in schemas.items():
        section = page.split(f"## {kind}\n", 1)[1].split("\n## ", 1)[0]
        for name in _property_names(schema):
            assert f".{name}`" in section or f"`{name}`" in section, (kind, name)


def test_check_flags_a_stale_page_and_passes_after_regeneration(tmp_path: Path) -> None:
    page = tmp_path / "reference.md"
    page.write_text("# old\n", encoding="utf-8")

    assert main(["--check", "--output", str(page)]) == 1
    assert main(["--output", str(page)]) == 0
    assert main(["--check", "--output", str(page)]) == 0


def _nodes(schema: Mapping[str, Any], path: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for name, child in schema.get("properties", {}).items():
        yield f"{path}.{name}", child
        yield from _nodes(child, f"{path}.{name}")
    for key in ("items", "additionalProperties"):
        child = schema.get(key)
        if isinstance(child, Mapping):
            yield f"{path}[{key}]", child
            yield from _nodes(child, f"{path}[{key}]")


def test_schemas_describe_every_field_and_refuse_unknown_ones() -> None:
    for kind, schema in load_schemas().items():
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        for path, node in _nodes(schema, kind):
            assert node.get("description"), f"{path} has no description"
            if node.get("type") == "object" and "properties" in node:
                assert node.get("additionalProperties") is False, f"{path} allows unknown fields"


def test_runtime_operations_page_lists_every_stage_and_step() -> None:
    from reconciler.operations.steps import BUILTIN_STAGES

    page = (DEFAULT_OUTPUT.parent / "runtime-operations.md").read_text(encoding="utf-8")
    for kind, stages in BUILTIN_STAGES.items():
        assert f"### {str(kind).capitalize()}" in page
        for stage, steps in stages:
            for step in steps:
                assert f"| {stage} | `{step.name}` | {step.domain} | {step.description}" in page
