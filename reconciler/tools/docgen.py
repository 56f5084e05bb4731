"""Generates ``docs/config-reference.md``, the reference of the config format, from ``schemas/``.

The JSON Schemas are the single source of truth for the config repo's document kinds; their
``description`` fields are written for the platform engineers who write the files. This module
lays them out as one Markdown page: per kind, where its files live and a table of every field
(dotted path, type, required, default, description and constraints).

Run ``python -m reconciler.tools.docgen`` after changing a schema; ``--check`` exits 1 when the
page is stale (a test runs that check). :func:`render_reference` is pure; :func:`main` does the I/O.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler.config.schema import DNS_LABEL_PATTERN, SEMVER_PATTERN_PREFIX
from reconciler.source.schemas import load_schemas

DEFAULT_OUTPUT = Path(__file__).resolve().parents[2] / "docs" / "config-reference.md"
REGENERATE = "python -m reconciler.tools.docgen"

#: Where the documents of each kind live in the config repo.
LOCATIONS: dict[str, str] = {
    "Runtime": "`runtimes/<name>.yaml`, one runtime per file; "
    "the file name equals `metadata.name`.",
    "Module": "`modules/<name>/module.yaml`; each version is a folder `modules/<name>/<semver>/` "
    "with `manifest.yaml` (the operator manifest, multi-document) and an optional `default.yaml` "
    "(the default configuration custom resource, one document).",
    "Channel": "`channels/<name>.yaml`, or the folder `reconciler.yaml` names in "
    "`spec.channelsFrom`; the file name equals `metadata.name`.",
    "Settings": "`reconciler.yaml` at the root of the config repo (optional).",
}

_NOTATION = (
    "In the tables, `a.b` is field `b` of the object `a`; `a[]` is each item of the list `a`; "
    "`a.<key>` is each entry of the map `a`, under a key you choose. Required is blank for list "
    "items and map entries. A default applies when the field is left out."
)


@dataclass(frozen=True, slots=True)
class Field:
    """One row of a kind's table."""

    path: str
    type: str
    required: bool | None  # None: a list item or map entry, where the question does not arise
    default: str
    description: str


def render_reference(schemas: Mapping[str, Mapping[str, Any]]) -> str:
    """The whole reference page as Markdown, ending with exactly one newline."""
    lines = [
        "# Config reference",
        "",
        f"_Generated from `schemas/` by `{REGENERATE}`; do not edit by hand: change the schema "
        "and run the command again._",
        "",
        "Every document has `apiVersion: reconciler.dev/v1alpha1`, a `kind`, `metadata.name` "
        "and (except Settings) a `spec`. Unknown fields are errors (rule C1). "
        "`reconciler validate` checks all of it and the rules between files (C2-C6).",
        "",
        _NOTATION,
        "",
        "## Contents",
        "",
    ]
    for kind, schema in schemas.items():
        summary = _first_sentence(str(schema.get("description", "")))
        lines.append(f"- [{kind}](#{_anchor(kind)})" + (f": {summary}" if summary else ""))
    lines.append("")
    for kind, schema in schemas.items():
        lines.extend(_kind_section(kind, schema))
    return "\n".join(lines).rstrip("\n") + "\n"


def _kind_section(kind: str, schema: Mapping[str, Any]) -> list[str]:
    lines = [f"## {kind}", ""]
    title = str(schema.get("title", "")).strip()
    if title and title != kind:
        lines += [f"_{title}_", ""]
    description = str(schema.get("description", "")).strip()
    if description:
        lines += [description, ""]
    if kind in LOCATIONS:
        lines += [f"**File:** {LOCATIONS[kind]}", ""]
    lines += [
        "| Field | Type | Required | Default | Description |",
        "|---|---|---|---|---|",
    ]
    for field in fields_of(schema):
        required = "" if field.required is None else ("yes" if field.required else "no")
        lines.append(
            f"| `{_cell(field.path)}` | {_cell(field.type)} | {required} "
            f"| {_cell(field.default)} | {_cell(field.description)} |"
        )
    lines.append("")
    return lines


