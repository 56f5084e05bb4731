"""Generates ``docs/config-reference.md`` from the JSON Schemas in ``schemas/``.

The schemas' ``description`` fields are the reference documentation of the config format; this
module lays them out as one Markdown page, one table of fields per kind. Run
``python -m reconciler.docgen`` after changing a schema (``--check`` tells whether the page is
stale; a test runs that check). :func:`render_reference` is pure; :func:`main` does the I/O.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler.schema import DNS_LABEL_PATTERN, SEMVER_PATTERN_PREFIX
from reconciler.schemafiles import load_schemas

DEFAULT_OUTPUT = Path(__file__).resolve().parent.parent / "docs" / "config-reference.md"

LOCATIONS = {
    "Runtime": "`runtimes/<name>.yaml`, one runtime per file; "
    "the file name equals `metadata.name`.",
    "Module": "`modules/<name>/module.yaml`; each version is a folder `modules/<name>/<semver>/` "
    "with `manifest.yaml` (the operator manifest, multi-document) and an optional `default.yaml` "
    "(the default configuration custom resource, one document).",
    "Channel": "`channels/<name>.yaml`, or the folder `reconciler.yaml` names in "
    "`spec.channelsFrom`; the file name equals `metadata.name`.",
    "Settings": "`reconciler.yaml` at the root of the config repo (optional).",
}


@dataclass(frozen=True, slots=True)
class Field:
    """One row of a kind's table."""

    path: str
    type: str
    required: bool
    default: str
    description: str


def render_reference(schemas: Mapping[str, Mapping[str, Any]]) -> str:
    """The whole reference page as Markdown."""
    lines = [
        "# Config reference",
        "",
        "<!-- Generated from schemas/ by `python -m reconciler.docgen`; do not edit by hand. -->",
        "",
        "Every document has `apiVersion: reconciler.dev/v1alpha1`, a `kind`, `metadata.name` "
        "and a `spec`. Unknown fields are errors (rule C1). `reconciler validate` checks all of "
        "it and the rules between files (C2-C6).",
        "",
        *(f"- [{kind}](#{kind.lower()})" for kind in schemas),
        "",
    ]
    for kind, schema in schemas.items():
        lines.extend(_kind_section(kind, schema))
    return "\n".join(lines).rstrip("\n") + "\n"


def _kind_section(kind: str, schema: Mapping[str, Any]) -> list[str]:
    lines = [f"## {kind}", "", str(schema.get("description", "")).strip(), ""]
    if kind in LOCATIONS:
        lines += [f"Where: {LOCATIONS[kind]}", ""]
    lines += [
        "| Field | Type | Required | Default | Description |",
        "|---|---|---|---|---|",
    ]
    for field in fields_of(schema):
        lines.append(
            f"| `{field.path}` | {_cell(field.type)} | {'yes' if field.required else ''} "
            f"| {_cell(field.default)} | {_cell(field.description)} |"
        )
    lines.append("")
    return lines


def fields_of(schema: Mapping[str, Any], prefix: str = "") -> Iterator[Field]:
    """Every field of ``schema``, depth first, with dotted paths."""
    required = set(schema.get("required", ()))
    for name, child in schema.get("properties", {}).items():
        path = f"{prefix}.{name}" if prefix else name
        yield _field(path, child, name in required)
        yield from _children(child, path)
    extra = schema.get("additionalProperties")
    if isinstance(extra, Mapping):
        key = _key_name(schema)
        path = f"{prefix}.<{key}>" if prefix else f"<{key}>"
        yield _field(path, extra, False)
        yield from _children(extra, path)


def _children(schema: Mapping[str, Any], path: str) -> Iterator[Field]:
    yield from fields_of(schema, path)
    items = schema.get("items")
    if isinstance(items, Mapping) and ("properties" in items or "additionalProperties" in items):
        yield from fields_of(items, f"{path}[]")


def _key_name(schema: Mapping[str, Any]) -> str:
    description = str(schema.get("description", "")).lower()
    for word in ("module", "version", "label", "annotation"):
        if word in description:
            return word
    return "key"


