"""What a chart's ``values.schema.json`` may refer to: only itself (rule C6) (pure).

Three JSON Schema implementations read a chart's schema: ``fastjsonschema`` and ``jsonschema``
when ``validate`` checks the values (:mod:`reconciler.config.chart_values`), and Helm's engine
when it renders. Each resolves a ``$ref`` that is not inside the document by fetching it (over
HTTP, or from the host's disk for a relative or ``file:`` reference: Helm resolves them against
``file:///``, not the chart), and the fetched document would decide the verdict. So a reference
(``$ref``, ``$dynamicRef``, ``$recursiveRef``) must point inside its own document (``#``,
``#/definitions/port``, ``#name``), and ``$schema``, when given, must name one of the drafts the
three know without fetching anything. Values given as data (``enum``, ``const``, ``default``,
``examples``) are not schema and are not looked at.

:func:`schema_reference_problems` checks every ``values.schema.json`` of a chart (its subcharts'
under ``charts/`` too), each problem a C6 diagnostic at the keyword's line. Callers: the
validator, before any schema is compiled, and :mod:`reconciler.render.helm`, once more before a
chart (a pulled one too) is handed to the engine.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterator, Mapping
from typing import Any

from reconciler.core.diagnostics import Diagnostic, format_pointer
from reconciler.core.redaction import mask

SCHEMA_FILE = "values.schema.json"
RULE = "C6"
#: Keywords whose value is a reference to another schema.
REFERENCE_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")
#: The drafts every reader knows without fetching (with and without the trailing ``#``).
KNOWN_DRAFTS = frozenset(
    f"{scheme}://json-schema.org/{draft}{end}"
    for scheme in ("http", "https")
    for draft in (
        "draft-04/schema",
        "draft-06/schema",
        "draft-07/schema",
        "draft/2019-09/schema",
        "draft/2020-12/schema",
    )
    for end in ("", "#")
)
#: Keywords whose value is data, not a schema.
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})

#: (pointer to the keyword, the keyword, its value)
_Found = tuple[tuple[str | int, ...], str, str]


def schema_reference_problems(files: Mapping[str, bytes], root: str) -> list[Diagnostic]:
    """One C6 diagnostic per reference of a ``values.schema.json`` in ``files`` (a chart's,
    shown as ``root``) to anything outside its own document."""
    found: list[Diagnostic] = []
    for path in sorted(files):
        if posixpath.basename(path) != SCHEMA_FILE:
            continue
        text = files[path].decode(errors="replace")
        try:
            schema = json.loads(text)
        except ValueError:
            continue  # not JSON: reported by the values check, refused by the engine
        seen: dict[tuple[str, str], int] = {}
        for pointer, keyword, value in _outside(schema, ()):
            occurrence = seen[(keyword, value)] = seen.get((keyword, value), 0) + 1
            line, column = _place(text, keyword, value, occurrence)
            message = _message(keyword, value)
            pointed = format_pointer(pointer)
            found.append(Diagnostic(f"{root}/{path}", line, column, RULE, message, pointed))
    return found


def _outside(node: Any, at: tuple[str | int, ...]) -> Iterator[_Found]:
    """The references of a schema to other documents, in the order they are written."""
    if isinstance(node, list):
        for index, item in enumerate(node):
            yield from _outside(item, (*at, index))
        return
    if not isinstance(node, Mapping):
        return
    for key, value in node.items():
        if isinstance(value, str) and _refused(key, value):
            yield (*at, key), key, value
        elif key not in _DATA_KEYWORDS:
            yield from _outside(value, (*at, key))


def _refused(key: str, value: str) -> bool:
    if key in REFERENCE_KEYWORDS:
        return not value.startswith("#")
    return key == "$schema" and value not in KNOWN_DRAFTS


def _message(keyword: str, value: str) -> str:
    shown = f"'{mask(value)[:200]}'"
    if keyword == "$schema":
        return (
            f"$schema {shown} is not a JSON Schema draft known offline (draft-04, -06, -07, "
            "2019-09, 2020-12 at json-schema.org): it would be fetched; name a draft or leave "
            "$schema out"
        )
    return (
        f"{keyword} {shown} points outside the schema: it would be fetched (over the network "
        "or from the host's disk) when values are checked; refer only inside the file "
        "('#/definitions/...') and copy what it refers to there"
    )


def _place(text: str, keyword: str, value: str, occurrence: int) -> tuple[int, int]:
    """Line and column of the ``occurrence``-th ``"keyword": "value"`` in ``text`` (1, 1 when
    it is written with escapes that make it another string)."""
    pattern = re.compile(
        re.escape(json.dumps(keyword)) + r"\s*+:\s*+" + re.escape(json.dumps(value))
    )
    for index, match in enumerate(pattern.finditer(text), 1):
        if index == occurrence:
            start = match.start()
            line = text.count("\n", 0, start) + 1
            return line, start - (text.rfind("\n", 0, start) + 1) + 1
    return 1, 1