def fields_of(schema: Mapping[str, Any]) -> list[Field]:
    """Every field of a document schema, depth first, with dotted paths; ``$ref``s followed."""
    rows: list[Field] = []
    _walk_children(schema, "", schema, frozenset(), rows)
    return rows


def _walk_children(
    schema: Mapping[str, Any],
    path: str,
    root: Mapping[str, Any],
    expanding: frozenset[str],
    rows: list[Field],
) -> None:
    required = set(schema.get("required", ()))
    for name, child in schema.get("properties", {}).items():
        child_path = f"{path}.{name}" if path else name
        _walk(child, child_path, name in required, root, expanding, rows)
    extra = schema.get("additionalProperties")
    if isinstance(extra, Mapping):
        entry = f"<{_key_name(path)}>"
        _walk(extra, f"{path}.{entry}" if path else entry, None, root, expanding, rows)
    items = schema.get("items")
    if isinstance(items, Mapping):
        _walk(items, f"{path}[]", None, root, expanding, rows)


def _walk(
    schema: Mapping[str, Any],
    path: str,
    required: bool | None,
    root: Mapping[str, Any],
    expanding: frozenset[str],
    rows: list[Field],
) -> None:
    ref = schema.get("$ref")
    resolved = _resolve(schema, root)
    recursive = isinstance(ref, str) and ref in expanding
    default = resolved.get("default")
    description = _describe(resolved, root)
    if recursive:
        description += f" Same shape as its enclosing `{ref}` (recursive)."
    rows.append(
        Field(
            path=path,
            type=_type(resolved, root),
            required=required,
            default="" if "default" not in resolved else f"`{_literal(default)}`",
            description=description.strip(),
        )
    )
    if not recursive:
        inner = expanding | {ref} if isinstance(ref, str) else expanding
        _walk_children(resolved, path, root, inner, rows)


def _resolve(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    """``schema`` with a local ``$ref`` (``#/$defs/...``) merged in; its own keywords win."""
    seen: set[str] = set()
    current: Mapping[str, Any] = schema
    while isinstance(ref := current.get("$ref"), str) and ref.startswith("#") and ref not in seen:
        seen.add(ref)
        target: Any = root
        for part in ref[1:].split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            target = target[int(part)] if isinstance(target, list) else target[part]
        own = {key: value for key, value in current.items() if key != "$ref"}
        current = {**target, **own}
    return current


def _key_name(path: str) -> str:
    """A placeholder for a map's keys, from the map's field name: ``modules`` -> ``module``."""
    name = re.sub(r"\W+$", "", path.rsplit(".", 1)[-1].removesuffix("[]"))
    if name.endswith("ies") and len(name) > 3:
        return name[:-3] + "y"
    if name.endswith("s") and not name.endswith("ss") and len(name) > 1:
        return name[:-1]
    return "key"


def _type(schema: Mapping[str, Any], root: Mapping[str, Any]) -> str:
    if "const" in schema:
        return _json_type(schema["const"])
    if "enum" in schema:
        return " or ".join(sorted({_json_type(value) for value in schema["enum"]}))
    kind = schema.get("type")
    if isinstance(kind, list):
        return " or ".join(_type({**schema, "type": one}, root) for one in kind)
    if kind == "array":
        items = schema.get("items")
        return (
            f"list of {_type(_resolve(items, root), root)}"
            if isinstance(items, Mapping)
            else "list"
        )
    if kind == "object":
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping) and not schema.get("properties"):
            return f"map of {_type(_resolve(extra, root), root)}"
        return "object"
    if kind is None:
        options = schema.get("oneOf") or schema.get("anyOf")
        if isinstance(options, list):
            types = [_type(_resolve(o, root), root) for o in options if isinstance(o, Mapping)]
            known = [t for t in dict.fromkeys(types) if t != "any"]
            if known:
                return " or ".join(known)
        return "any"
    return str(kind)


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    return "list" if isinstance(value, list) else "object"


