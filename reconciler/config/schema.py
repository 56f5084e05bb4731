"""Checks documents against the JSON Schemas of their kind (rule C1), as diagnostics (pure).

Two validators, one verdict: a schema compiled to Python by ``fastjsonschema`` answers "valid?"
for the common case (every document of a healthy repo) about fifteen times faster than
``jsonschema``; a document it rejects is checked again by ``jsonschema``'s draft 2020-12
validator, which lists *every* error with its JSON pointer (``jsonschema`` is imported only
then: a healthy repo never pays for it). Messages are rewritten to read like a
compiler's (unknown field with a suggestion, missing field, wrong type), naming the field and
the rule but never the value (a secret pasted into the wrong field is not printed back).
Callers: the validator.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import fastjsonschema

from reconciler.config.budget import TimeBudget
from reconciler.config.yamlsafe import Document
from reconciler.core.diagnostics import Diagnostic, Pointer, did_you_mean
from reconciler.core.diagnostics import format_pointer as _text

if TYPE_CHECKING:
    import jsonschema

DNS_LABEL_PATTERN = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
SEMVER_PATTERN_PREFIX = "^(0|[1-9]\\d*)\\.(0|[1-9]\\d*)\\.(0|[1-9]\\d*)"
#: A duration of the config format (``1h30m``, ``45s``), as the schemas write it.
DURATION_PATTERN = "^(?=.)([0-9]+h)?([0-9]+m)?([0-9]+s)?$"
_TYPE_NAMES = {
    dict: "a mapping",
    list: "a list",
    str: "a string",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    type(None): "empty (null)",
}


@dataclass(slots=True)
class SchemaChecker:
    """Validates documents of each kind; build once, use for every document of a repo.

    ``fast=False`` skips the compiled fast path (the benchmark's naive baseline and the tests
    that compare both paths use it).
    """

    schemas: Mapping[str, Mapping[str, Any]]
    fast: bool = True
    #: Builds the fast check of a (draft-07) schema: by default fastjsonschema's ``compile``; the
    #: command line hands one that keeps the compiled code on disk
    #: (:func:`reconciler.source.schemas.disk_compiler`).
    compiler: Callable[[Mapping[str, Any]], Callable[[Any], Any]] | None = None
    _full: dict[str, Any] = field(default_factory=dict, init=False)
    _quick: dict[str, Callable[[Any], Any]] = field(default_factory=dict, init=False)

    def check(
        self, kind: str, document: Document, budget: TimeBudget | None = None
    ) -> list[Diagnostic]:
        """Every schema violation of ``document`` read as a ``kind``, sorted by place; the
        ``budget``, if any, is looked at after each error."""
        if self.fast and self._quick_valid(kind, document.data):
            return []
        errors = []
        for error in self._validator(kind).iter_errors(document.data):
            errors.append(error)
            if budget is not None:
                budget.check()
        return diagnostics_of(errors, document, budget)

    def is_valid(self, kind: str, data: Any) -> bool:
        """The verdict alone (used by tests to compare both validators)."""
        if self.fast:
            return self._quick_valid(kind, data)
        return bool(self._validator(kind).is_valid(data))

    def _quick_valid(self, kind: str, data: Any) -> bool:
        quick = self._quick.get(kind)
        if quick is None:
            view = draft7_view(self.schemas[kind])
            compiler = self.compiler or compile_quick
            quick = self._quick[kind] = compiler(view)
        try:
            quick(data)
        except fastjsonschema.JsonSchemaException:
            return False
        return True

    def _validator(self, kind: str) -> Any:
        validator = self._full.get(kind)
        if validator is None:
            schema = self.schemas[kind]
            validator = self._full[kind] = validator_class()(schema)
        return validator


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[Any]:
    """``uniqueItems`` in linear time: jsonschema compares unhashable items pairwise, and a
    hostile list of a few thousand mappings would take minutes."""
    if unique and isinstance(instance, list):
        seen = {_hashable(item) for item in instance}
        if len(seen) < len(instance):
            import jsonschema

            yield jsonschema.ValidationError("has duplicate entries")


def _hashable(value: Any) -> Hashable:
    """A value equal (and hashing alike) for JSON-equal values: ``1 == 1.0``, ``True != 1``."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, dict):
        return ("map", frozenset((k, _hashable(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("list", tuple(_hashable(v) for v in value))
    hashable: Hashable = value  # str, int, float, None
    return hashable


def compile_quick(view: Mapping[str, Any]) -> Callable[[Any], Any]:
    """fastjsonschema's validator of ``view`` (``use_default=False``: validation must never
    write defaults into the documents)."""
    return fastjsonschema.compile(dict(view), use_default=False)


@functools.cache
def validator_class() -> Any:
    """Draft 2020-12 with a linear ``uniqueItems``; imports ``jsonschema`` on first use."""
    import jsonschema

    return jsonschema.validators.extend(  # type: ignore[no-untyped-call]
        jsonschema.Draft202012Validator, {"uniqueItems": _unique_items}
    )


def diagnostics_of(
    errors: list[jsonschema.ValidationError],
    document: Document,
    budget: TimeBudget | None = None,
) -> list[Diagnostic]:
    """The diagnostics of ``errors`` found in ``document``, sorted by place (the ``budget``, if
    any, looked at after each)."""
    misspelled = _misspelled_required(errors)
    meant: dict[Pointer, set[str]] = {}  # by object: the required fields found misspelled
    for (pointer, _), name in misspelled.items():
        meant.setdefault(pointer, set()).add(name)
    found = []
    for error in errors:
        if _explained_by_misspelling(error, meant):
            continue
        for diagnostic in _diagnostics(error, document, misspelled):
            found.append(diagnostic)
            if budget is not None:
                budget.check()
    return sorted(found)


def draft7_view(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The same schema announced as draft-07, the newest draft fastjsonschema compiles.

    Our schemas use only keywords whose meaning did not change between draft-07 and 2020-12;
    a test checks both validators agree on every fixture.
    """
    view = dict(schema)
    view["$schema"] = "http://json-schema.org/draft-07/schema#"
    return view


_Misspellings = dict[tuple[Pointer, str], str]


def _misspelled_required(errors: list[jsonschema.ValidationError]) -> _Misspellings:
    """(object pointer, unknown key) -> the missing required field it is a misspelling of.

    A misspelled required field is one mistake; it should give one error, not "unknown field"
    plus "missing required field".
    """
    missing: dict[Pointer, set[str]] = {}
    for error in errors:
        if error.validator == "required" and isinstance(error.instance, dict):
            names = _missing(error)
            missing.setdefault(tuple(error.absolute_path), set()).update(names)
    found: _Misspellings = {}
    for error in errors:
        pointer = tuple(error.absolute_path)
        if error.validator != "additionalProperties" or pointer not in missing:
            continue
        for key in _unknown_keys(error):
            import difflib  # only for a misspelt key (startup time)

            close = difflib.get_close_matches(key, sorted(missing[pointer]), n=1, cutoff=0.6)
            if close:
                found[(pointer, key)] = close[0]
    return found


def _explained_by_misspelling(
    error: jsonschema.ValidationError, meant: Mapping[Pointer, set[str]]
) -> bool:
    if error.validator != "required":
        return False
    names = meant.get(tuple(error.absolute_path), set())
    missing = _missing(error)
    return bool(missing) and missing <= names


def _missing(error: jsonschema.ValidationError) -> set[str]:
    """The required fields a ``required`` error's object lacks."""
    required: Any = error.validator_value
    instance: Any = error.instance
    if not isinstance(instance, dict):
        return set()
    return {str(k) for k in required if k not in instance}


def _unknown_keys(error: jsonschema.ValidationError) -> list[str]:
    allowed = _schema_of(error).get("properties", {})
    instance = error.instance if isinstance(error.instance, dict) else {}
    return [str(k) for k in instance if k not in allowed]


def _diagnostics(
    error: jsonschema.ValidationError, document: Document, misspelled: _Misspellings
) -> Iterator[Diagnostic]:
    pointer: Pointer = tuple(error.absolute_path)
    validator = error.validator
    if validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = list(_schema_of(error).get("properties", {}))
        for key in _unknown_keys(error):
            meant = misspelled.get((pointer, key))
            hint = f"; did you mean '{meant}'? (a required field)" if meant else ""
            message = f"unknown field '{key}'{hint or did_you_mean(key, allowed)}"
            yield document.diagnostic("C1", message, (*pointer, key), key=True)
        return
    if _about_a_key(error) and isinstance(error.instance, str):
        # placed at the key itself, but the pointer stops at its mapping: it never shows the key
        at = document.position((*pointer, error.instance), key=True)
        yield Diagnostic(document.path, at.line, at.column, "C1", _message(error), _text(pointer))
        return
    yield document.diagnostic("C1", _message(error), pointer)


def _schema_of(error: jsonschema.ValidationError) -> Mapping[str, Any]:
    schema = error.schema
    return schema if isinstance(schema, Mapping) else {}


def _about_a_key(error: jsonschema.ValidationError) -> bool:
    """A ``propertyNames`` error: a key of the mapping at the error's path is wrong."""
    return "propertyNames" in error.absolute_schema_path


def _message(error: jsonschema.ValidationError) -> str:
    """What is wrong, naming the field and the rule; never the value (S4: a token pasted into
    the wrong field must not be printed back)."""
    value: Any = error.instance
    expected: Any = error.validator_value
    if error.validator == "required":
        missing = [k for k in expected if isinstance(value, dict) and k not in value]
        return f"missing required field '{missing[0] if missing else expected}'"
    if error.validator == "type":
        return f"must be {_type_phrase(expected)}, not {_kind_of(value)}"
    combination = _combination_rule(error)
    if combination is not None:
        return combination
    subject = _subject(error)
    rule = _rule(error)
    return f"{subject} {rule}" if subject else rule


def _subject(error: jsonschema.ValidationError) -> str:
    """The field the message is about (``metadata.name``, ``spec.dependsOn[1]``), ``""`` for
    the document itself."""
    field = ""
    for segment in error.absolute_path:
        field += f"[{segment}]" if isinstance(segment, int) else f".{segment}"
    field = field.removeprefix(".")
    if _about_a_key(error):
        return f"a key of {field}" if field else "a key"
    return field


def _rule(error: jsonschema.ValidationError) -> str:
    validator, value = error.validator, error.instance
    expected: Any = error.validator_value
    if validator == "const":
        return f"must be {expected!r}"
    if validator == "enum":
        options = ", ".join(str(o) for o in expected)
        return f"is not one of: {options}{did_you_mean(str(value), map(str, expected))}"
    if validator == "pattern":
        return _pattern_phrase(str(expected))
    return _size_rule(error) or f"breaks the schema rule '{validator}'"


def _size_rule(error: jsonschema.ValidationError) -> str | None:
    validator = error.validator
    value: Any = error.instance
    expected: Any = error.validator_value
    if validator == "maxLength":
        return f"is longer than {expected} characters ({len(value)})"
    if validator == "minLength":
        return "must not be empty" if expected == 1 else f"is shorter than {expected} characters"
    if validator == "minItems":
        return "must not be empty" if expected == 1 else f"needs at least {expected} entries"
    if validator == "minimum":
        return f"must be at least {expected}"
    if validator == "maximum":
        return f"must be at most {expected}"
    if validator == "uniqueItems":
        return "has duplicate entries"
    if validator == "not" and isinstance(expected, Mapping) and "enum" in expected:
        return "must not be " + " or ".join(repr(v) for v in expected["enum"])
    if validator == "not":
        return "is not allowed here"
    return None


def _combination_rule(error: jsonschema.ValidationError) -> str | None:
    validator = error.validator
    expected: Any = error.validator_value
    schema = _schema_of(error)
    if validator in ("minProperties", "maxProperties") and schema.get("maxProperties") == 1:
        return "needs exactly one of: " + ", ".join(schema.get("properties", {}))
    if validator in ("oneOf", "anyOf"):
        required = [r for branch in expected for r in branch.get("required", ())]
        how = "exactly one" if validator == "oneOf" else "at least one"
        if required and all(branch.get("required") for branch in expected):
            return f"needs {how} of: " + ", ".join(dict.fromkeys(required))
        return f"matches {'not exactly one' if validator == 'oneOf' else 'none'} of its forms"
    return None


def _pattern_phrase(pattern: str) -> str:
    if pattern == DNS_LABEL_PATTERN:
        return (
            "does not match the pattern of a DNS-1123 label (lower-case letters, digits and "
            "'-', starting and ending with a letter or digit)"
        )
    if pattern.startswith(SEMVER_PATTERN_PREFIX):
        return "is not a semantic version (e.g. 1.2.3 or 1.3.0-rc.1)"
    if pattern == DURATION_PATTERN:
        return (
            "is not a duration such as 30s, 10m or 1h30m (whole hours, minutes and seconds in "
            "that order; no sign, no spaces)"
        )
    return f"does not match the pattern {pattern}"


def _type_phrase(expected: Any) -> str:
    names = {
        "object": "a mapping",
        "array": "a list",
        "string": "a string",
        "boolean": "a boolean",
        "integer": "an integer",
        "number": "a number",
        "null": "null",
    }
    if isinstance(expected, list):
        return " or ".join(names.get(str(t), str(t)) for t in expected)
    return names.get(str(expected), str(expected))


def _kind_of(value: Any) -> str:
    return _TYPE_NAMES.get(type(value), type(value).__name__)