def _field(path: str, schema: Mapping[str, Any], required: bool) -> Field:
    default = schema.get("default")
    return Field(
        path=path,
        type=_type(schema),
        required=required,
        default="" if default is None else f"`{_literal(default)}`",
        description=_describe(schema),
    )


def _describe(schema: Mapping[str, Any]) -> str:
    """The schema's description followed by the constraints it does not already state."""
    text = str(schema.get("description", "")).strip()
    plain = text.replace("`", "").lower()
    notes = [n for n in _constraints(schema) if n.replace("`", "").rstrip(".").lower() not in plain]
    return " ".join([text, *notes]).strip()


def _pattern_name(pattern: str) -> str:
    if pattern == DNS_LABEL_PATTERN:
        return "a DNS-1123 label"
    if pattern.startswith(SEMVER_PATTERN_PREFIX):
        return "a semantic version (`1.2.3`, `1.3.0-rc.1`)"
    return f"pattern `{pattern}`"


def _type(schema: Mapping[str, Any]) -> str:
    if "const" in schema:
        return "constant"
    if "enum" in schema:
        return "enum"
    kind = schema.get("type")
    if kind == "array":
        items = schema.get("items", {})
        inner = _type(items) if isinstance(items, Mapping) else "any"
        return f"list of {inner}"
    if kind == "object":
        return (
            "map" if "additionalProperties" in schema and not schema.get("properties") else "object"
        )
    return str(kind) if kind else "any"


def _constraints(schema: Mapping[str, Any]) -> list[str]:
    notes: list[str] = []
    if "const" in schema and _literal(schema["const"]) not in str(schema.get("description")):
        notes.append(f"Must be `{_literal(schema['const'])}`.")
    if "enum" in schema:
        notes.append("One of " + ", ".join(f"`{_literal(v)}`" for v in schema["enum"]) + ".")
    items = schema.get("items")
    if isinstance(items, Mapping) and "enum" in items:
        notes.append("Each one of " + ", ".join(f"`{v}`" for v in items["enum"]) + ".")
    if schema.get("minProperties") == 1 and schema.get("maxProperties") == 1:
        names = ", ".join(f"`{n}`" for n in schema.get("properties", {}))
        notes.append(f"Exactly one of {names}.")
    if "oneOf" in schema:
        notes.append(_one_of(schema["oneOf"]))
    notes.extend(_bounds(schema))
    if "pattern" in schema:
        notes.append(f"Must be {_pattern_name(schema['pattern'])}.")
    keys = schema.get("propertyNames")
    if isinstance(keys, Mapping) and "pattern" in keys:
        notes.append(f"Keys must be {_pattern_name(keys['pattern'])}.")
    return notes


def _one_of(options: Sequence[Mapping[str, Any]]) -> str:
    parts = [" + ".join(f"`{n}`" for n in option.get("required", ())) for option in options]
    return "Either " + ", or ".join(p for p in parts if p) + "."


def _bounds(schema: Mapping[str, Any]) -> Iterator[str]:
    labels = {
        "minLength": "At least {} characters.",
        "maxLength": "At most {} characters.",
        "minItems": "At least {} items.",
        "minimum": "Minimum {}.",
    }
    for key, text in labels.items():
        if key in schema:
            yield text.format(schema[key])
    if schema.get("uniqueItems"):
        yield "No duplicates."


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value == []:
        return "[]"
    return str(value)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def main(argv: list[str] | None = None) -> int:
    """Write the reference page, or with ``--check`` tell whether it is stale (exit 1)."""
    parser = argparse.ArgumentParser(prog="python -m reconciler.docgen", description=__doc__)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="page to write")
    parser.add_argument("--check", action="store_true", help="exit 1 if the page is stale")
    args = parser.parse_args(argv)
    expected = render_reference(load_schemas())
    output: Path = args.output
    if args.check:
        current = output.read_text(encoding="utf-8") if output.exists() else ""
        if current != expected:
            print(f"{output} is stale: run python -m reconciler.docgen", file=sys.stderr)
            return 1
        return 0
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(expected, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