def _describe(schema: Mapping[str, Any], root: Mapping[str, Any]) -> str:
    """The schema's description followed by the constraints it does not already state."""
    text = str(schema.get("description", "")).strip()
    plain = _plain(text)
    notes = [_sentence(n) for n in _constraints(schema, root) if not _stated(n, plain)]
    return " ".join([text, *notes]).strip()


def _stated(note: str, plain: str) -> bool:
    """Whether a description (lower case, no backticks) already says what ``note`` says."""
    note = _plain(note).rstrip(".")
    if note in plain:
        return True
    return any(term in note and term in plain for term in _PATTERN_TERMS)


def _constraints(schema: Mapping[str, Any], root: Mapping[str, Any]) -> list[str]:
    """The constraints of one schema as lower-case phrases, in a fixed order."""
    notes: list[str] = []
    if "const" in schema and f"`{_literal(schema['const'])}`" not in str(schema.get("description")):
        notes.append(f"must be `{_literal(schema['const'])}`")
    if "enum" in schema:
        notes.append("one of " + _alternatives(schema["enum"], "or"))
    if "pattern" in schema:
        notes.append(_pattern(schema["pattern"]))
    if "format" in schema:
        notes.append(f"format `{schema['format']}`")
    notes.extend(_bounds(schema, "Length", "character"))
    notes.extend(_bounds(schema, "Items", "item"))
    properties = schema.get("properties", {})
    if schema.get("minProperties") == 1 and schema.get("maxProperties") == 1 and properties:
        notes.append("exactly one of " + _alternatives(list(properties), "or", literal=False))
    else:
        notes.extend(_bounds(schema, "Properties", "entry"))
    notes.extend(_numbers(schema))
    if schema.get("uniqueItems"):
        notes.append("no duplicates")
    forbidden = schema.get("not")
    if isinstance(forbidden, Mapping):
        notes.extend(_negation(forbidden))
    keys = schema.get("propertyNames")
    if isinstance(keys, Mapping):
        key_notes = _constraints(_resolve(keys, root), root)
        if key_notes:
            notes.append("keys: " + ", ".join(key_notes))
    for keyword in ("oneOf", "anyOf"):
        options = schema.get(keyword)
        if isinstance(options, list) and options:
            notes.append(_options(options, keyword, root))
    if schema.get("deprecated"):
        notes.append("deprecated")
    examples = schema.get("examples")
    if isinstance(examples, list) and examples:
        notes.append("e.g. " + ", ".join(f"`{_literal(e)}`" for e in examples))
    return notes


def _bounds(schema: Mapping[str, Any], suffix: str, noun: str) -> Iterator[str]:
    low, high = schema.get(f"min{suffix}"), schema.get(f"max{suffix}")
    if low == 1 and high is None and suffix == "Length":
        yield "must not be empty"
        return
    if low is not None and high is not None:
        yield f"{low} to {high} {_plural(noun, high)}"
    elif low is not None:
        yield f"at least {low} {_plural(noun, low)}"
    elif high is not None:
        yield f"at most {high} {_plural(noun, high)}"


def _numbers(schema: Mapping[str, Any]) -> Iterator[str]:
    phrases = {
        "minimum": "at least {}",
        "exclusiveMinimum": "greater than {}",
        "maximum": "at most {}",
        "exclusiveMaximum": "less than {}",
        "multipleOf": "a multiple of {}",
    }
    for keyword, phrase in phrases.items():
        if keyword in schema:
            yield phrase.format(_literal(schema[keyword]))


def _negation(forbidden: Mapping[str, Any]) -> Iterator[str]:
    if "enum" in forbidden:
        yield "must not be " + _alternatives(forbidden["enum"], "or")
    if "const" in forbidden:
        yield f"must not be `{_literal(forbidden['const'])}`"
    if "required" in forbidden:
        yield "must not set " + _alternatives(forbidden["required"], "or", literal=False)


