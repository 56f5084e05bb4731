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
