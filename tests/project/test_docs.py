"""docs/config-reference.md is generated from schemas/ and must not go stale."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from reconciler.source.schemas import load_schemas
from reconciler.tools.docgen import DEFAULT_OUTPUT, main, render_reference

REPO = Path(__file__).resolve().parents[2]


def test_committed_reference_is_up_to_date() -> None:
    committed = DEFAULT_OUTPUT.read_text(encoding="utf-8")

    assert committed == render_reference(load_schemas()), (
        "docs/config-reference.md is stale: regenerate it with `python -m reconciler.tools.docgen`"
    )


def _row_paths(schema: Mapping[str, Any], root: Mapping[str, Any], path: str) -> Iterator[str]:
    """Regexes of the table paths of every field below ``schema``; map keys are any ``<word>``."""
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        schema = {**root["$defs"][ref.removeprefix("#/$defs/")], **schema}
    for name, child in schema.get("properties", {}).items():
        child_path = f"{path}\\.{re.escape(name)}" if path else re.escape(name)
        yield child_path
        yield from _row_paths(child, root, child_path)
    extra = schema.get("additionalProperties")
    if isinstance(extra, Mapping):
        yield f"{path}\\.<\\w+>"
        yield from _row_paths(extra, root, f"{path}\\.<\\w+>")
    items = schema.get("items")
    if isinstance(items, Mapping):
        yield f"{path}\\[\\]"
        yield from _row_paths(items, root, f"{path}\\[\\]")


def test_every_field_of_every_schema_is_documented() -> None:
    schemas = load_schemas()
    page = render_reference(schemas)

    assert page == render_reference(schemas), "the page is not deterministic"
    assert page.endswith("\n")
    assert not page.endswith("\n\n")
    for kind, schema in schemas.items():
        section = page.split(f"\n## {kind}\n", 1)[1].split("\n## ", 1)[0]
        paths = list(_row_paths(schema, schema, ""))
        assert paths, kind
        for path in paths:
            assert re.search(f"^\\| `{path}` \\|", section, re.MULTILINE), (kind, path)


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("spec.modules[].strategy", "One of `CreateAndDelete` or `Ignore`."),
        ("spec.cluster", "Exactly one of `kubeconfigSecret`, `kubeconfigFile`, `context` or"),
        ("spec.cluster.kubeconfigFile", "Must not be `.` or `..`."),
        ("spec.maintenanceWindow.start", "`^([01][0-9]\\|2[0-3]):[0-5][0-9]$`"),
        ("spec.maintenanceWindow.days", "At least 1 item. No duplicates."),
        ("spec.maintenanceWindow.days[]", "`Mon`, `Tue`"),
    ],
)
def test_runtime_rows_carry_the_constraints(path: str, text: str) -> None:
    page = render_reference(load_schemas())
    section = page.split("\n## Runtime\n", 1)[1].split("\n## ", 1)[0]

    row = next(line for line in section.splitlines() if line.startswith(f"| `{path}` |"))
    assert text in row


def test_local_refs_are_followed_and_recursion_stops() -> None:
    node = {
        "type": "object",
        "description": "A node.",
        "properties": {
            "kids": {"type": "array", "description": "Kids.", "items": {"$ref": "#/$defs/node"}},
        },
    }
    schema = {"$defs": {"node": node}, "properties": {"root": {"$ref": "#/$defs/node"}}}

    page = render_reference({"Tree": schema})

    assert "| `root.kids[]` | object |" in page
    assert "recursive" in page
    assert "root.kids[].kids" not in page


def test_check_flags_a_stale_page_and_passes_after_regeneration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "reference.md"
    page.write_text("# old\n", encoding="utf-8")

    assert main(["--check", "--output", str(page)]) == 1
    assert "python -m reconciler.tools.docgen" in capsys.readouterr().err
    assert main(["--output", str(page)]) == 0
    assert main(["--check", "--output", str(page)]) == 0
    assert page.read_text(encoding="utf-8") == render_reference(load_schemas())


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


#: A Markdown link's target: ``[text](target)``; and an inline code span, which holds none.
LINK = re.compile(r"\]\(([^)\s]+)\)")
CODE = re.compile(r"`[^`\n]*`")


@pytest.mark.parametrize(
    "page", ["README.md", *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md"))]
)
def test_every_relative_link_stays_in_the_repository_and_resolves(page: str) -> None:
    """No link leaves the repository (as ../shared did, which a clone of it lacks)."""
    source = REPO / page
    bad = []
    for target in LINK.findall(CODE.sub("", source.read_text(encoding="utf-8"))):
        path = target.split("#", 1)[0]
        if not path or "://" in path or path.startswith("mailto:"):
            continue
        resolved = (source.parent / path).resolve()
        if not resolved.is_relative_to(REPO) or not resolved.exists():
            bad.append(target)

    assert bad == []