def _options(options: Sequence[Any], keyword: str, root: Mapping[str, Any]) -> str:
    """A plain summary of ``oneOf``/``anyOf`` alternatives."""
    parts: list[str] = []
    by_fields = True
    for option in options:
        if not isinstance(option, Mapping):
            continue
        option = _resolve(option, root)
        given = option.get("required", [])
        words: list[str] = []
        if given:
            words.append(_alternatives(given, "and", literal=False))
        else:
            by_fields = False
            if "type" in option or "const" in option or "enum" in option:
                words.append(_article(_type(option, root)))
        absent = _absent_fields(option.get("not"))
        if absent:
            words.append("without " + _alternatives(absent, "or", literal=False))
        rest = [note for note in _constraints(option, root) if not note.startswith("must not set")]
        if rest and not given:
            words.append(", ".join(rest))
        if words:
            parts.append((" " if given else ", ").join(words))
    if by_fields:
        lead = "allowed combinations" if keyword == "oneOf" else "needs at least one of"
    else:
        lead = "exactly one of these forms" if keyword == "oneOf" else "any of these forms"
    return f"{lead}: " + "; or ".join(parts)


def _absent_fields(forbidden: Any) -> list[str]:
    """Field names a ``not`` of ``required``s (alone or under ``anyOf``) forbids."""
    if not isinstance(forbidden, Mapping):
        return []
    names = list(forbidden.get("required", []))
    for option in forbidden.get("anyOf", []):
        if isinstance(option, Mapping):
            names.extend(option.get("required", []))
    return list(dict.fromkeys(names))


#: Names of well-known patterns: a description that uses one needs no note about the pattern.
_PATTERN_TERMS = ("dns-1123 label", "semantic version")


def _pattern(pattern: str) -> str:
    if pattern == DNS_LABEL_PATTERN:
        return (
            "must be a DNS-1123 label (lower-case letters, digits and `-`, "
            "starting and ending with a letter or digit)"
        )
    if pattern.startswith(SEMVER_PATTERN_PREFIX):
        return "must be a semantic version such as `1.2.3` or `1.3.0-rc.1`"
    return f"must match the regular expression `{pattern}`"


def _alternatives(values: Sequence[Any], word: str, *, literal: bool = True) -> str:
    quoted = [f"`{_literal(v) if literal else v}`" for v in values]
    if len(quoted) <= 2:
        return f" {word} ".join(quoted)
    return ", ".join(quoted[:-1]) + f" {word} {quoted[-1]}"


def _article(noun: str) -> str:
    return ("an " if noun[:1] in "aeiou" else "a ") + noun


def _plural(noun: str, count: Any) -> str:
    if count == 1:
        return noun
    return noun[:-1] + "ies" if noun.endswith("y") else noun + "s"


def _sentence(note: str) -> str:
    return note[:1].upper() + note[1:] + ("" if note.endswith(".") else ".")


def _plain(text: str) -> str:
    return text.replace("`", "").lower()


def _first_sentence(text: str) -> str:
    text = text.strip()
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^a-z0-9 _-]", "", heading.lower()).replace(" ", "-")


def _literal(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def main(argv: list[str] | None = None) -> int:
    """Write the reference page, or with ``--check`` tell whether it is stale (exit 1)."""
    parser = argparse.ArgumentParser(
        prog="python -m reconciler.tools.docgen",
        description="Generate docs/config-reference.md from the JSON Schemas in schemas/.",
    )
    parser.add_argument(
        "--output", type=Path, default=DEFAULT_OUTPUT, help="page to write (default: %(default)s)"
    )
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if the page is stale"
    )
    args = parser.parse_args(argv)
    output: Path = args.output
    expected = render_reference(load_schemas())
    if args.check:
        current = output.read_text(encoding="utf-8") if output.is_file() else None
        if current != expected:
            state = "missing" if current is None else "stale"
            command = REGENERATE if output == DEFAULT_OUTPUT else f"{REGENERATE} --output {output}"
            print(
                f"{output} is {state}: it differs from what schemas/ give. "
                f"Regenerate it with: {command}",
                file=sys.stderr,
            )
            return 1
        return 0
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(expected, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
