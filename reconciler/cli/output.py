"""How commands print what they found, the same way everywhere (kubectl's conventions).

- ``-o/--output text|json|yaml|wide`` (``--format`` is the older spelling of the same option):
  ``text`` a table with a header row (``--no-headers`` drops it), ``wide`` the same with more
  columns, ``json``/``yaml`` a versioned document for tools.
- Every document carries ``apiVersion`` (:data:`OUTPUT_API_VERSION`) and ``kind``; fields are
  only added within a version. ``docs/json-output.md`` holds the schema of each kind, and a test
  validates every command's output against it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from reconciler.core.model import OUTPUT_API_VERSION

F = TypeVar("F", bound=Callable[..., Any])


def output_option(
    *formats: str, default: str = "text", help: str | None = None
) -> Callable[[F], F]:
    """``-o/--output FORMAT`` (also ``--format``) with the choices ``formats``."""
    return click.option(
        "-o",
        "--output",
        "--format",
        "output_format",
        type=click.Choice(list(formats)),
        default=default,
        show_default=True,
        help=help or _OUTPUT_HELP,
    )


_OUTPUT_HELP = (
    "text: a table with a header; wide: more columns; json/yaml: a versioned document "
    "(docs/json-output.md)."
)

no_headers_option = click.option(
    "--no-headers", is_flag=True, help="Leave out the header row of text and wide tables."
)


def document(kind: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` as a versioned document of ``kind``."""
    return {"apiVersion": OUTPUT_API_VERSION, "kind": kind, **body}


def document_text(value: Mapping[str, Any], output_format: str) -> str:
    """A document as JSON (sorted keys, indented) or YAML, ending in a newline."""
    if output_format == "yaml":
        import yaml

        return str(yaml.safe_dump(dict(value), sort_keys=True, allow_unicode=True))
    return json.dumps(value, indent=2, sort_keys=True) + "\n"


def echo_document(kind: str, body: Mapping[str, Any], output_format: str) -> None:
    """Print ``body`` as a document of ``kind`` in ``output_format`` (json or yaml)."""
    click.echo(document_text(document(kind, body), output_format), nl=False)


def is_document(output_format: str) -> bool:
    """Whether ``output_format`` asks for a document (json, yaml) rather than a table."""
    return output_format in ("json", "yaml")


@dataclass(frozen=True, slots=True)
class Column:
    """A table column: its header, and whether only ``-o wide`` shows it."""

    header: str
    wide: bool = False


def table_lines(
    columns: Sequence[Column],
    rows: Sequence[Sequence[str]],
    *,
    wide: bool = False,
    headers: bool = True,
) -> list[str]:
    """``rows`` aligned in columns (two spaces apart), under a header row unless ``headers``
    is false; the wide columns only when ``wide``. A short row leaves its last cells empty."""
    shown = [i for i, c in enumerate(columns) if wide or not c.wide]
    table = [[columns[i].header for i in shown]] if headers else []
    table += [[str(row[i]) if i < len(row) else "" for i in shown] for row in rows]
    if not table:
        return []
    widths = [max(len(line[k]) for line in table) for k in range(len(shown))]
    return ["  ".join(c.ljust(widths[k]) for k, c in enumerate(line)).rstrip() for line in table]
