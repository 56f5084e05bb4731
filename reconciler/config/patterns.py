"""Schema ``pattern``s of the commit matched in linear time, by RE2 (pure).

A chart's ``values.schema.json`` and a CRD's ``openAPIV3Schema`` (which checks a module's
``config``) come with the commit. Python's ``re`` backtracks: ``^(a+)+$`` against 29 characters
takes a minute, holding the GIL, so one value stalls the daemon. Helm's engine and the API server
match patterns with Go's ``regexp``, which is RE2: linear in the text, and without lookaround or
backreferences. So the validators here match every pattern of such a schema (``pattern``,
``patternProperties``, and the properties ``additionalProperties`` leaves to them) with RE2
(the ``google-re2`` wheel), as the engines that judge the values later do; a pattern RE2 cannot
read is an error of the value it checks (Helm refuses such a schema too). Our own schemas
(``schemas/``) keep ``re``: their patterns are ours. Callers: :mod:`reconciler.config.chart_values`,
:mod:`reconciler.config.overrides`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from typing import Any


class _Unreadable:
    """A pattern RE2 cannot read: it matches nothing (the full validator says why)."""

    def search(self, text: str) -> None:
        return None

    def match(self, text: str) -> None:
        return None


@functools.lru_cache(maxsize=4096)
def compiled(pattern: str) -> Any:
    """``pattern`` compiled by RE2 (an object with ``search`` and ``match``), or one that
    matches nothing when RE2 cannot read it."""
    import re2  # only when a schema of the commit has patterns (startup time)

    try:
        return re2.compile(pattern)
    except re2.error:
        return _Unreadable()


def readable(pattern: str) -> bool:
    """Whether RE2 (Go's ``regexp``: Helm's and the API server's) reads ``pattern``."""
    return not isinstance(compiled(pattern), _Unreadable)


def found_in(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches somewhere in ``text`` (JSON Schema's ``pattern``), in time
    linear in ``text``."""
    return compiled(pattern).search(text) is not None


def linear_quick(validate: Callable[[Any], Any], schema: Mapping[str, Any]) -> Callable[[Any], Any]:
    """A ``fastjsonschema`` validator of ``schema`` whose patterns match by RE2: the generated
    code looks each pattern up in its ``REGEX_PATTERNS`` when it runs, by the pattern's text."""
    table = validate.__globals__.get("REGEX_PATTERNS")
    if isinstance(table, dict):
        for pattern in schema_patterns(schema):
            if pattern in table:
                table[pattern] = compiled(pattern)
    return validate


def schema_patterns(node: Any) -> set[str]:
    """Every ``pattern`` and ``patternProperties`` key in ``node``, at any depth."""
    found: set[str] = set()
    if isinstance(node, Mapping):
        if isinstance(node.get("pattern"), str):
            found.add(node["pattern"])
        if isinstance(node.get("patternProperties"), Mapping):
            found.update(str(key) for key in node["patternProperties"])
        for value in node.values():
            found |= schema_patterns(value)
    elif isinstance(node, list):
        for value in node:
            found |= schema_patterns(value)
    return found


@functools.cache
def with_linear_patterns(validator_class: Any) -> Any:
    """``jsonschema``'s ``validator_class`` with ``pattern``, ``patternProperties`` and
    ``additionalProperties`` matched by RE2 (messages as ``jsonschema`` words them)."""
    import jsonschema

    return jsonschema.validators.extend(  # type: ignore[no-untyped-call]
        validator_class,
        {
            "pattern": _pattern,
            "patternProperties": _pattern_properties,
            "additionalProperties": _additional_properties,
        },
    )


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema import ValidationError

    if not validator.is_type(instance, "string"):
        return
    if not readable(pattern):
        yield ValidationError(
            f"the pattern {pattern!r} is not RE2 syntax, which Helm and the API server read "
            "(no lookaround, no backreference)"
        )
    elif not found_in(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: Mapping[str, Any], instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if found_in(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[Any]:
    from jsonschema import ValidationError

    if not validator.is_type(instance, "object"):
        return
    known = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    extras = [
        key for key in instance if key not in known and not any(found_in(p, key) for p in patterns)
    ]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        if patterns:
            verb = "does" if len(extras) == 1 else "do"
            joined = ", ".join(repr(each) for each in sorted(extras))
            listed = ", ".join(repr(each) for each in sorted(patterns))
            yield ValidationError(f"{joined} {verb} not match any of the regexes: {listed}")
        else:
            shown = ", ".join(repr(each) for each in sorted(extras, key=str))
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(
                f"Additional properties are not allowed ({shown} {verb} unexpected)"
            )
